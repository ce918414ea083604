"""How many CPUs this process may use: the default number of workers of a run.

``os.cpu_count()`` counts the machine's CPUs. In a container (a CI runner, a cluster pod) that can
be many times what the process may use, and a run with one worker per counted CPU then crowds
dozens of sandboxes onto two. No standard function reads the CPU quota (Python 3.13's
``os.process_cpu_count`` reads only the affinity mask), hence this module: the smaller of the
affinity mask and the cgroup's CPU quota, v2 (``cpu.max``) or v1 (``cpu.cfs_quota_us``), as the
process's own cgroup is mounted at /sys/fs/cgroup inside a container. A quota set on a cgroup above
that mount (a systemd slice on a bare host) is not seen.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def available_cpus(cgroup: Path = CGROUP) -> int:
    """CPUs this process may use, at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    quota = _quota(cgroup)
    return max(1, min(n, math.ceil(quota)) if quota else n)


def _quota(cgroup: Path) -> float | None:
    """The cgroup's CPU quota in CPUs, or None without one."""
    try:
        limit, period = (cgroup / "cpu.max").read_text().split()[:2]  # v2: "max 100000" = none
        return None if limit == "max" else int(limit) / int(period)
    except (OSError, ValueError):
        pass
    try:
        limit = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())  # v1: -1 = none
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
        return None if limit <= 0 or period <= 0 else limit / period
    except (OSError, ValueError):
        return None
