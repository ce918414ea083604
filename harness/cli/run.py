"""`etai run`, `etai suite validate`, `etai suite record`: the session-replay commands."""

from __future__ import annotations

import argparse
import json
import sys

from harness.base.cpus import available_cpus
from harness.base.errors import InputError


def add_parsers(sub) -> None:
    r = sub.add_parser(
        "run",
        help="replay a suite with one or more agents and score them",
        description="Replay every session of a suite with each agent inside hardened sandboxes, verify with "
        "the session's tests, and score Path Accuracy@1..k, pass@k, path match and cursor error. "
        "Rows go to OUT/results.jsonl as they finish; rerunning the same command resumes.",
        epilog="Agents: oracle, noop, replay:FILE, hf:PATH, openai:BASE_URL[#MODEL]. "
        "Example: etai run --suite jest-bugfix --agent oracle --agent noop",
    )
    r.add_argument(
        "--suite",
        required=True,
        help="bundled suite name (jest-bugfix, or humaneval for code "
        "completions scored in the sandbox), a suite folder, or a suite set (a folder with "
        "suite-set.json, as `etai suite fetch` writes: every suite in it, each into "
        "OUT/<suite>/)",
    )
    r.add_argument(
        "--agent", action="append", required=True, metavar="SPEC", help="agent spec (repeatable)"
    )
    r.add_argument(
        "-k",
        type=int,
        default=None,
        help="tool-call budget for Path Accuracy (default: suite's, 3)",
    )
    r.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="step budget of a rollout (default: suite's, 10)",
    )
    r.add_argument(
        "--samples",
        type=int,
        default=1,
        help="rollouts per session and agent, for pass@k (default 1)",
    )
    r.add_argument(
        "--workers",
        type=int,
        default=None,
        help="sessions in parallel (default: one per CPU this process may use)",
    )
    r.add_argument("--out", default=None, help="run folder (default runs/<suite>)")
    r.add_argument(
        "--session",
        action="append",
        metavar="ID",
        help="only these session ids, or HumanEval task ids (repeatable)",
    )
    r.add_argument(
        "--sandbox",
        default="docker",
        help="sandbox implementation: docker (default) or local (UNSAFE)",
    )
    r.add_argument(
        "--executor",
        default="local",
        metavar="SPEC",
        help="where episodes run: local (this machine's thread pool, default) or ray[:ADDRESS] "
        "(an existing Ray cluster's nodes that declare the etai_sandbox resource; rows are still "
        "written here)",
    )
    r.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --executor ray: the cluster (default $RAY_ADDRESS, else auto)",
    )
    r.add_argument(
        "--temperature", type=float, help="sampling temperature for model agents (0 = greedy)"
    )
    r.add_argument("--top-p", type=float, help="nucleus sampling for model agents")
    r.add_argument("--max-new-tokens", type=int, help="generation budget per step for model agents")
    r.add_argument(
        "--json", action="store_true", help="print the summary as JSON instead of a table"
    )
    r.add_argument(
        "--allow-missing",
        action="store_true",
        help="a replay:FILE without a line for some (session, sample) of the run scores it as a "
        "rollout of no actions (default: exit 2 naming them)",
    )
    # harness.grading.verify.REGRESSION_MODES, written out: importing the grading code here would
    # slow every `etai --help` (tests/harness/test_verify.py holds the two equal)
    r.add_argument(
        "--regression",
        choices=("related", "whole"),
        default="related",
        help="which test files a graded run runs besides the verification files: those Jest's "
        "dependency graph relates to the files the agent changed, of them those with a test "
        "passing at the start (related, the default; docs/grading.md), or every one (whole)",
    )
    r.add_argument(
        "--since",
        metavar="DATE",
        help="only sessions whose fix is dated on or after DATE (ISO, YYYY-MM-DD, in UTC); "
        "sessions with no fix date are left out and counted",
    )
    r.add_argument(
        "--until", metavar="DATE", help="only sessions whose fix is dated on or before DATE"
    )
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=_run)

    s = sub.add_parser("suite", help="validate or record a session suite").add_subparsers(
        dest="sub", required=True
    )
    v = s.add_parser(
        "validate",
        help="check every session of a suite; exit 2 listing each problem",
        description="Check every session of a suite: every field, path and reference the loader "
        "reads, and every held-out test case against the cases that stay visible (one with a "
        "visible twin, the same shape or the same literal values, is a problem). Exit 2 listing "
        "each problem.",
    )
    v.add_argument("path", help="suite folder or bundled name")
    v.add_argument(
        "--jest",
        action="store_true",
        help="also replay every reference in the sandbox (non-green start, green within k, "
        "untampered, repeatable), check the trace edits only source files where the cursor "
        "target is, and measure that no held-out case executes a changed line of the reference "
        "that no visible case executes (coverage not measured is counted apart)",
    )
    v.add_argument("--sandbox", default="docker", help="with --jest: the sandbox (default docker)")
    v.add_argument(
        "--workers",
        type=int,
        default=None,
        help="with --jest: sessions in parallel (default: one per CPU this process may use)",
    )
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.set_defaults(func=_validate)
    rec = s.add_parser(
        "record", help="run each reference trace in the sandbox and write real results back"
    )
    rec.add_argument("path", help="suite folder or bundled name")
    rec.add_argument("--sandbox", default="docker")
    rec.add_argument(
        "--workers",
        type=int,
        default=None,
        help="sessions in parallel (default: one per CPU this process may use)",
    )
    rec.set_defaults(func=_record)
    from harness.authoring.build.cli import add_parser as add_build  # `etai suite build`
    from harness.authoring.etai_js.cli import add_parser as add_fetch  # `etai suite fetch`
    from harness.authoring.mine.cli import add_parser as add_mine  # `etai suite mine`

    add_build(s)
    add_mine(s)
    add_fetch(s)


