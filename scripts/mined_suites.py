"""`make mined-suites`: mine sessions from the history of each project of ../shared/realrepos
(`etai suite mine`), replay each mined suite with the oracle and the do-nothing agent, and write
runs/mined-suites/report.md: per project, commits scanned, candidates, kept, left out by reason,
mining time and both agents' PA@k (k covers the longest reference).

A project's history is its bundle in ../shared/realrepos-history, or a clone named with
``--repo NAME=PATH`` (e.g. a snapshot fetched from GitHub). The range ends at the commit
corpus.json names (the history's HEAD when it ends before that commit), whose dependencies (the
realrepos folder's lockfile, set up for Jest 29) every session runs with; it reaches
``--commits`` first-parent commits back. RANGES names the projects mined elsewhere in their
history, and how. Histories and projects are
read in place (third-party code: never copied into this repository); suites and runs go under
runs/ (ignored).

Usage: python scripts/mined_suites.py [--commits N] [--max N] [--only NAME ...] [--repo NAME=PATH]
                                      [--out DIR] [--workers W] [--no-replay]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from real_suites import find_realrepos  # noqa: E402  (the one search for ../shared/realrepos)

# Projects whose recent history cannot be mined with the corpus's setup (README "Suites from real
# bug fixes" says why): the range that can, its tests' entry, and the commit whose manifest and
# lockfile its sessions run with. redux: from Babel 7 (b9ee1cfd) along the 4.x line, tests import
# the built package ('../'); v4.2.1's lockfile no longer has symbol-observable, v4.0.5's has.
RANGES = {"redux": {"range": "b9ee1cfd..v4.2.1", "entry": "src/index", "deps_at": "v4.0.5"}}


def deps_at(repo: Path, rev: str, folder: Path) -> Path:
    """``rev``'s manifest and lockfile, written into ``folder`` for MineOptions.deps."""
    from harness.authoring.mine import history
    from harness.base.errors import InputError

    folder.mkdir(parents=True, exist_ok=True)
    for f in ("package.json", "package-lock.json", "npm-shrinkwrap.json"):
        try:
            (folder / f).write_bytes(history.read(repo, rev, f))
        except InputError:
            continue
    return folder


def history_of(proj: dict, realrepos: Path, repos: dict[str, str]) -> Path | None:
    if proj["name"] in repos:
        return Path(repos[proj["name"]])
    bundle = realrepos.parent / "realrepos-history" / (proj["upstream"].split("/")[1] + ".bundle")
    return bundle if bundle.is_file() else None


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from harness.authoring.mine import history
    from harness.authoring.mine.mine import mine
    from harness.authoring.mine.options import MineOptions
    from harness.base.errors import EtaiError
    from harness.runs.runner import run

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commits", type=int, default=400, help="first-parent commits back (400)")
    p.add_argument("--max", type=int, default=None, help="sessions per project (default: all)")
    p.add_argument("--only", action="append", help="only these projects (repeatable)")
    p.add_argument("--repo", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--out", default=str(ROOT / "runs" / "mined-suites"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-replay", action="store_true", help="mine only")
    args = p.parse_args(argv)
    repos = dict(x.split("=", 1) for x in args.repo)
    realrepos = find_realrepos()
    corpus = json.loads((realrepos / "corpus.json").read_text())
    out = Path(args.out)
    rows = []
    for proj in corpus:
        name = proj["name"]
        if args.only and name not in args.only:
            continue
        source = history_of(proj, realrepos, repos)
        if source is None:
            rows.append({"project": name, "error": "no history (a bundle, or --repo NAME=PATH)"})
            continue
        end = proj["commit"]
        try:
            repo = history.open_repo(source)
            if not history.has(repo, end):  # a history older than the corpus (dayjs' bundle)
                print(f"{name}: {end[:10]} is not in {source}: the range ends at its HEAD")
                end = "HEAD"
            depth = history.depth(repo, end)
        except EtaiError as e:
            rows.append({"project": name, "error": f"no history: {e}"})
            continue
        back = min(args.commits, depth - 1)
        opts = MineOptions(
            rev_range=f"{end}~{back}..{end}",
            max_sessions=args.max,
            src=tuple(proj["src"]),
            env=tuple(sorted(proj["env"].items())),
            deps=str(realrepos / name),
            resolve_lockfile=True,  # dinero's copy has none (upstream keeps a yarn.lock)
            name=name,
        )
        if name in RANGES:
            r = RANGES[name]
            opts = dataclasses.replace(
                opts,
                rev_range=r["range"],
                entry=r["entry"],
                deps=str(deps_at(repo, r["deps_at"], out / f"{name}-deps")),
            )
        t0 = time.monotonic()
        try:
            s = mine(source, out / name, opts, log=print)
        except EtaiError as e:  # one project that cannot be mined does not stop the rest
            rows.append({"project": name, "error": f"not mined: {e}"})
            continue
        row = {**s, "project": name, "wall_s": round(time.monotonic() - t0)}  # corpus's name
        if not args.no_replay and s["kept"]:
            t0 = time.monotonic()
            try:
                r = run(str(out / name), ["oracle", "noop"], out=out / f"{name}-run",
                        workers=args.workers)  # fmt: skip
            except EtaiError as e:
                rows.append({**row, "error": f"mined, not replayed: {e}"})
                continue
            oracle, noop, k = r["agents"]["oracle"], r["agents"]["noop"], r["k"]
            row.update(
                k=k,
                oracle_pa=oracle["path_accuracy"][k],
                oracle_broken=oracle["reference_broken"],
                noop_pa=noop["path_accuracy"][k],
                infra_errors=oracle["n_infra_error"] + noop["n_infra_error"],
                replay_s=round(time.monotonic() - t0),
            )
        rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(rows, indent=2))
    text = report(rows)
    (out / "report.md").write_text(text)
    print(text)
    return 0 if any(x.get("kept") for x in rows) else 1


def report(rows: list[dict]) -> str:
    lines = [
        "| project | commits scanned | candidates | kept | left out (reason: commits) | mining s "
        "| oracle PA@k (k) | broken | noop PA@k | infra | replay s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in rows:
        if "kept" not in x:
            continue
        why = ", ".join(f"{k}: {v}" for k, v in x["skipped"].items())
        lines.append(
            f"| {x['project']} | {x['commits_scanned']} | {x['candidates']} | {x['kept']} | {why} "
            f"| {x['seconds_spent']} | {x.get('oracle_pa')} ({x.get('k')}) "
            f"| {len(x.get('oracle_broken') or [])} | {x.get('noop_pa')} | {x.get('infra_errors')} "
            f"| {x.get('replay_s')} |"
        )
    kept = [x for x in rows if x.get("kept")]
    lines.append(f"\nsessions: {sum(x['kept'] for x in kept)}, projects: {len(kept)}")
    lines += [f"{x['project']}: {x['error']}" for x in rows if "error" in x]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
