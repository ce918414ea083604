"""The preflights of suites with a speed path on and off: the same record, session by session.

`scripts/differential.py` compares episodes, which read a preflight through the verdicts it
leads to; a path that changes how a preflight measures (``base_baseline``,
``verification_rerun``: harness/base/speed.py) is compared here on what the preflight itself
records: ok, reason, the tests passing at the start, the gold records. Each arm replays every
preflight (the preflight cache is off in both).

Usage: python scripts/preflight_diff.py --path NAME [--workers W] SUITE [SUITE ...]
Exit status: 0 the same, 1 a difference (each printed), 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIELDS = ("ok", "reason", "passing", "gold", "held_out_gold")


def arm(suites, off: str, workers: int) -> dict[tuple[str, str], dict]:
    from harness.runs import base_runs
    from harness.runs.session_jobs import local_preflights

    os.environ["ETAI_SPEED_OFF"] = ",".join(["preflight_cache", *([off] if off else [])])
    base_runs.forget()
    try:
        return {
            (st.name, sid): {k: flight.get(k) for k in FIELDS}
            for st in suites
            for sid, flight in local_preflights(st, workers=workers, progress=False).items()
        }
    finally:
        os.environ.pop("ETAI_SPEED_OFF", None)


def main(argv: list[str] | None = None) -> int:
    from harness.base import speed
    from harness.base.errors import EtaiError
    from harness.suites.load import load_suite

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--path", required=True, help=f"one of {', '.join(speed.PATHS)}")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("suites", nargs="+", help="suite folders or bundled suite names")
    a = ap.parse_args(argv)
    if a.path not in speed.PATHS or a.path == "preflight_cache":
        ap.error(f"--path: {a.path!r} is not a speed path a preflight runs with")
    try:
        suites = [load_suite(s) for s in a.suites]
    except EtaiError as e:
        ap.error(str(e))
    t = time.monotonic()
    on = arm(suites, "", a.workers)
    t_on = time.monotonic() - t
    off = arm(suites, a.path, a.workers)
    t_off = time.monotonic() - t - t_on
    diffs = [
        (key, f, on[key].get(f), off.get(key, {}).get(f))
        for key in sorted(on)
        for f in FIELDS
        if on[key].get(f) != off.get(key, {}).get(f)
    ]
    for (suite, sid), f, x, y in diffs:
        print(f"DIFFERENT {suite}/{sid} {f}: on {str(x)[:300]} | off {str(y)[:300]}")
    sound = sum(1 for v in on.values() if v["ok"])
    print(
        f"preflight_diff {a.path}: {len(on)} sessions ({sound} sound) in {len(suites)} suites, "
        f"{len({k for k, *_ in diffs})} different; on {t_on:.0f} s, off {t_off:.0f} s"
    )
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
