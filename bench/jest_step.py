"""Benchmark: one `jest_run` step four ways, interleaved in one process (ratios, not absolute times).

  naive    a fresh `docker run --rm` + one-shot Jest per step
  exec     one-shot Jest via `docker exec` into a warm container
  etai     ETAI's sandbox: warm container, persistent Jest runner, long-lived pipe, grading guard on
  noguard  the same with the guard off (Limits(guard=False)): what the guard costs a step

The project has 5 test files / 9 tests (docs/sandbox.md#bench-project). Each round runs
every way once in shuffled order, so machine noise hits all ways alike.

    python bench/jest_step.py [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FILES = {
    "src/sum.js": "module.exports = (a, b) => a + b;\n",
    "src/strings.js": "exports.capitalize = (s) => s[0].toUpperCase() + s.slice(1);\n"
    "exports.reverse = (s) => [...s].reverse().join('');\n",
    "src/array.js": "exports.unique = (a) => [...new Set(a)];\n"
    "exports.chunk = (a, n) => a.length ? [a.slice(0, n), ...exports.chunk(a.slice(n), n)] : [];\n",
    "src/async.js": "exports.delay = (v) => new Promise((r) => setTimeout(() => r(v), 1));\n",
    "tests/sum.test.js": "const sum = require('../src/sum');\ntest('adds', () => expect(sum(1, 2)).toBe(3));\n"
    "test('negatives', () => expect(sum(-1, -2)).toBe(-3));\n",
    "tests/strings.test.js": "const s = require('../src/strings');\ndescribe('strings', () => {\n"
    "  test('capitalize', () => expect(s.capitalize('ab')).toBe('Ab'));\n"
    "  test('reverse', () => expect(s.reverse('ab')).toBe('ba'));\n});\n",
    "tests/array.test.js": "const a = require('../src/array');\ntest('unique', () => expect(a.unique([1, 1, 2])).toEqual([1, 2]));\n"
    "test('chunk', () => expect(a.chunk([1, 2, 3], 2)).toEqual([[1, 2], [3]]));\n",
    "tests/async.test.js": "const { delay } = require('../src/async');\ntest('resolves', () => expect(delay(4)).resolves.toBe(4));\n",
    "tests/mock.test.js": "test('fn', () => { const f = jest.fn(); f(1); expect(f).toHaveBeenCalledWith(1); });\n"
    "test('shape', () => expect({ a: 1, b: 2 }).toMatchObject({ a: 1 }));\n",
}
JEST = ["node", "/opt/etai/node_modules/jest/bin/jest.js", "--ci", "--json", "--silent"]


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(
        json.dumps({"name": "bench", "private": True, "jest": {"testEnvironment": "node"}})
    )
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def container_cpu_ms(name: str) -> float | None:
    """CPU time a container has used so far (its cgroup's count: runner, Jest host and all), or None
    where this machine's cgroup layout is not one of the usual three. Unlike wall time, it does not
    move with what else the shared machine is running."""
    cid = subprocess.run(
        ["docker", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True
    ).stdout.strip()
    v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e6
    for v2 in (f"system.slice/docker-{cid}.scope", f"docker/{cid}"):
        stat = Path("/sys/fs/cgroup") / v2 / "cpu.stat"
        if stat.exists():
            fields = dict(line.split() for line in stat.read_text().splitlines())
            return int(fields["usage_usec"]) / 1e3
    return None


def check_ok(proc: subprocess.CompletedProcess, way: str) -> None:
    out = proc.stdout
    report = json.loads(out[out.index("{") :])
    if report["numPassedTests"] != 9:
        raise SystemExit(f"{way}: expected 9 passing tests, got {report['numPassedTests']}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=20, help="steps per way (default 20)")
    ap.add_argument(
        "--ways",
        default="naive,exec,etai,noguard",
        help="comma-separated subset (default all; 'etai,noguard' measures the guard alone, fast)",
    )
    args = ap.parse_args()

    from harness import sandbox, tools
    from harness.sandbox import image

    tag = image.ensure_image()
    tmp = Path(tempfile.mkdtemp(prefix="etai-bench-"))
    proj = write_project(tmp / "proj")
    sb = sandbox.start("docker", proj, image=tag)
    bare = sandbox.start("docker", proj, image=tag, limits=sandbox.Limits(guard=False))
    try:
        for s in (sb, bare):  # the runner's first run (cold cache) is not a step
            first = tools.call(s, "jest_run", {})
            assert first.status == "passed" and first.data["num_passed"] == 9, first

        def naive():
            p = subprocess.run(
                [
                    "docker",
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    "--label",
                    "etai=1",
                    "-v",
                    f"{proj}:/w:ro",
                    "-e",
                    "TMPDIR=/tmp",
                    "-w",
                    "/w",
                    "--user",
                    "10001:10001",
                    tag,
                    *JEST,
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            check_ok(p, "naive")

        def exec_oneshot():
            p = subprocess.run(
                ["docker", "exec", "-w", "/scratch/ws", sb.name, *JEST],
                capture_output=True,
                text=True,
                timeout=60,
            )
            check_ok(p, "exec")

        def etai(s=sb, way="etai"):
            r = tools.call(s, "jest_run", {})
            if r.status != "passed" or r.data["num_passed"] != 9:
                raise SystemExit(f"{way}: {r}")

        ways = {
            "naive": naive,
            "exec": exec_oneshot,
            "etai": etai,
            "noguard": lambda: etai(bare, "noguard"),
        }
        ways = {w: ways[w] for w in args.ways.split(",")}
        for fn in ways.values():  # warm every path once
            fn()
        times: dict[str, list[float]] = {w: [] for w in ways}
        cpu0 = {"etai": container_cpu_ms(sb.name), "noguard": container_cpu_ms(bare.name)}
        for i in range(args.steps):
            order = list(ways)
            random.shuffle(order)
            for w in order:
                t0 = time.perf_counter()
                ways[w]()
                times[w].append((time.perf_counter() - t0) * 1000)
            print(f"\rround {i + 1}/{args.steps}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        # Per way, from its own container: `exec` runs in etai's, so it is left out then.
        cpu = {
            w: (container_cpu_ms(s.name) - cpu0[w]) / args.steps
            for w, s in (("etai", sb), ("noguard", bare))
            if w in ways and cpu0[w] is not None and not (w == "etai" and "exec" in ways)
        }
    finally:
        sb.close()
        bare.close()

    p50 = {w: statistics.median(t) for w, t in times.items()}
    print(f"jest_run step, 5 test files / 9 tests, {args.steps} interleaved rounds")
    print(f"{'way':<8}{'p50 ms':>10}{'p90 ms':>10}{'min ms':>10}")
    for w, t in times.items():
        print(f"{w:<8}{p50[w]:>10.1f}{pct(t, 0.9):>10.1f}{min(t):>10.1f}")
    if "naive" in p50 and "exec" in p50:
        print(
            f"etai is {p50['naive'] / p50['etai']:.1f}x faster than naive (p50), "
            f"{p50['exec'] / p50['etai']:.1f}x faster than exec one-shot"
        )
        ok = p50["etai"] <= 150 and p50["naive"] / p50["etai"] >= 6
        print("targets (p50 <= 150 ms, >= 6x naive):", "met" if ok else "NOT met")
    if "noguard" not in p50:
        return 0
    # Paired within each round (both ran in the same shuffled round), which cancels the machine's drift.
    paired = statistics.median(e / n for e, n in zip(times["etai"], times["noguard"]))
    print(
        f"the grading guard costs {100 * (p50['etai'] / p50['noguard'] - 1):+.1f}% at p50 "
        f"({p50['noguard']:.1f} -> {p50['etai']:.1f} ms), {100 * (paired - 1):+.1f}% as the median "
        f"of paired rounds (budget +10%)"
    )
    if len(cpu) == 2:
        print(
            f"CPU per step (the container's cgroup): {cpu['noguard']:.1f} -> {cpu['etai']:.1f} ms, "
            f"{100 * (cpu['etai'] / cpu['noguard'] - 1):+.1f}% (steady under a noisy machine)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
