"""`make etai-js`: grow the etai-js manifest from mines and verify it as a user would get it.

For each project of ../shared/realrepos whose history is at hand (scripts/mined_suites.py says
where), `etai suite mine` runs (no replay) into runs/etai-js-mined/<project>; its kept sessions
become rows of the draft version in suites/etai-js/<version>/ (harness/authoring/etai_js/convert.py,
each row rebuilt from the history and its hash compared first), with the project's URL and licence
from corpus.json; then `etai suite fetch` materialises those projects from the histories into
runs/etai-js/ and each suite is replayed with the oracle and the do-nothing agent. A released
version refuses new rows: start the next version's folder for them.

Usage: python scripts/etai_js.py [--only NAME ...] [--max N] [--commits N] [--version V]
                                 [--no-mine] [--no-replay] [--release]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import mined_suites  # noqa: E402  (mining as make mined-suites does it)
from real_suites import find_realrepos  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from harness.authoring.etai_js import convert, manifest
    from harness.authoring.etai_js.fetch import fetch
    from harness.runs.runner import run

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", help="only these projects (repeatable)")
    p.add_argument("--max", type=int, default=5, help="sessions kept per project (5)")
    p.add_argument("--commits", type=int, default=400, help="first-parent commits back (400)")
    p.add_argument("--version", default="1", help="the manifest version to add to (1)")
    p.add_argument("--no-mine", action="store_true", help="convert and verify what is mined")
    p.add_argument("--no-replay", action="store_true", help="fetch without replaying")
    p.add_argument(
        "--release", action="store_true",
        help="freeze the version once every project is verified (its sha256 into versions.json)",
    )  # fmt: skip
    args = p.parse_args(argv)
    realrepos = find_realrepos()
    corpus = {x["name"]: x for x in json.loads((realrepos / "corpus.json").read_text())}
    mined = ROOT / "runs" / "etai-js-mined"
    names = [n for n in corpus if not args.only or n in args.only]
    if not args.no_mine:
        flags = [f"--only={n}" for n in names]
        mined_suites.main([*flags, f"--max={args.max}", f"--commits={args.commits}",
                           f"--out={mined}", "--no-replay"])  # fmt: skip
    version = manifest.HOME / args.version
    added = []
    for name in names:
        source = mined_suites.history_of(corpus[name], realrepos, {})
        if source is None or not (mined / name / "sessions.jsonl").is_file():
            print(f"{name}: nothing mined")
            continue
        url = f"https://github.com/{corpus[name]['upstream']}.git"
        ids = convert.add(version, mined / name, source, url=url,
                          license=corpus[name]["license"], version=int(args.version))  # fmt: skip
        print(f"{name}: {len(ids)} rows in {version}")
        added.append(name)
    m = manifest.load(version)
    mirror = realrepos.parent / "realrepos-history"
    rows = []
    for name in added:
        (got,) = fetch(m, ROOT / "runs" / "etai-js", only=name, mirror=mirror).values()
        row = {"project": name, "sessions": got["sessions"]}
        if not args.no_replay:
            r = run(got["suite"], ["oracle", "noop"], out=ROOT / "runs" / f"etai-js-run-{name}")
            k = r["k"]
            row.update(oracle=r["agents"]["oracle"]["path_accuracy"][k],
                       broken=len(r["agents"]["oracle"]["reference_broken"]),
                       noop=r["agents"]["noop"]["path_accuracy"][k])  # fmt: skip
        rows.append(row)
        print(json.dumps(row))
    bad = [r for r in rows if r.get("oracle", 1.0) < 1.0 or r.get("noop", 0.0) > 0.0]
    if bad or not rows:
        return 1
    if args.release and (args.no_replay or set(added) != set(m.projects)):
        print(f"not released: every project of {m.label} must be fetched and replayed in this run")
        return 1
    if args.release:
        print(f"{m.label} released: {manifest.release(version)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
