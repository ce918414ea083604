"""Benchmark: replaying a suite built from a real project, this checkout against an earlier one.

Builds (or reuses) a suite from a project of ../shared/realrepos with `etai suite build` (the same
options as `make real-suites`), then replays it as a user would, in two timed parts:

  preflight   `etai suite validate --jest`: every reference replayed and graded (cold: each arm
              gets its own preflight cache and transform store; dependencies and images are
              shared and ready)
  episodes    `etai run --agent oracle --agent noop` (preflight verdicts now cached)

and prints wall seconds, CPU seconds (the arm's own processes; the whole machine, which holds the
containers' Jest and whatever else runs meanwhile), per-episode
p50 and each phase's p50 from the rows. For each oracle episode it prints its wall time beside its
floor, the Jest time a grading harness cannot go below: Jest's own seconds in the episode's
jest_run steps plus one run of the tests its final change must answer to (the final visible
verdict's graded run), both from the row's ``jest_s`` (harness/runs/loop.py), and the ratio. With ``--before REF`` a second checkout of REF (a git
worktree of this repository, removed afterwards) replays the same suite the same way in the same
invocation, first, and the ratio before/after is printed: ratios inside one run are what to
compare on a shared, noisy machine.

    python bench/real_suite_throughput.py --project dayjs --sessions 30 [--before REF]
                                          [--workers 2] [--suites DIR] [--json F]
                                          [--no-validate]
    python bench/real_suite_throughput.py --suite DIR [...]   (a suite at hand: a mined one)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
from suite_throughput import _machine_busy, pct  # noqa: E402  (one definition of each)


def suite_for(project: str, sessions: int, suites: Path) -> Path:
    """The suite of ``project`` with ``sessions`` sessions under ``suites``, built when absent."""
    from real_suites import build_project, find_realrepos

    out = suites / f"{project}-{sessions}"
    if (out / "sessions.jsonl").is_file() and (out / "summary.json").is_file():
        return out  # a build that finished (a killed one resumes when built again)
    realrepos = find_realrepos()
    corpus = {p["name"]: p for p in json.loads((realrepos / "corpus.json").read_text())}
    if project not in corpus:
        raise SystemExit(f"--project: {project!r} is not in {realrepos}/corpus.json")
    print(f"building {out} ({sessions} sessions; once, then reused)", flush=True)
    build_project(realrepos, corpus[project], out, sessions)
    if not (out / "sessions.jsonl").is_file():
        raise SystemExit(f"the build of {project} wrote no sessions: see {out}")
    return out


def arm_cache(tmp: Path, name: str) -> Path:
    """An ETAI_CACHE sharing everything of the user's cache but the preflight verdicts and the
    transform store (harness/sandbox/transforms.py), which each arm fills as a first run would."""
    base = Path(os.environ.get("ETAI_CACHE", Path.home() / ".cache" / "etai"))
    cache = tmp / f"cache-{name}"
    cache.mkdir()
    for entry in base.iterdir() if base.is_dir() else ():
        # the store's folder is transforms or transforms-N, as its format changed
        if entry.name != "preflight" and not entry.name.startswith("transforms"):
            (cache / entry.name).symlink_to(entry)
    return cache


def _cli(checkout: Path, cache: Path, args: list[str]) -> tuple[float, float, str]:
    """``etai ARGS`` run from ``checkout``'s code: wall s, CPU s of it and its children, stdout."""
    import resource

    env = dict(os.environ, ETAI_CACHE=str(cache), PYTHONPATH=str(checkout))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"etai {' '.join(args)} in {checkout} exited {p.returncode}:\n"
                         f"{p.stderr[-3000:]}")  # fmt: skip
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def replay(
    checkout: Path, suite: Path, cache: Path, out: Path, workers: int, validate: bool = True
) -> dict:
    from harness.runs.results import read_rows

    # The image of that checkout's recipe, built before anything is timed.
    subprocess.run(
        [sys.executable, "-c", "from harness.sandbox.image import ensure_image; ensure_image()"],
        cwd=checkout,
        env=dict(os.environ, ETAI_CACHE=str(cache), PYTHONPATH=str(checkout)),
        check=True,
    )
    busy = _machine_busy()
    pre_wall = pre_cpu = 0.0  # --no-validate: etai run below makes each preflight, cold
    if validate:
        pre_wall, pre_cpu, _ = _cli(checkout, cache, ["suite", "validate", str(suite), "--jest"])
    w = ["--workers", str(workers), "--out", str(out), "--no-progress", "--json"]
    run_wall, run_cpu, stdout = _cli(
        checkout, cache, ["run", "--suite", str(suite), "--agent", "oracle", "--agent", "noop", *w]
    )
    summary = json.loads(stdout)
    rows = read_rows(out / "results.jsonl")
    res = {
        "preflight_s": pre_wall,
        "episodes_s": run_wall,
        "replay_s": pre_wall + run_wall,
        "cpu_s": pre_cpu + run_cpu,
        "machine_cpu_s": _machine_busy() - busy,
        "episodes": len(rows),
    }
    k = summary["k"]
    for agent in ("oracle", "noop"):
        mine = [r for r in rows if r["agent"] == agent]
        a = summary["agents"][agent]
        res[agent] = {
            "p50_s": pct([r["duration_s"] for r in mine], 0.5),
            f"pa@{k}": a["path_accuracy"][str(k)],  # JSON object keys are strings
            "reference_broken": len(a["reference_broken"]),
            "phases_p50_s": {
                p: pct([r.get("phases", {}).get(p, 0.0) for r in mine], 0.5)
                for p in ("acquire", "baseline", "agent", "tools", "verify", "close")
            },
        }  # fmt: skip
    res["oracle"].update(floors([r for r in rows if r["agent"] == "oracle"]))
    return res


