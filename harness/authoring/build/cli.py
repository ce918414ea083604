"""`etai suite build REPO --out DIR`: the command (added to `etai suite` by harness/cli/run.py)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.authoring import eligibility
from harness.authoring.jest_config import parse_entry, parse_module_map
from harness.base.errors import InputError
from harness.base.tables import grid


def add_parser(suite_sub) -> None:
    b = suite_sub.add_parser(
        "build",
        help="build bug-fix sessions from a real Jest project (mutants its tests catch)",
        description="Install the project's node_modules from its lockfile (cached, given to the "
        "sandbox read-only), run its whole test suite R times in the sandbox, then try mutants "
        "of its source (found on the syntax tree) and keep each one that at least one "
        "baseline-passing test fails in all R runs. Writes a suite (base snapshot + one patch "
        "per session) to OUT; rerunning the same command resumes.",
    )
    b.add_argument("repo", help="the project folder (package.json and a lockfile)")
    b.add_argument("--out", required=True, help="the suite folder to write (or resume)")
    b.add_argument("--max", type=int, default=None, help="stop after N sessions (default: all)")
    b.add_argument("--runs", type=int, default=3, help="baseline and mutant runs R (default 3)")
    b.add_argument("--seed", type=int, default=0, help="order in which mutants are tried")
    b.add_argument(
        "--src", action="append", help="source folder or file to mutate (repeatable; default: "
        "src/, lib/ or index.js)",
    )  # fmt: skip
    b.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="a variable every sandbox of the suite gets (repeatable; e.g. TZ=America/New_York)",
    )  # fmt: skip
    add_map_module(b)
    b.add_argument("--per-file", type=int, default=6, help="kept mutants per file (default 6)")
    b.add_argument(
        "--per-function", type=int, default=2, help="kept mutants per function (default 2)"
    )
    b.add_argument(
        "--whole-suite", action="store_true",
        help="run every test file for each mutant (default: only those that depend on the mutated "
        "file, by Jest's dependency graph; a project whose tests load sources dynamically needs this)",
    )  # fmt: skip
    b.add_argument(
        "--resolve-lockfile", action="store_true",
        help="a project without package-lock.json gets one resolved from package.json now "
        "(npm install --package-lock-only, the registry's versions of today, peer dependencies as "
        "npm 6 did); it is kept in the suite's base, so the suite installs the same way later",
    )  # fmt: skip
    b.add_argument(
        "--held-out",
        choices=("split", "none"),
        default="split",
        help="split (default): a mutant killed by two or more test cases holds half of them out "
        "(never seen by the agent, run at the final verification: special-casing is caught); "
        "none: every test visible",
    )
    b.add_argument("--sandbox", default="docker", help="the sandbox (default docker)")
    b.add_argument("--json", action="store_true", help="print the summary as JSON")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.set_defaults(func=_build)


def add_map_module(p: argparse.ArgumentParser) -> None:
    """--entry and --map-module, for tests that import the built package (jest_config.py)."""
    p.add_argument(
        "--entry", default=None, metavar="PATH",
        help="the package's main in the workspace: for tests that import the built package by its "
        "folder (`from '../'`; main under lib/ or dist/, which the sandbox does not build), e.g. "
        "src/index sends them to the source",
    )  # fmt: skip
    p.add_argument(
        "--map-module", action="append", default=[], metavar="REGEX=PATH",
        help="a moduleNameMapper entry written into the workspace's JSON Jest config (repeatable), "
        "e.g. '^redux$=<rootDir>/src' for tests that import the package by its name",
    )  # fmt: skip


def parse_env(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    env = []
    for p in pairs:
        name, sep, value = p.partition("=")
        if not sep or not name:
            raise InputError(f"{p!r} is not NAME=VALUE", where="--env")
        env.append((name, value))
    return tuple(sorted(env))


def _build(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.authoring.build.build import build
    from harness.authoring.build.options import BuildOptions
    from harness.sandbox import require_kind

    require_kind(args.sandbox)
    for flag in ("max", "per_file", "per_function"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise InputError(f"must be at least 1, got {v}", where=f"--{flag.replace('_', '-')}")
    opts = BuildOptions(
        max_sessions=args.max,
        runs=args.runs,
        seed=args.seed,
        src=tuple(args.src or ()),
        env=parse_env(args.env),
        module_map=parse_module_map(args.map_module),
        entry=parse_entry(args.entry),
        per_file=args.per_file,
        per_function=args.per_function,
        sandbox=args.sandbox,
        related=not args.whole_suite,
        held_out=args.held_out,
        resolve_lockfile=args.resolve_lockfile,
    )
    summary = build(
        args.repo,
        args.out,
        opts,
        progress=not args.no_progress,
        log=lambda m: print(m, file=sys.stderr),
    )
    print(json.dumps(summary, indent=2) if args.json else table(summary))
    if summary["kept"] == 0:  # a suite of nothing is no success
        print(f"etai suite build: no session kept; {nothing_kept(summary)}", file=sys.stderr)
        return 1
    return 0


def nothing_kept(s: dict) -> str:
    """Where to look when a build kept no mutant: the baseline's failing tests, else the drops."""
    b = s["baseline"]
    if b["failing"]:
        said = b.get("first_failure") or b["failing"][0]
        return (
            f"{len(b['failing'])} of {b['tests']} tests fail in the sandbox before any change, and "
            f"a mutant counts only where a passing test catches it; the first failure: {said}"
        )
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(s["dropped"].items())) or "none tried"
    return f"every mutant tried was dropped ({dropped}): see mutants.jsonl in the build folder"


def table(s: dict) -> str:
    rows = [[op, str(d["tried"]), str(d["kept"])] for op, d in sorted(s["per_operator"].items())]
    b = s["baseline"]
    head = (
        f"{s['project']}: kept {s['kept']} of {s['tried']} mutants tried "
        f"({s['candidates']} candidates, {s['did_not_parse']} did not parse) in "
        f"{s['build_seconds']} s\n"
        f"baseline: {b['passing']} of {b['tests']} tests pass in all {b['runs']} runs; "
        f"{len(b['flaky'])} flaky, {len(b['failing'])} failing (left out)\n"
        f"dropped: {', '.join(f'{k} {v}' for k, v in sorted(s['dropped'].items())) or 'none'}\n"
        f"intents: {', '.join(f'{k} {v}' for k, v in sorted(s['per_intent'].items()))}\n"
        + eligibility.line(s["held_out"].get("cases") or {})
    )
    return head + "\n".join(grid(["operator", "tried", "kept"], rows))
