"""The sandbox the authoring commands run Jest in: `etai suite build` on its base snapshot, `etai
suite mine` on each commit's workspace, `etai suite validate --jest`'s coverage audit on a session's
(coverage.py's ``Box``), and what they read of a Jest result by test id."""

from __future__ import annotations

from pathlib import Path

from harness.grading import jest
from harness.sandbox import Limits, close_quietly, provider


class Box:
    """A sandbox on ``base`` (the build's base snapshot, a mined commit's workspace, a session's),
    started again when a run kills it (timeouts)."""

    def __init__(self, sandbox: str, base: Path, limits: Limits):
        self._prov, self._base, self.limits = provider(sandbox), base, limits
        self.sb = self._prov.start(base, limits=limits)

    def restart(self) -> None:
        close_quietly(self.sb)
        self.sb = self._prov.start(self._base, limits=self.limits)

    def jest(
        self, files: list[str] | None, timeout: float, *, related: list[str] | None = None
    ) -> tuple[jest.JestResult, dict]:
        req = {"test_files": files, "timeout_ms": int(timeout * 1000), "output_cap": 1 << 20}
        if related:
            req["related"] = related
        answer = self.sb.request("jest", req, timeout=timeout)
        return jest.from_runner(answer, guarded=self.limits.guard), answer

    def close(self) -> None:
        close_quietly(self.sb)


def file_of(tid: str) -> str:
    """The test file of a test id (``file::full name``)."""
    return tid.split("::", 1)[0]


def statuses(r: jest.JestResult) -> dict[str, str]:
    """Each test id's status in ``r`` (passed, failed, ...)."""
    return {t.id: t.status for t in r.tests}
