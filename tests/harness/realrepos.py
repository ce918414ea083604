"""The shared real projects, found as scripts/real_suites.py finds them: beside the checkout or the
one it was cloned from, or $ETAI_REALREPOS. Tests read them in place (never copied here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def real_suites_script():
    """scripts/real_suites.py as a module (scripts/ is no package)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "real_suites.py"
    spec = importlib.util.spec_from_file_location("real_suites", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def realrepos() -> Path:
    return real_suites_script().find_realrepos()
