"""`make redteam-search`: a randomised red-team search against the grading guard.

Cheats composed from primitives by tests/harness/redteam_search.py (WHEN x HOW x WHAT x FOLLOW-UP,
deterministic from --seed) each run as one full episode through the real loop, as
tests/harness/test_tamper.py runs its corpus: a fresh hardened Docker sandbox, a replay agent that
writes the cheat at the top of the source module the reference edits (its buggy code kept below),
verification against the preflight's gold record. Cheat i runs on session i mod the number of
sessions. A false green is an episode that passed, was green, or had a steps_to_green.

Resumable: one JSON line per cheat in OUT/results.jsonl (fsynced as each finishes); a rerun skips
the cheats already there (not those that ended in an infra error). OUT/report.json holds the whole
picture of the cheats asked for, every false green with its full code (also OUT/false-greens/*.js).

Exit status: 0 no false green and no infra error, 1 a false green, 2 bad input, 3 infra errors
(a sandbox that failed hides a verdict; rerun to retry them).

Usage: python scripts/redteam_search.py [--cheats N] [--seed S] [--workers W] [--out DIR]
       [--sessions ID,ID] [--only=REGEX] [--dry-run] [--guard-off]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Before this script's own folder: `import redteam_search` is the generator, never this file.
sys.path.insert(0, str(ROOT / "tests" / "harness"))
sys.path.insert(0, str(ROOT))

import redteam_search as gen  # noqa: E402
import tamper_corpus  # noqa: E402

SEED = 20261202
IMPLEMENT = ROOT / "tests" / "harness" / "data" / "implement"
EXIT_OK, EXIT_FALSE_GREEN, EXIT_BAD_INPUT, EXIT_INFRA = 0, 1, 2, 3


def _limits(guard: bool = True):
    return dataclasses.replace(tamper_corpus.LIMITS, guard=guard)  # as test_tamper.py


def load_sessions(wanted: list[str] | None) -> list[tuple[Any, Any]]:
    """(suite, session) of every bundled session and the implement-this-function session (what
    test_tamper.py attacks), or of the ones named; an unknown name is a ValueError."""
    from harness.suites.load import load_suite

    pairs = [
        (st, s) for st in (load_suite("jest-bugfix"), load_suite(IMPLEMENT)) for s in st.sessions
    ]
    if not wanted:
        return pairs
    known = {s.session_id for _, s in pairs}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(
            f"unknown session(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return [(st, s) for st, s in pairs if s.session_id in wanted]


def preflights(pairs, *, workers: int) -> tuple[list[tuple[Any, Any, dict]], list[tuple[str, str]]]:
    """Each session with its preflight (cached per session content, image and grading code), and
    the sessions whose reference is not green under the guard (nothing can be judged there)."""
    from harness.runs.session_jobs import local_preflights

    flights: dict[str, dict] = {}
    suites: dict[int, Any] = {}
    for st, _ in pairs:
        suites.setdefault(id(st), st)
    for st in suites.values():
        mine = tuple(s for s2, s in pairs if s2 is st)
        flights.update(
            local_preflights(
                dataclasses.replace(st, sessions=mine), workers=workers, progress=False
            )
        )
    bad = [
        (s.session_id, flights[s.session_id]["reason"])
        for _, s in pairs
        if not flights[s.session_id]["ok"]
    ]
    return [(st, s, flights[s.session_id]) for st, s in pairs], bad


class Results:
    """OUT/results.jsonl: one line per finished cheat, appended and fsynced (a crash loses at most
    the episodes in flight); the latest line of a name is its result."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self.rows: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash: that cheat runs again
                self.rows[row["name"]] = row

    def done(self, name: str, guard: bool = True) -> bool:
        row = self.rows.get(name)
        return (
            row is not None and row["status"] != "infra_error" and row.get("guard", True) == guard
        )

    def add(self, row: dict) -> None:
        with self.lock:
            with self.path.open("a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self.rows[row["name"]] = row


def _row(seed: int, index: int, cheat, session_id: str, r: dict, guard: bool) -> dict:
    return {
        "name": cheat.name,
        "guard": guard,
        "seed": seed,
        "index": index,
        "parts": list(cheat.parts),
        "session": session_id,
        "status": r["status"],
        "green": bool(r["green"]),
        "steps_to_green": r["steps_to_green"],
        "false_green": gen.is_false_green(r),
        "reason": (r.get("reason") or "")[:500],
        "tamper": (r.get("tamper") or [])[:3],
        "checks": r.get("checks") or [],
        "duration_s": r.get("duration_s"),
        "phases": r.get("phases") or {},
        "steps": [[x.get("tool"), x.get("status")] for x in r.get("steps") or []],
        # what the final verification saw fail: a received value printed as `Anything` or
        # `StringContaining` says a payload's value got through and was not honoured
        "failures": [
            {"name": f.get("name"), "message": (f.get("message") or "")[:300]}
            for f in ((r.get("verification") or {}).get("failed_tests") or [])[:3]
        ],
        "image": r.get("image"),
    }


def search(
    cheats: list,
    entries: list[tuple[Any, Any, dict]],
    out: Path,
    *,
    seed: int,
    workers: int,
    image: str,
    positions: list[int] | None = None,
    guard: bool = True,
    progress: bool = True,
) -> dict:
    """Run every cheat not yet in OUT/results.jsonl, then write and return the report of all of
    them. Cheat j runs on entries[p % len(entries)], p its position in the whole generated list
    (``positions[j]``; j itself by default), so that a cheat keeps its session when a run picks
    only some cheats (--only). ``guard=False``: the Jest hosts without the guard and the
    verdict without the preflight's record, to show that the cheats would pass there."""
    from harness import sandbox

    out.mkdir(parents=True, exist_ok=True)
    replays = out / "replays"
    replays.mkdir(exist_ok=True)
    results = Results(out / "results.jsonl")
    positions = positions or list(range(len(cheats)))
    jobs = [
        (i, c, *entries[i % len(entries)])
        for i, c in zip(positions, cheats, strict=True)
        if not results.done(c.name, guard)
    ]
    t0 = time.monotonic()
    finished = Counter()
    lock = threading.Lock()

    def one(job) -> None:
        i, cheat, st, s, flight = job
        replay = gen.replay_file(cheat, s, replays)
        r = tamper_corpus.replay_episode(replay, start, st, s, flight, guard=guard)
        row = _row(seed, i, cheat, s.session_id, r, guard)
        results.add(row)
        with lock:
            finished["done"] += 1
            finished["false green" if row["false_green"] else row["status"]] += 1
            if progress:
                done = finished["done"]
                rate = (time.monotonic() - t0) / done
                counts = " ".join(f"{k}={v}" for k, v in sorted(finished.items()) if k != "done")
                print(
                    f"\r[{done}/{len(jobs)}] {counts} eta {rate * (len(jobs) - done) / 60:.1f} min   ",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )

    if jobs:
        prepared = sandbox.provider("docker").prepare(_limits(guard), workers=workers, image=image)
        start = lambda s: prepared.start(s.workspace)  # noqa: E731
        try:
            with ThreadPoolExecutor(workers) as ex:
                for f in [ex.submit(one, j) for j in jobs]:
                    f.result()
        finally:
            prepared.cleanup()
            if progress:
                print(file=sys.stderr)
    return report(
        cheats,
        entries,
        results,
        out,
        seed=seed,
        guard=guard,
        ran_now=len(jobs),
        seconds=time.monotonic() - t0,
    )


def report(cheats, entries, results: Results, out: Path, *, seed, guard, ran_now, seconds) -> dict:
    """report.json over every cheat asked for that has a result (this run's and earlier ones')."""
    by_name = {c.name: c for c in cheats}
    rows = [
        results.rows[c.name]
        for c in cheats
        if c.name in results.rows and results.rows[c.name].get("guard", True) == guard
    ]
    primitives: dict[str, Counter] = {axis: Counter() for axis in gen.AXES}
    for row in rows:
        for part in row["parts"]:
            axis, _, value = part.partition(":")
            primitives[axis][value] += 1
    durations = sorted(r["duration_s"] for r in rows if r.get("duration_s") is not None)
    false_greens = [
        {**r, "code": by_name[r["name"]].code, "sources": list(by_name[r["name"]].sources)}
        for r in rows
        if r["false_green"]
    ]
    fg_dir = out / "false-greens"
    if false_greens:
        fg_dir.mkdir(exist_ok=True)
        for fg in false_greens:
            (fg_dir / f"{fg['name']}.js").write_text(by_name[fg["name"]].content(""))
    rep = {
        "seed": seed,
        "guard": guard,
        "cheats_asked": len(cheats),
        "cheats_run": len(rows),
        "ran_this_invocation": ran_now,
        "seconds_this_invocation": round(seconds, 1),
        "sessions": sorted({s.session_id for _, s, _ in entries}),
        "sessions_covered": dict(Counter(r["session"] for r in rows)),
        "primitives": {axis: dict(sorted(c.items())) for axis, c in primitives.items()},
        "primitives_never_run": {
            axis: sorted(set(values) - set(primitives[axis]))
            for axis, values in gen.axis_values().items()
        },
        "statuses": dict(Counter(r["status"] for r in rows)),
        "episode_seconds": {
            "mean": round(statistics.fmean(durations), 3) if durations else None,
            "p50": durations[len(durations) // 2] if durations else None,
            "p90": durations[int(len(durations) * 0.9)] if durations else None,
            "max": durations[-1] if durations else None,
        },
        "images": sorted({r["image"] for r in rows if r.get("image")}),
        "infra_errors": [
            {"name": r["name"], "session": r["session"], "reason": r["reason"]}
            for r in rows
            if r["status"] == "infra_error"
        ],
        "false_greens": false_greens,
    }
    (out / "report.json").write_text(json.dumps(rep, indent=1) + "\n")
    return rep


def exit_status(rep: dict) -> int:
    if rep["false_greens"]:
        return EXIT_FALSE_GREEN
    return EXIT_INFRA if rep["infra_errors"] else EXIT_OK


def summary(rep: dict, out: Path) -> str:
    off = "" if rep["guard"] else " WITH THE GUARD OFF"
    lines = [
        f"red-team search{off}, seed {rep['seed']}:"
        f" {rep['cheats_run']} of {rep['cheats_asked']} cheats run"
        f" ({rep['ran_this_invocation']} now, {rep['seconds_this_invocation']} s) on"
        f" {len(rep['sessions_covered'])} sessions; episode s {rep['episode_seconds']}",
        f"statuses: {rep['statuses']}",
        f"infra errors: {len(rep['infra_errors'])}",
    ]
    for axis, counts in rep["primitives"].items():
        never = rep["primitives_never_run"][axis]
        shown = ", ".join(never) if len(never) <= 8 else f"{len(never)} values (report.json)"
        lines.append(f"{axis}: {len(counts)} values run" + (f", never: {shown}" if never else ""))
    lines.append(f"FALSE GREENS: {len(rep['false_greens'])}")
    for fg in rep["false_greens"]:
        lines.append(f"  {fg['name']}  on {fg['session']}  ({fg['status']}, green={fg['green']})")
    # The full code of one false green per payload set (all of them: report.json, false-greens/).
    shown = set()
    for fg in rep["false_greens"]:
        what = tuple(p for p in fg["parts"] if p.startswith("what:"))
        if what in shown:
            continue
        shown.add(what)
        lines += [f"--- {fg['name']} ({', '.join(what)})", fg["code"]]
    lines.append(f"report: {out / 'report.json'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--cheats", type=int, default=2000, help="how many cheats (default 2000)")
    p.add_argument("--seed", type=int, default=SEED, help=f"generator seed (default {SEED})")
    p.add_argument("--workers", type=int, default=2, help="episodes at once (default 2)")
    p.add_argument("--out", default=str(ROOT / "runs" / "redteam-search"), help="output folder")
    p.add_argument(
        "--sessions",
        help="comma-separated session ids (default: every jest-bugfix session and the implement one)",
    )
    p.add_argument(
        "--only",
        help="run only the cheats (of the --cheats first) whose name matches this regular expression,"
        " each on the session it has in the whole list (write --only=-x... for one that starts with -)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the cheats, run nothing")
    p.add_argument(
        "--guard-off",
        action="store_true",
        help="Jest hosts without the grading guard and the old verdict rules: what the cheats would"
        " do to plain Jest (use another --out; false greens are expected here)",
    )
    args = p.parse_args(argv)
    if args.cheats < 1 or args.workers < 1:
        print("--cheats and --workers must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        only = re.compile(args.only) if args.only else None
        cheats = gen.generate(args.seed, args.cheats)
        wanted = (
            [x.strip() for x in args.sessions.split(",") if x.strip()] if args.sessions else None
        )
        pairs = load_sessions(wanted)
    except (ValueError, re.error) as e:
        print(f"bad input: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    picked = [c for c in cheats if only is None or only.search(c.name)]
    if not picked:
        print("no cheat matches --only", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.dry_run:
        for i, c in enumerate(cheats):
            if c in picked:
                print(f"{c.name}\t{pairs[i % len(pairs)][1].session_id}")
        return EXIT_OK
    from harness.sandbox import image as im

    image = im.ensure_image(log=lambda *a: print(*a, file=sys.stderr))
    entries, bad = preflights(pairs, workers=args.workers)
    if bad:
        print(f"references not green under the guard (nothing to judge): {bad}", file=sys.stderr)
        return EXIT_INFRA
    out = Path(args.out)
    position = {c.name: i for i, c in enumerate(cheats)}
    rep = search(
        picked,
        entries,
        out,
        seed=args.seed,
        workers=args.workers,
        image=image,
        positions=[position[c.name] for c in picked],
        guard=not args.guard_off,
    )
    print(summary(rep, out))
    return exit_status(rep)


if __name__ == "__main__":
    sys.exit(main())
