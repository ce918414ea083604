"""`etai report` and `etai gate`: thin commands over reports.compare/write_report and reports.gate.

Exit codes follow harness/cli.py: the gate returns 0 (pass), 1 (a rule failed) or 3 (it cannot
decide: a run is incomplete, or a rule measured no valid episode); bad input is an InputError,
which the CLI turns into 2.
"""

from __future__ import annotations

import argparse
import sys

from harness.base.errors import InputError


def add_parsers(sub) -> None:
    r = sub.add_parser(
        "report",
        help="compare runs (and training checkpoints) in a Markdown/HTML/JSON report",
        description="Load run folders (results.jsonl + summary.json) and HarnessEval training "
        "folders (harness-eval/ba<N>/), compare them on the sessions they all have, "
        "and write report.md (figures beside it), a self-contained report.html "
        "and/or report.json into OUT.",
    )
    r.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run folder, training folder, or the run of a suite set (`etai run --suite SET` "
        "writes one: its suites are reported by suite and pooled with error bars by project) "
        "(repeatable)",
    )
    r.add_argument("--out", required=True, help="folder to write the report into")
    r.add_argument(
        "--format",
        action="append",
        choices=("md", "html", "json"),
        help="md, html or json (repeatable; default md and html)",
    )
    r.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare runs even if their sessions differ in content or suite name",
    )
    _window_args(r, "report")
    r.add_argument(
        "--by",
        choices=("suite",),
        help="suite: runs of several suites side by side (a model × suite matrix, then each "
        "suite's own sections)",
    )
    r.set_defaults(func=_report)

    v = sub.add_parser(
        "view",
        help="episode transcripts of runs: a static HTML file (--out) or a loopback server",
        description="Show every episode of the run and training folders given: the list with "
        "filters, each episode's steps, results, paths, cursor and verdict, and every agent on "
        "one session side by side. --out writes one self-contained HTML file; otherwise a server "
        "on --host (127.0.0.1) answers at the printed URL with these runs only.",
    )
    v.add_argument("runs", nargs="+", metavar="RUN", help="run folder or training folder")
    v.add_argument("--out", metavar="FILE", help="write a static view.html and exit")
    v.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    v.add_argument("--host", default="127.0.0.1", help="server address (default 127.0.0.1)")
    v.set_defaults(func=_view)

    g = sub.add_parser(
        "gate",
        help="check rules on a run, alone or against a baseline run; exit 0/1/2/3",
        description="Rules: [SUITE:]METRIC OP NUMBER (pass@1>=0.6, tamper_rate==0, "
        "special_case_rate==0, humaneval:pass@1>=0.6) or METRIC OP baseline [- MARGIN] "
        "[alpha=A] (pass@1 >= baseline - 0.05), a non-inferiority check with a one-sided paired test (named in the output). "
        "Metrics are the suite kind's own: a HumanEval run has pass@N and status counts.",
        epilog="Exit codes: 0 every rule passed, 1 a rule failed, 2 bad input, "
        "3 the gate cannot decide: a run is incomplete (infra errors or no summary; rerun "
        "`etai run`) or a rule measured no valid episode.",
    )
    g.add_argument(
        "candidate",
        nargs="+",
        metavar="CANDIDATE",
        help="run folder to gate (repeatable: one per suite; SUITE:RULE applies to one), or the "
        "run of a suite set (`etai run --suite SET`), gated once on its suites' rows pooled, "
        "with standard errors clustered by project",
    )
    g.add_argument(
        "--baseline",
        action="append",
        metavar="RUN",
        help="run folder to compare with (repeatable: paired with the candidate of its suite)",
    )
    g.add_argument(
        "--agent", metavar="SPEC", help="the candidate's agent (needed when the run has several)"
    )
    g.add_argument(
        "--baseline-agent",
        metavar="SPEC",
        help="the baseline's agent (default: --agent, or its only one)",
    )
    how = g.add_mutually_exclusive_group(required=True)
    how.add_argument("--rule", action="append", metavar="EXPR", help="a rule (repeatable)")
    how.add_argument("--config", metavar="GATE.yaml", help="rules and options from a YAML file")
    g.add_argument(
        "--alpha", type=float, default=None, help="level of the paired tests (default 0.05)"
    )
    g.add_argument(
        "--allow-mismatch", action="store_true", help="compare with a baseline of other sessions"
    )
    g.add_argument(
        "--allow-partial",
        action="store_true",
        help="gate a run that lacks rows of some of its sessions on the sessions present "
        "(else exit 3 naming them)",
    )
    _window_args(g, "gate")
    g.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    g.add_argument(
        "--markdown", metavar="FILE", help="write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)"
    )
    g.add_argument("--json", metavar="FILE", help="write the result as JSON")
    g.set_defaults(func=_gate)