def floors(rows: list[dict]) -> dict:
    """Each episode's wall time, floor and ratio (module docstring), and their p50s; empty for rows
    of a checkout that did not record Jest's own time."""
    eps = [
        {"session": r["session_id"], "wall_s": r["duration_s"], "floor_s": f, "ratio": r["duration_s"] / f,
         "agent_jest_s": r["jest_s"]["agent"], "final_jest_s": r["jest_s"]["final"],
         "graded_jest_s": r["jest_s"]["graded"]}
        for r in sorted(rows, key=lambda r: r["session_id"])
        if "jest_s" in r and (f := r["jest_s"]["agent"] + r["jest_s"]["final"]) > 0
    ]  # fmt: skip
    if not eps:
        return {}
    return {
        "episodes": eps,
        "floor_p50_s": pct([e["floor_s"] for e in eps], 0.5),
        "ratio_p50": pct([e["ratio"] for e in eps], 0.5),
    }


def show(name: str, r: dict) -> None:
    print(
        f"{name}: replay {r['replay_s']:.0f} s (preflight {r['preflight_s']:.0f} s, episodes "
        f"{r['episodes_s']:.0f} s for {r['episodes']}); CPU s: harness {r['cpu_s']:.0f}, "
        f"machine {r['machine_cpu_s']:.0f} (containers and everything else running)"
    )
    for agent in ("oracle", "noop"):
        a = r[agent]
        pa = next(v for k, v in a.items() if k.startswith("pa@"))
        phases = ", ".join(f"{p} {v:.2f}" for p, v in a["phases_p50_s"].items())
        print(
            f"  {agent:<6} p50 {a['p50_s']:.2f} s, PA@k {pa:.3f}, broken "
            f"{a['reference_broken']}; phases p50 (s): {phases}"
        )
    o = r["oracle"]
    if "episodes" not in o:
        print("  oracle floor: not recorded by this checkout (rows without jest_s)")
        return
    print("  oracle per episode: wall s, floor s (Jest: its jest_run steps + the final graded run)")
    for e in o["episodes"]:
        print(
            f"    {e['session']:<40} {e['wall_s']:7.2f} {e['floor_s']:7.2f} "
            f"({e['agent_jest_s']:.2f} + {e['final_jest_s']:.2f})  {e['ratio']:5.2f}x"
        )
    print(
        f"  oracle p50: wall {o['p50_s']:.2f} s, floor {o['floor_p50_s']:.2f} s, "
        f"wall/floor {o['ratio_p50']:.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--project", help="a project of ../shared/realrepos (its suite built once)")
    which.add_argument(
        "--suite",
        type=Path,
        help="replay this suite instead (built or mined: `etai suite mine`, make mined-suites)",
    )
    ap.add_argument("--sessions", type=int, default=30, help="sessions in the suite (30)")
    ap.add_argument("--before", metavar="REF", help="also replay with this commit's code, first")
    ap.add_argument("--workers", type=int, default=2, help="etai run workers (2)")
    ap.add_argument("--suites", type=Path, default=ROOT / "runs" / "bench-real")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    ap.add_argument(
        "--no-validate",
        action="store_true",
        help="no validate phase: etai run makes the preflights cold, so the replay is grading "
        "alone (validate --jest also measures held-out coverage since 33a815c, which a "
        "before arm older than that does not)",
    )
    args = ap.parse_args(argv)
    if min(args.sessions, args.workers) < 1:
        ap.error("--sessions and --workers must be at least 1")
    if args.before:
        rev = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "rev-parse",
                "--verify",
                "--quiet",
                f"{args.before}^{{commit}}",
            ],
            capture_output=True,
            text=True,
        )
        if rev.returncode != 0:
            ap.error(f"--before: {args.before!r} is not a commit of {ROOT}")
    if args.suite is not None and not (args.suite / "sessions.jsonl").is_file():
        ap.error(f"--suite: {args.suite} holds no sessions.jsonl")
    suite = (
        args.suite.resolve()
        if args.suite is not None
        else suite_for(args.project, args.sessions, args.suites).absolute()
    )  # absolute: the --before arm runs from its own worktree
    tmp = Path(tempfile.mkdtemp(prefix="etai-real-throughput-"))
    name = args.project or suite.name
    res: dict = {"project": name, "suite": str(suite), "workers": args.workers}
    v = not args.no_validate
    try:
        if args.before:
            tree = tmp / "before"
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(ROOT),
                    "worktree",
                    "add",
                    "--detach",
                    "-q",
                    str(tree),
                    args.before,
                ],
                check=True,
            )
            try:
                res["before"] = replay(
                    tree, suite, arm_cache(tmp, "before"), tmp / "run-before", args.workers, v
                )
                res["before"]["ref"] = args.before
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])
        res["after"] = replay(
            ROOT, suite, arm_cache(tmp, "after"), tmp / "run-after", args.workers, v
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{name}: {suite} ({res['after']['episodes'] // 2} sessions), "
          f"{args.workers} workers")  # fmt: skip
    if "before" in res:
        show(f"before ({args.before})", res["before"])
    show("after (this checkout)", res["after"])
    if "before" in res:
        b, a = res["before"], res["after"]
        res["speedup"] = b["replay_s"] / a["replay_s"]
        pre = f"preflight {b['preflight_s'] / a['preflight_s']:.2f}x, " if v else ""
        print(
            f"replay {res['speedup']:.2f}x faster than {args.before} ({pre}episodes "
            f"{b['episodes_s'] / a['episodes_s']:.2f}x, machine CPU "
            f"{b['machine_cpu_s'] / a['machine_cpu_s']:.2f}x)"
        )
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
