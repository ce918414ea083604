"""`etai suite fetch MANIFEST`: the command (added to `etai suite` by harness/cli/run.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(suite_sub) -> None:
    f = suite_sub.add_parser(
        "fetch",
        help="materialise the etai-js benchmark (or another manifest) into suite folders",
        description="Build the suites of a manifest of real bug fixes (docs/guides/etai-js.md): "
        "each project's repository is cloned from its URL (or found offline in --mirror), every "
        "session's workspace is its base commit with the test patch, checked against the "
        "manifest's content hash, and the project's dependencies are installed from its "
        "lockfile. Writes OUT/<project>/, a suite of its own per project (its own dependencies "
        "and sandbox settings), and OUT/suite-set.json naming them: `etai run --suite OUT` runs "
        "every project fetched, `etai report` and `etai gate` on that run pool them with error "
        "bars by project. A hash mismatch, a missing commit or a damaged mirror names the session and stops "
        "with exit 2, leaving no suite behind; rerunning after a kill resumes, skipping the "
        "sessions already built and verified.",
        epilog="Example: etai suite fetch etai-js --mirror ../shared/realrepos-history "
        "--out runs/etai-js",
    )
    f.add_argument(
        "manifest", nargs="?", default="etai-js",
        help="etai-js (its newest version), etai-js@N, or a manifest folder (default etai-js)",
    )  # fmt: skip
    f.add_argument("--only", metavar="PROJECT", help="only this project's sessions")
    f.add_argument(
        "--lite", action="store_true",
        help="only the lite subset: at most 60 sessions stratified by project and fix size, the "
        "same for a version every time (docs/guides/etai-js.md); suites named etai-js@N-lite-NAME",
    )  # fmt: skip
    f.add_argument(
        "--list", action="store_true",
        help="print the sessions the fetch would build (id, project, fix size and its class, fix "
        "date) and exit without fetching",
    )  # fmt: skip
    f.add_argument(
        "--mirror", metavar="DIR",
        help="offline: a folder of git bundles (NAME.bundle), bare repositories (NAME.git) or "
        "clones (NAME/), NAME the project's or its repository's; default: clone each URL",
    )  # fmt: skip
    f.add_argument("--out", metavar="DIR", help="where the suites go (default runs/<manifest>)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    f.set_defaults(func=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.authoring.etai_js import lite, manifest
    from harness.authoring.etai_js.fetch import fetch
    from harness.session import suite_set

    whole = manifest.load(args.manifest)
    m = lite.of(whole) if args.lite else whole
    if args.list:
        return _list(m, lite.size_classes(whole.rows), args.only)
    out = Path(args.out or f"runs/{m.label}")
    done = fetch(
        m, out, only=args.only, mirror=Path(args.mirror) if args.mirror else None,
        progress=not args.no_progress, log=lambda msg: print(msg, file=sys.stderr),
    )  # fmt: skip
    for name, r in done.items():
        print(f"{name}: {r['sessions']} sessions ({r['built']} built, {r['skipped']} already "
              f"there) -> {r['suite']}")  # fmt: skip
    members = ", ".join(suite_set.load_set(out).members)
    print(f"{m.label} at {out} ({members}) -> etai run --suite {out}")
    return 0


def _list(m, classes: dict[str, str], only: str | None) -> int:
    """Each session of ``m`` with its fix size and size class (``classes``: over the whole
    version, as the lite rule ranks them)."""
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.authoring.etai_js.lite import fix_size
    from harness.base.errors import InputError

    if only is not None and only not in m.projects:
        raise InputError(f"no project {only!r} in {m.label}", where="--only")
    rows = [r for r in m.rows if only in (None, r["project"])]
    for r in rows:
        print(f"{r['session_id']}\t{r['project']}\t{fix_size(r)}\t{classes[r['session_id']]}"
              f"\t{r['fix_date']}")  # fmt: skip
    print(f"{m.label}: {len(rows)} session(s)", file=sys.stderr)
    return 0
