"""harness/base/cpus.py: the CPUs this process may use, from the affinity mask and the cgroup's
CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``); real containers for the quota itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.base.cpus import available_cpus

MASK = len(os.sched_getaffinity(0))


def _v2(root: Path, text: str) -> Path:
    root.mkdir()
    (root / "cpu.max").write_text(text)
    return root


def _v1(root: Path, quota: int, period: int = 100000) -> Path:
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


def test_a_quota_below_the_mask_is_what_counts(tmp_path):
    # 1.5 CPUs of quota round up: the second CPU is there half the time, and workers wait on I/O.
    assert available_cpus(_v2(tmp_path / "a", "150000 100000\n")) == min(MASK, 2)
    assert available_cpus(_v2(tmp_path / "b", "50000 100000\n")) == 1
    assert available_cpus(_v1(tmp_path / "c", 100000)) == 1
    assert available_cpus(_v1(tmp_path / "d", 400000 * MASK)) == MASK  # above the mask: the mask


def test_no_quota_is_the_affinity_mask(tmp_path):
    assert available_cpus(_v2(tmp_path / "a", "max 100000\n")) == MASK
    assert available_cpus(_v1(tmp_path / "b", -1)) == MASK
    assert available_cpus(tmp_path / "none") == MASK  # no cgroup files at all
    assert available_cpus(_v2(tmp_path / "c", "garbage\n")) == MASK


@pytest.mark.docker
def test_a_containers_cpu_quota_is_seen_from_inside_it(image):
    """The module itself, in a real container started with --cpus 1 (a CI runner's quota): it
    counts one CPU where os.cpu_count() counts the machine's."""
    src = Path(__file__).resolve().parents[2] / "harness" / "base" / "cpus.py"
    code = (
        "import os, runpy; f = runpy.run_path('/cpus.py')['available_cpus']; "
        "print(f(), os.cpu_count())"
    )
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--cpus", "1", "-v", f"{src}:/cpus.py:ro",
         "--entrypoint", "python3", image, "-c", code],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen, counted = map(int, out.stdout.split())
    assert seen == 1 and counted == os.cpu_count(), out.stdout
