"""Benchmark: what a new Jest host costs (start + the template warm-up it does before serving),
with and without the image's V8 code cache (docs/sandbox.md#code-cache), interleaved in one
container (ratios, not absolute times).

Each round starts one host each way, as the runner starts one in the Docker sandbox (root that
becomes the sandbox user, the heap limit of the default 1024 MB sandbox), sends it the template
warm-up and times it until it answers: wall seconds, and the host's CPU seconds from /proc.

    python bench/host_start.py [--rounds 15] [--json F]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DRIVER = r"""
'use strict';
const cp = require('child_process'), fs = require('fs');
const [rounds, heap] = process.argv.slice(2).map(Number);
const warmDir = '/scratch/warm';
require('/opt/etai/warm-template.js').writeTo(warmDir);
fs.mkdirSync('/scratch/ws'); fs.mkdirSync('/scratch/tmp'); fs.chmodSync('/scratch/tmp', 0o1777);
const cpu = (pid) => { const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(s[11]) + Number(s[12])) / 100; };
async function host(cache) {
  const t0 = process.hrtime.bigint();
  const env = Object.assign({}, process.env, { ETAI_SANDBOX_UID: '10001', ETAI_WORKSPACE: '/scratch/ws',
    TMPDIR: '/scratch/tmp', ETAI_CODE_CACHE: cache ? process.env.ETAI_CODE_CACHE : '' });
  const p = cp.fork('/opt/etai/jest-host.js', [], { cwd: '/scratch/ws', execArgv: [`--max-old-space-size=${heap}`],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env });
  const answer = await new Promise((ok, fail) => { p.on('message', ok); p.on('exit', (c) => fail(new Error(`host exited ${c}`)));
    p.send({ op: 'warm', nonce: 'bench', dir: warmDir }); });
  const r = { wall: Number(process.hrtime.bigint() - t0) / 1e9, cpu: cpu(p.pid), warmed: JSON.parse(answer.json).warmed };
  p.removeAllListeners('exit'); p.kill('SIGKILL');
  return r;
}
(async () => {
  const out = { off: [], on: [] };
  for (let i = 0; i < rounds; i++) for (const way of i % 2 ? ['on', 'off'] : ['off', 'on']) out[way].push(await host(way === 'on'));
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { process.stderr.write(String(e.stack || e)); process.exit(1); });
"""


def main() -> None:
    from harness.sandbox import Limits, image, jest_heap_mb

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15, help="hosts started each way (default 15)")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    img = image.ensure_image(print)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "driver.js").write_text(DRIVER)
        r = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "--user", "0", "--cpus", "2",
             "-v", f"{tmp}:/bench:ro", "--tmpfs", "/scratch:exec,mode=1777", "--entrypoint", "node",
             img, "/bench/driver.js", str(args.rounds), str(jest_heap_mb(Limits().memory_mb))],
            capture_output=True, text=True, timeout=60 + 30 * args.rounds,
        )  # fmt: skip
    if r.returncode != 0:
        sys.exit(f"host_start: the driver failed:\n{r.stderr[-4000:]}")
    runs = json.loads(r.stdout)
    if any(x["warmed"] < 1 for way in runs.values() for x in way):
        sys.exit("host_start: a host ran none of the template's tests")

    def p50(xs):
        return sorted(xs)[len(xs) // 2]

    res = {"image": img, "rounds": args.rounds}
    for way in ("off", "on"):
        res[way] = {
            "wall_p50_s": round(p50([x["wall"] for x in runs[way]]), 3),
            "cpu_p50_s": round(p50([x["cpu"] for x in runs[way]]), 3),
            "cpu_total_s": round(sum(x["cpu"] for x in runs[way]), 2),
        }
        print(f"code cache {way:3}: wall p50 {res[way]['wall_p50_s']:.3f} s, "
              f"CPU p50 {res[way]['cpu_p50_s']:.2f} s, CPU total {res[way]['cpu_total_s']:.2f} s")  # fmt: skip
    res["wall_ratio"] = round(res["off"]["wall_p50_s"] / res["on"]["wall_p50_s"], 2)
    res["cpu_ratio"] = round(res["off"]["cpu_total_s"] / res["on"]["cpu_total_s"], 2)
    print(
        f"with the cache: {res['wall_ratio']:.2f}x faster (wall p50), {res['cpu_ratio']:.2f}x less CPU"
    )
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