def _run(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.runs.runner import run
    from harness.session.window import note as window_note

    options = {
        k: v
        for k, v in (
            ("temperature", args.temperature),
            ("top_p", args.top_p),
            ("max_new_tokens", args.max_new_tokens),
        )
        if v is not None
    }
    from harness.session.suite_set import is_set

    if is_set(args.suite):  # a folder of suites, one per project (`etai suite fetch` writes one)
        return _run_set(args, options)
    summary = run(
        args.suite,
        args.agent,
        k=args.k,
        samples=args.samples,
        max_steps=args.max_steps,
        workers=args.workers,
        out=args.out,
        sandbox=args.sandbox,
        options=options,
        progress=not args.no_progress,
        session_ids=args.session,
        executor=_executor(args),
        allow_missing=args.allow_missing,
        regression=args.regression,
        since=args.since,
        until=args.until,
    )
    window = summary.get("fix_window")
    if window:  # stderr: the table or JSON on stdout stays as it is
        print(f"etai run: {window_note(window)}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        # the command's code, imported when it runs: `etai --help` stays fast
        from harness.suites.kinds import SUITE_KINDS

        print(SUITE_KINDS.get(summary["kind"]).table(summary))
    return 0 if summary["complete"] else 3


def _run_set(args: argparse.Namespace, options: dict) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.cli.run_set import run_set
    from harness.session.window import note as window_note
    from harness.suites.kinds import SUITE_KINDS

    result = run_set(
        args.suite, args.agent, out=args.out, k=args.k, session_ids=args.session,
        since=args.since, until=args.until, samples=args.samples, max_steps=args.max_steps,
        workers=args.workers, sandbox=args.sandbox, options=options,
        progress=not args.no_progress, executor=_executor(args),
        allow_missing=args.allow_missing, regression=args.regression,
    )  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
    for member, summary in result["suites"].items():
        if summary.get("fix_window"):
            print(f"etai run: {member}: {window_note(summary['fix_window'])}", file=sys.stderr)
        if not args.json:
            print(f"## {member}\n{SUITE_KINDS.get(summary['kind']).table(summary)}\n")
    out = result["out"]
    print(f"etai run: {result['name']}: {len(result['suites'])} suite(s) run into {out}; pooled "
          f"with error bars by project: etai report {out} --out REPORT, etai gate {out} --rule "
          "...", file=sys.stderr)  # fmt: skip
    return 0 if result["complete"] else 3


def _executor(args: argparse.Namespace) -> str:
    if args.ray_address is None:
        return args.executor
    if args.executor != "ray":
        raise InputError(
            f"--ray-address goes with --executor ray (got --executor {args.executor})",
            where="--ray-address",
        )
    return f"ray:{args.ray_address}"


def _validate(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.suites.load import load_suite

    suite = load_suite(args.path)
    _audit_held_out(suite)
    if args.jest:
        return _validate_with_jest(suite, args)
    print(
        f"{suite.name}: {len(suite.sessions)} sessions ok "
        f"({len({s.intent for s in suite.sessions})} intents) at {suite.path}"
    )
    return 0


def _audit_held_out(suite) -> None:
    """Every held-out case read against the cases that stay visible: one with a visible twin is
    refused (a fix keyed on the twin's inputs passes it; docs/held-out-tests.md)."""
    from harness.authoring.check import held_out_audit

    audits = [held_out_audit(s) for s in suite.sessions if s.held_out_dir is not None]
    if not audits:
        return
    held = sum(len(a.held_out) for a in audits)
    twins = [(a.session_id, t) for a in audits for t in a.twins]
    for sid, (case, twin) in twins:
        print(f"FAIL  {sid}: held-out case {case} has a visible twin {twin}")
    print(
        f"held-out cases: {held} in {len(audits)} sessions, "
        f"{len(twins)} with a visible twin ({len(twins) / held if held else 0:.1%})"
    )
    if twins:
        raise InputError(
            f"{len(twins)} of {held} held-out cases have a visible twin", where=str(suite.path)
        )


def _validate_with_jest(suite, args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.authoring.check import check_suite, coverage_line
    from harness.runs.runner import at_least_one
    from harness.sandbox import require_kind

    require_kind(args.sandbox)
    workers = available_cpus() if args.workers is None else at_least_one("workers", args.workers)
    checks = check_suite(
        suite, sandbox=args.sandbox, workers=workers, progress=not args.no_progress
    )
    for c in checks:
        if c.ok:
            print(f"ok    {c.session_id}: the reference reaches green at step {c.steps_to_green}")
        else:
            print(f"FAIL  {c.session_id}: " + "; ".join(c.problems))
        if c.coverage is not None and c.coverage.not_measured:
            print(
                f"      {c.session_id}: held-out coverage not measured: {c.coverage.not_measured}"
            )
    if any(c.coverage is not None for c in checks):
        print(coverage_line(checks))
    bad = [c for c in checks if not c.ok]
    if bad:
        raise InputError(
            f"{len(bad)} of {len(checks)} sessions fail against Jest", where=str(suite.path)
        )
    print(f"{suite.name}: {len(checks)} sessions ok against Jest at {suite.path}")
    return 0


def _record(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.authoring.record import record_suite
    from harness.runs.runner import at_least_one

    workers = available_cpus() if args.workers is None else at_least_one("workers", args.workers)
    n = record_suite(
        args.path,
        sandbox=args.sandbox,
        workers=workers,
        log=lambda m: print(m, file=sys.stderr),
    )
    print(f"recorded {n} sessions")
    return 0
