"""`etai suite mine REPO --out DIR`: the command (added to `etai suite` by harness/cli/run.py)."""

from __future__ import annotations

import argparse
import json
import re
import sys

from harness.authoring import eligibility
from harness.authoring.build.cli import add_map_module, parse_env
from harness.authoring.jest_config import parse_entry, parse_module_map
from harness.base.errors import InputError
from harness.base.tables import grid


def add_parser(suite_sub) -> None:
    m = suite_sub.add_parser(
        "mine",
        help="mine sessions from real fixes in a project's git history",
        description="Walk the first-parent commits of a repository (a folder or a git bundle). "
        "A commit that changes source files and test files together is tried in the sandbox: "
        "the commit's tests on the parent's source, then with the commit's source change, R "
        "times each. It is kept when at least one test fails at the parent and passes at the "
        "commit in every run; its session starts from the parent with the new tests and its "
        "reference makes the commit's source change. Writes a suite to OUT (one workspace per "
        "session); rerunning the same command resumes.",
    )
    m.add_argument("repo", help="a git repository folder or a git bundle")
    m.add_argument("--out", required=True, help="the suite folder to write (or resume)")
    m.add_argument(
        "--range", dest="rev_range", default="HEAD",
        help="commits to try: A..B, or a revision and its history (default HEAD)",
    )  # fmt: skip
    m.add_argument(
        "--deps", default=None,
        help="a folder with package.json and its lockfile (package-lock.json, yarn.lock or "
        "pnpm-lock.yaml): the dependencies every session "
        "runs with (default: those of the range's newest commit)",
    )  # fmt: skip
    m.add_argument("--max", type=int, default=None, help="stop after N sessions (default: all)")
    m.add_argument("--runs", type=int, default=3, help="runs R at the parent and the commit (3)")
    m.add_argument("--seed", type=int, default=0, help="instruction wording and held-out choice")
    m.add_argument(
        "--test-timeout", type=float, default=None, metavar="S",
        help="a run of the commit's tests at the parent past S seconds counts as their failure "
        "when the commit runs them in a quarter of it: a hang the fix mends, as a catastrophic "
        "regular expression's (default: the sandbox's deadline, 180)",
    )  # fmt: skip
    m.add_argument(
        "--src", action="append",
        help="source folder, file or pattern a fix may change (repeatable; default: src, lib, "
        "index.js, index.ts)",
    )  # fmt: skip
    m.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="a variable every sandbox of the suite gets (repeatable)",
    )  # fmt: skip
    add_map_module(m)
    m.add_argument("--max-files", type=int, default=3, help="source files a fix changes (3)")
    m.add_argument("--max-hunks", type=int, default=6, help="hunks of a fix (6)")
    m.add_argument("--max-lines", type=int, default=60, help="source lines added+removed (60)")
    m.add_argument("--since", default=None, help="first author date, YYYY-MM-DD")
    m.add_argument("--until", default=None, help="last author date, YYYY-MM-DD")
    m.add_argument(
        "--skip", action="append", default=[], metavar="COMMIT", help="a commit never tried"
    )
    m.add_argument(
        "--held-out", choices=("split", "none"), default="split",
        help="split (default): a fix that turns two or more tests green holds half of them out "
        "of the agent's sight for the final verification; none: every test visible",
    )  # fmt: skip
    m.add_argument(
        "--resolve-lockfile", action="store_true",
        help="dependencies without a lockfile get one resolved from package.json now",
    )  # fmt: skip
    m.add_argument(
        "--name", default=None,
        help="the project's name in the suite and its session ids (default: the folder's or "
        "the bundle's name)",
    )  # fmt: skip
    m.add_argument("--sandbox", default="docker", help="the sandbox (default docker)")
    m.add_argument("--json", action="store_true", help="print the summary as JSON")
    m.add_argument("--no-progress", action="store_true", help="no progress bar")
    m.set_defaults(func=_mine)


def _mine(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.authoring.mine.mine import mine
    from harness.authoring.mine.options import MineOptions
    from harness.sandbox import require_kind

    require_kind(args.sandbox)
    if args.test_timeout is not None and args.test_timeout <= 0:
        raise InputError(f"must be more than 0, got {args.test_timeout}", where="--test-timeout")
    for flag in ("max", "max_files", "max_hunks", "max_lines", "runs"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise InputError(f"must be at least 1, got {v}", where=f"--{flag.replace('_', '-')}")
    for flag in ("since", "until"):
        v = getattr(args, flag)
        if v is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            raise InputError(f"{v!r} is not a date YYYY-MM-DD", where=f"--{flag}")
    if args.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.name):
        raise InputError(f"{args.name!r}: letters, digits, '.', '_' and '-' only", where="--name")
    opts = MineOptions(
        rev_range=args.rev_range,
        max_sessions=args.max,
        runs=args.runs,
        test_timeout_s=args.test_timeout,
        seed=args.seed,
        src=tuple(args.src or MineOptions.src),
        env=parse_env(args.env),
        module_map=parse_module_map(args.map_module),
        entry=parse_entry(args.entry),
        deps=args.deps,
        max_files=args.max_files,
        max_hunks=args.max_hunks,
        max_lines=args.max_lines,
        since=args.since,
        until=args.until,
        skip=tuple(args.skip),
        sandbox=args.sandbox,
        held_out=args.held_out,
        resolve_lockfile=args.resolve_lockfile,
        name=args.name,
    )
    summary = mine(
        args.repo, args.out, opts, progress=not args.no_progress,
        log=lambda msg: print(msg, file=sys.stderr),
    )  # fmt: skip
    print(json.dumps(summary, indent=2) if args.json else table(summary))
    return 0 if summary["kept"] else 1


def table(s: dict) -> str:
    rows = [[k, str(v)] for k, v in s["skipped"].items()]
    head = (
        f"{s['project']}: kept {s['kept']} of {s['candidates']} candidate commits "
        f"({s['commits_scanned']} scanned) in {s['mine_seconds']} s; "
        f"{s['held_out']} with held-out tests, {s['flaky_tests_left_out']} flaky tests left out\n"
        f"intents: {', '.join(f'{k} {v}' for k, v in sorted(s['per_intent'].items())) or 'none'}\n"
        + eligibility.line(s.get("held_out_cases") or {})
    )
    return head + "\n".join(grid(["left out because", "commits"], rows))
