"""How fast `etai view` opens and filters a big run, measured in Debian's chromium (not a timed test).

    python bench/view_bench.py --from RUN [--episodes 5000] [--rounds 5]

Synthesizes a run folder of N episodes from a real run's rows (each copied under a new session id,
cycling over four agent names), writes it with `etai view --out`, opens the file in headless
chromium over the DevTools protocol (tests/reports/headless.py) and reports, from inside the page:
the time from navigation start until the list is drawn (``etaiReadyMs`` in view.js), and each
filter's time from the change event until layout is done. README "The viewer" records the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reports"))

import headless  # noqa: E402 (the test helper that drives chromium)

AGENTS = ["oracle", "noop", "hf:model-a", "hf:model-b"]
FILTERS = [("outcome", "failed"), ("agent", "hf:model-a"), ("status", "passed"), ("outcome", "")]


def synthesize(source: Path, n: int, out: Path) -> Path:
    rows = [json.loads(x) for x in (source / "results.jsonl").read_text().splitlines() if x.strip()]
    out.mkdir(parents=True)
    with open(out / "results.jsonl", "w") as f:
        for i in range(n):
            r = dict(rows[i % len(rows)])
            r.update(
                cache_key=f"bench-{i}",
                session_id=f"{r['session_id']}-{i // len(AGENTS)}",
                agent=AGENTS[i % len(AGENTS)],
            )
            f.write(json.dumps(r) + "\n")
    summary = json.loads((source / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "agents": {}}))
    return out


def _filter_ms(tab: headless.Tab, name: str, value: str) -> float:
    return tab.eval(
        "(() => { const s = document.querySelector('select[data-filter=" + name + "]');"
        " const t0 = performance.now(); s.value = " + json.dumps(value) + ";"
        " s.dispatchEvent(new Event('change', {bubbles: true}));"
        " document.body.getBoundingClientRect(); void document.body.offsetHeight;"
        " return performance.now() - t0; })()"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--from", dest="source", required=True, help="a real run folder to copy rows from"
    )
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run = synthesize(Path(args.source), args.episodes, Path(tmp) / "run")
        html = Path(tmp) / "view.html"
        t0 = time.monotonic()
        subprocess.run(
            [str(Path(sys.executable).with_name("etai")), "view", str(run), "--out", str(html)],
            check=True,
            capture_output=True,
        )
        print(f"etai view --out: {time.monotonic() - t0:.1f} s, {html.stat().st_size / 1e6:.1f} MB")
        opens, filters = [], {f"{k}={v or 'all'}": [] for k, v in FILTERS}
        for _ in range(args.rounds):
            with headless.browser() as tab:
                tab.navigate(html.resolve().as_uri())
                tab.wait("window.etaiReadyMs !== undefined", timeout=120)
                opens.append(tab.eval("window.etaiReadyMs"))
                for k, v in FILTERS:
                    filters[f"{k}={v or 'all'}"].append(_filter_ms(tab, k, v))
                tab.eval("document.querySelector('#episodes tbody a.ep').click()")
                tab.wait("document.getElementById('episode-title')")
                assert tab.console_errors() == [], tab.console_errors()
        print(
            f"open ({args.episodes} episodes) until the list is drawn: median {statistics.median(opens):.0f} ms, max {max(opens):.0f} ms"
        )
        for name, ms in filters.items():
            print(f"filter {name}: median {statistics.median(ms):.1f} ms, max {max(ms):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
