"""The installed `etai` command as a user runs it, and the times the slow fixtures and reports took
(printed at the end of the test session by conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ETAI = str(Path(sys.executable).with_name("etai"))
TIMES: dict[str, float] = {}
TRAIN_SESSIONS = ["profile-display-name-null", "paginate-page-size-off-by-one"]


def etai(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ETAI, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
