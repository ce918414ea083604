"""What every result row's cache key records about the code that made it: the etai version and a
digest of the modules that decide a verdict, so a changed verifier never reuses old verdicts."""

from __future__ import annotations

import hashlib
from pathlib import Path

# The modules whose code decides a verdict, relative to harness/; their text is part of every
# verdict's cache key (the in-sandbox half, the image recipe's runner, is in the image tag, which
# is in the key too).
_GRADING = (
    "grading/jest.py",
    "grading/verify.py",
    "runs/loop.py",
    "sandbox/__init__.py",
    # A held-out failure read as special-cased or incomplete: the rule and the parser it reads with.
    "runs/held_out.py",
    "grading/cases.py",
    "grading/js/testcases.js",
    "grading/js/case-print.js",
    "grading/js/parse-source.js",
    "grading/js/case-calls.js",
)
_HARNESS = Path(__file__).resolve().parent.parent
_digest: str | None = None
_version: str | None = None


def grading_digest() -> str:
    """A digest of the harness code that decides verdicts: a changed verifier never reuses old ones."""
    global _digest
    if _digest is None:
        h = hashlib.sha256()
        for name in _GRADING:
            h.update(hashlib.sha256((_HARNESS / name).read_bytes()).digest())
        _digest = h.hexdigest()[:16]
    return _digest


def version() -> str:
    """The installed etai version; part of every result row's cache key. Read once: the lookup
    scans the installed packages (half a millisecond), and a run asks twice per episode it plans."""
    global _version
    if _version is None:
        # importlib.metadata here: its import costs more than the rest of `import harness`
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as _installed_version

        try:
            _version = _installed_version("etai")
        except PackageNotFoundError:
            _version = "0+unknown"
    return _version