def _window_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--since",
        metavar="DATE",
        help=f"{what} only the sessions whose fix is dated on or after DATE (ISO, YYYY-MM-DD, in "
        "UTC); sessions with no fix date are left out and counted in a note",
    )
    p.add_argument(
        "--until", metavar="DATE", help="only the sessions whose fix is dated on or before DATE"
    )


def _report(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.session.window import Window
    from reports import compare, load, write_report
    from reports._complete import Gaps
    from reports._dates import restrict
    from reports._sets import expand, is_set

    window = Window.of(args.since, args.until)  # a bad date is exit 2 before any run is read
    # the run of a suite set is one run folder per suite: reported by suite, then pooled
    sets = any(is_set(p) for p in args.runs)
    by = "suite" if sets else args.by
    runs, unrun = expand(args.runs)
    if not runs:
        raise InputError("no run folder: " + "; ".join(unrun))
    if by == "suite":
        # the command's code, imported when it runs: `etai --help` stays fast
        from reports._suites import by_suite

        lenient = unrun if sets else None  # a set's suites: a project may have no fix in the window
        cs = by_suite(runs, allow_mismatch=args.allow_mismatch, window=window, left_out=lenient)
    else:
        cs = [compare(restrict(load(runs, allow_mismatch=args.allow_mismatch), window))]
    doc = cs if by == "suite" else cs[0]
    written = write_report(doc, args.out, tuple(dict.fromkeys(args.format or ["md", "html"])))
    for path in written.values():
        print(path)
    for note in unrun:
        print(f"etai report: {note}", file=sys.stderr)
    for c in cs:
        for run in c.runs:  # rows left out as foreign, sessions without rows: reports/_complete.py
            for note in Gaps(**run["gaps"]).notes(run["path"]):
                print(f"etai report: {note}", file=sys.stderr)
        if c.dropped:
            print(
                f"{c.suite}: {len(c.dropped)} session(s) not in every run were left out "
                "(listed in the report)",
                file=sys.stderr,
            )
    return 0


def _view(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from reports import view

    if args.out:
        print(view.write(view.load_view(args.runs), args.out))
        return 0
    view.serve(args.runs, host=args.host, port=args.port)
    return 0


def _gate(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.session.window import Window
    from reports import gate
    from reports._gate import ALPHA, load_config
    from reports._gate_out import markdown, write

    cfg = load_config(args.config) if args.config else {"rules": args.rule}
    window = Window.of(args.since or cfg.get("since"), args.until or cfg.get("until"))
    result = gate(
        args.candidate,
        cfg["rules"],
        baseline=args.baseline or cfg.get("baseline"),  # a path or a list of them
        agent=args.agent or cfg.get("agent"),
        baseline_agent=args.baseline_agent or cfg.get("baseline_agent"),
        alpha=args.alpha if args.alpha is not None else float(cfg.get("alpha", ALPHA)),
        allow_mismatch=args.allow_mismatch or bool(cfg.get("allow_mismatch")),
        allow_partial=args.allow_partial or bool(cfg.get("allow_partial")),
        window=window,
    )
    write(result, junit=args.junit, md=args.markdown, json_path=args.json)
    print(markdown(result))
    if result.undecided:  # CI logs show stderr: exit 3 must not read as the model failing
        print(f"etai gate: cannot decide: {result.undecided}", file=sys.stderr)
    return result.exit_code
