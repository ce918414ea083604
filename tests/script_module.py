"""Loading a script of scripts/ or bench/ (not a package) as a module, for the tests of it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load(relpath: str) -> ModuleType:
    """``ROOT/relpath`` imported under its file's stem, registered in ``sys.modules`` (its
    dataclasses look their module up by name)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
