"""Green: the verification tests pass, tests and Jest config are unchanged, and nothing regressed.

``take_baseline`` runs once on the pristine workspace (before the agent acts); ``verify`` runs
after. Both use one full Jest run, so a verdict costs one warm Jest step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness import jest
from harness.sandbox import Sandbox, Status

CONFIG_FILES = ("package.json", "jest.config.js", "jest.config.cjs", "jest.config.mjs", "jest.config.json",
                "jest.config.ts", "babel.config.js", ".babelrc")


@dataclass(frozen=True)
class Baseline:
    protected: dict[str, str | None]  # path -> sha256 at the start (None: absent)
    passing: frozenset[str]  # "file::test name" passing at the start
    test_files: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    green: bool
    reason: str | None
    status: Status  # of the verification Jest run
    failed_tests: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"green": self.green, "reason": self.reason, "status": self.status.value,
                "failed_tests": self.failed_tests}


def _hashes(sb: Sandbox, paths: list[str]) -> dict[str, str | None]:
    return sb.request("hash", {"paths": paths})["hashes"]


def _full_run(sb: Sandbox, timeout: float | None) -> jest.JestResult:
    t = timeout or sb.limits.timeout_s
    answer = sb.request("jest", {"timeout_ms": int(t * 1000), "output_cap": sb.limits.output_cap}, timeout=t)
    return jest.from_runner(answer)


def take_baseline(sb: Sandbox, test_files: list[str], *, timeout: float | None = None) -> Baseline:
    run = _full_run(sb, timeout)
    protected = sorted(set(test_files) | set(CONFIG_FILES))
    return Baseline(_hashes(sb, protected), frozenset(run.passed_tests), tuple(test_files))


def verify(sb: Sandbox, base: Baseline, verify_files: list[str] | None = None, *,
           timeout: float | None = None) -> Verdict:
    changed = sorted(p for p, h in _hashes(sb, list(base.protected)).items() if h != base.protected[p])
    run = _full_run(sb, timeout)
    failed = [{"name": f.name, "file": f.file, "message": f.message} for f in run.failed_tests]
    if changed:
        return Verdict(False, f"protected files changed: {', '.join(changed)}", run.status, failed)
    if run.status in (Status.TIMEOUT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT) or run.evidence != "nonce":
        return Verdict(False, f"verification run {run.status.value}: {run.reason}", run.status, failed)
    wanted = set(verify_files or base.test_files)
    passed_now = set(run.passed_tests)
    bad = [f for f in run.failed_tests if f.file in wanted]
    if bad:
        return Verdict(False, f"{len(bad)} verification test(s) fail", run.status, failed)
    if not any(t.split("::", 1)[0] in wanted for t in passed_now):
        return Verdict(False, "no verification test passed", run.status, failed)
    regressed = sorted(base.passing - passed_now)
    if regressed:
        return Verdict(False, f"{len(regressed)} test(s) that passed at the start no longer pass", run.status, failed)
    if run.reason and "did not report" in run.reason:
        return Verdict(False, run.reason, run.status, failed)
    return Verdict(True, None, run.status, failed)
