"""The documentation site built once per test session, strictly, as `make docs` builds it, into a
temporary folder (runs/site is left to `make docs`); and the helpers that build copies of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# headless.py, the reports tests' chromium driver, and crawl.py beside this file
sys.path.insert(0, str(ROOT / "tests" / "reports"))
sys.path.insert(0, str(Path(__file__).parent))

# MkDocs plugins print a banner about MkDocs 2 on every build; these switch it off.
QUIET = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}


def mkdocs_build(project: Path, out: Path, *, strict: bool = True) -> subprocess.CompletedProcess:
    """`mkdocs build` of the project folder (its mkdocs.yml) into out."""
    cmd = [str(Path(sys.executable).parent / "mkdocs"), "build", "-f", str(project / "mkdocs.yml")]
    cmd += ["-d", str(out), "--strict" if strict else "--no-strict"]
    return subprocess.run(
        cmd, cwd=project, env={**os.environ, **QUIET}, capture_output=True, text=True, timeout=300
    )


def project_copy(dest: Path) -> Path:
    """A checkout to break on purpose: docs/ and mkdocs.yml copied, every other entry of the
    repository linked (the hook checks links to repository files, the generator and mkdocstrings
    read the packages)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", dest / "docs")
    for entry in ROOT.iterdir():
        if entry.name not in ("docs", "mkdocs.yml", ".git", ".venv", "runs"):
            (dest / entry.name).symlink_to(entry)
    return dest


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    p = mkdocs_build(ROOT, out)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return out
