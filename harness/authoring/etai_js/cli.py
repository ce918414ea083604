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
        "lockfile. Writes OUT/<project>/, a suite `etai run --suite OUT/<project>` takes as it "
        "is. A hash mismatch, a missing commit or a damaged mirror names the session and stops "
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
        "--mirror", metavar="DIR",
        help="offline: a folder of git bundles (NAME.bundle), bare repositories (NAME.git) or "
        "clones (NAME/), NAME the project's or its repository's; default: clone each URL",
    )  # fmt: skip
    f.add_argument("--out", metavar="DIR", help="where the suites go (default runs/<manifest>)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    f.set_defaults(func=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.authoring.etai_js import manifest
    from harness.authoring.etai_js.fetch import fetch

    m = manifest.load(args.manifest)
    out = Path(args.out or f"runs/{m.label}")
    done = fetch(
        m, out, only=args.only, mirror=Path(args.mirror) if args.mirror else None,
        progress=not args.no_progress, log=lambda msg: print(msg, file=sys.stderr),
    )  # fmt: skip
    for name, r in done.items():
        print(f"{name}: {r['sessions']} sessions ({r['built']} built, {r['skipped']} already "
              f"there) -> etai run --suite {r['suite']}")  # fmt: skip
    return 0
