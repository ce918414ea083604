"""`make real-suites`: build a suite from each project of ../shared/realrepos (corpus.json names its
source folders and environment), replay each with the oracle and the do-nothing agent, and write
runs/real-suites/report.md: per project, sessions, intents, build time, flaky and failing tests of
the baseline, and both agents' PA@k. The projects are read in place (third-party code: never copied
into this repository); built suites and runs go under runs/ (ignored).

Usage: python scripts/real_suites.py [--max N] [--only NAME ...] [--out DIR] [--workers W]
                                    [--per-file N] [--per-function N] [--no-replay]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def find_realrepos() -> Path:
    """The real projects' folder: $ETAI_REALREPOS, else ``shared/realrepos`` beside this checkout or
    one of its parents, else beside the repository it was cloned from (a clone made elsewhere, as a
    CI's fresh clone may be, still finds the corpus of the checkout it came from)."""
    if os.environ.get("ETAI_REALREPOS"):
        return Path(os.environ["ETAI_REALREPOS"])
    places = [ROOT, *ROOT.parents]
    origin = subprocess.run(
        ["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if origin and Path(origin).is_absolute():  # a local path; a URL names no folder here
        places += [Path(origin), *Path(origin).parents]
    for place in places:
        if (place / "shared" / "realrepos" / "corpus.json").is_file():
            return place / "shared" / "realrepos"
    raise SystemExit(
        "no shared/realrepos beside this checkout, its parents or its origin: set ETAI_REALREPOS"
    )


def build_project(
    realrepos: Path, proj: dict, suite_dir: Path, max_sessions: int, log=print, **caps: int
):
    """Build (or resume building) the suite of one corpus.json project into ``suite_dir``: what
    `make real-suites` and scripts/chaos both run. ``caps``: ``per_file``/``per_function``
    mutants (BuildOptions' defaults unless given). Returns the build's summary."""
    sys.path.insert(0, str(ROOT))
    from harness.authoring.build.build import build
    from harness.authoring.build.options import BuildOptions

    opts = BuildOptions(
        **caps,
        max_sessions=max_sessions,
        src=tuple(proj["src"]),
        env=tuple(sorted(proj["env"].items())),
        resolve_lockfile=True,  # dinero's copy has none (upstream keeps a yarn.lock)
    )
    return build(realrepos / proj["name"], suite_dir, opts, log=log)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from harness.base.errors import EtaiError
    from harness.runs.runner import run

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max", type=int, default=90, help="sessions per project (default 90)")
    p.add_argument("--only", action="append", help="only these projects (repeatable)")
    p.add_argument("--out", default=str(ROOT / "runs" / "real-suites"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--per-file", type=int, help="mutants per source file (the builder's default: 6)"
    )
    p.add_argument("--per-function", type=int, help="mutants per function (default: 2)")
    p.add_argument(
        "--no-replay",
        action="store_true",
        help="build only (e.g. the training set of finetune/configs/agent-8xa100.yaml)",
    )
    args = p.parse_args(argv)
    realrepos = find_realrepos()
    corpus = json.loads((realrepos / "corpus.json").read_text())
    out = Path(args.out)
    # Rows of earlier invocations (one project at a time, or a resumed run) stay in the report.
    report = out / "report.json"
    earlier = json.loads(report.read_text()) if report.is_file() else []
    rows = []
    for proj in corpus:
        if args.only and proj["name"] not in args.only:
            continue
        suite_dir = out / proj["name"]
        t0 = time.monotonic()
        # One project that cannot be built (no lockfile) does not stop the rest.
        try:
            caps = {"per_file": args.per_file, "per_function": args.per_function}
            caps = {k: v for k, v in caps.items() if v is not None}
            s = build_project(realrepos, proj, suite_dir, args.max, log=print, **caps)
        except EtaiError as e:
            print(f"{proj['name']}: not built: {e}", file=sys.stderr)
            rows.append({"project": proj["name"], "error": f"not built: {e}"})
            continue
        build_s = time.monotonic() - t0
        if args.no_replay:
            print(f"{proj['name']}: {s['kept']} sessions ({s['tried']} tried) in {build_s:.0f} s")
            continue
        t0 = time.monotonic()
        try:
            r = run(
                str(suite_dir),
                ["oracle", "noop"],
                out=out / f"{proj['name']}-run",
                workers=args.workers,
            )
        except EtaiError as e:  # e.g. the sandbox engine went away: the build stays, rerun resumes
            print(f"{proj['name']}: not replayed: {e}", file=sys.stderr)
            rows.append({"project": proj["name"], "error": f"built, not replayed: {e}"})
            continue
        oracle, noop, k = r["agents"]["oracle"], r["agents"]["noop"], r["k"]
        rows.append(
            {
                "project": proj["name"],
                "sessions": s["kept"],
                "tried": s["tried"],
                "intents": s["per_intent"],
                "build_s": round(build_s),
                "build_spent_s": s.get("seconds_spent"),
                "replay_s": round(time.monotonic() - t0),
                "flaky": s["baseline"]["flaky"],
                "failing": s["baseline"]["failing"],
                "oracle_pa": oracle["path_accuracy"][k],
                "oracle_broken": oracle["reference_broken"],
                "oracle_cursor_px": oracle["cursor"]["mean_px"],
                "infra_errors": oracle["n_infra_error"] + noop["n_infra_error"],
                "noop_pa": noop["path_accuracy"][k],
                "image": r.get("image"),
            }
        )
        _write_report(report, earlier, rows)
    rows = _write_report(report, earlier, rows)
    lines = [
        "| project | sessions (tried) | intents | build s (wall / in tests, all runs) | flaky | failing "
        "| oracle PA@3 | broken | oracle cursor px | noop PA@3 | infra | replay s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    skipped = [x for x in rows if "error" in x]
    rows = [x for x in rows if "error" not in x]
    for x in rows:
        lines.append(
            f"| {x['project']} | {x['sessions']} ({x['tried']}) | {len(x['intents'])} "
            f"| {x['build_s']} / {x.get('build_spent_s')} "
            f"| {len(x['flaky'])} | {len(x['failing'])} | {x['oracle_pa']} | {len(x['oracle_broken'])} "
            f"| {x.get('oracle_cursor_px')} | {x['noop_pa']} | {x.get('infra_errors')} "
            f"| {x.get('replay_s')} |"
        )
    intents = {i for x in rows for i in x["intents"]}
    lines.append(
        f"\nsessions: {sum(x['sessions'] for x in rows)}, projects: {len(rows)}, "
        f"intent labels: {len(intents)}"
    )
    lines += [f"{x['project']}: {x['error']}" for x in skipped]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _write_report(path: Path, earlier: list[dict], rows: list[dict]) -> list[dict]:
    """report.json: this invocation's rows over the earlier ones of the same projects."""
    mine = {x["project"] for x in rows}
    merged = [x for x in earlier if x["project"] not in mine] + rows
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2))
    return merged


if __name__ == "__main__":
    sys.exit(main())
