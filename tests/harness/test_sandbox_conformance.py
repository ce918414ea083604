"""The conformance checks (harness/tools/conformance.py) against every registered backend, through
`etai sandbox check NAME`; a backend that breaks one is caught; what only Docker can show stays here."""

from __future__ import annotations

import json

import pytest

from harness import sandbox
from harness.base.errors import InputError
from harness.cli import main
from harness.sandbox._local import LocalProvider
from harness.tools import conformance
from harness.tools.conformance import ISOLATION

pytestmark = pytest.mark.docker


def test_registry_knows_docker_and_local():
    assert {"docker", "local"} <= set(sandbox.names())


def test_unknown_implementation_is_an_input_error(project, capsys):
    with pytest.raises(InputError, match="unknown sandbox 'nope'; known: docker, local"):
        sandbox.start("nope", project)
    assert main(["sandbox", "check", "nope"]) == 2
    assert "unknown sandbox 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["docker", "local"])
def test_every_conformance_check_passes(kind, image, capsys):
    rc = main(["sandbox", "check", kind])
    out = capsys.readouterr().out
    assert rc == 0, out
    n = len(conformance.CHECKS)
    assert f"{kind}: {n} of {n} conformance checks passed" in out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("ok")] == [
        c.__name__ for c in conformance.CHECKS
    ]


class _Forgetful(LocalProvider):
    """A backend that does not list the workspace's test files: one check must catch it."""

    name = "forgetful"

    def start(self, workspace, *, limits, image=None):
        sb = super().start(workspace, limits=limits)
        sb.test_files = []
        return sb


def test_a_backend_that_breaks_a_check_fails_it(capsys, monkeypatch):
    monkeypatch.setitem(sandbox.SANDBOXES._items, "forgetful", _Forgetful())
    assert main(["sandbox", "check", "forgetful"]) == 1
    out = capsys.readouterr().out
    n = len(conformance.CHECKS)
    assert "FAIL  files_round_trip_and_workspace_confinement" in out and "test files []" in out
    assert f"forgetful: {n - 1} of {n} conformance checks passed" in out


def _raw_jest_report(s, timeout=60):
    """The warm hosts' whole report of a full run (jest_run keeps only each failure's first line)."""
    answer = s.request(
        "jest",
        {
            "test_files": None,
            "name_pattern": None,
            "timeout_ms": timeout * 1000,
            "output_cap": s.limits.output_cap,
        },
        timeout=timeout,
    )
    return answer["report"]


STOCK = {
    **ISOLATION,
    "tests/esm.test.js": "import x from './x';\ntest('x', () => {});\n",
    "src/api.js": "exports.get = () => 'real';\n",
    "src/__mocks__/api.js": "exports.get = () => 'mocked';\n",
    "src/parse.js": "exports.parse = (s) => s.trim().split(',').map(Number);\n",
    "tests/mock.test.js": "jest.mock('../src/api');\nconst api = require('../src/api');\n"
    "test('manual mock', () => expect(api.get()).toBe('mocked'));\n"
    "test('virtual', () => { jest.doMock('nowhere', () => 7, { virtual: true }); "
    "expect(require('nowhere')).toBe(7); });\n",
    "tests/parse.test.js": "const { parse } = require('../src/parse');\n"
    "test('throws', () => expect(parse(null)).toEqual([]));\n"
    "test('snapshot', () => expect(parse(' 1,2')).toMatchInlineSnapshot(`\n[\n  1,\n  3,\n]\n`));\n",
}


def test_warm_jest_reports_what_stock_jest_reports(tmp_path, make_project, image):
    """Warm hosts (jest-warm.js, --shard) against a one-shot stock `jest --json` in the same container:
    the same tests, statuses and failure messages, byte for byte, on the second warm run too."""
    root = make_project(tmp_path / "stock", STOCK)
    with sandbox.start("docker", root, image=image) as s:
        stock = s.exec(
            ["node", "/opt/etai/node_modules/jest/bin/jest.js", "--ci", "--json", "--silent"],
            timeout=60,
        )
        report = json.loads(stock.stdout)
        want = {
            (
                r["name"].removeprefix("/scratch/ws/"),
                t["fullName"],
                t["status"],
                tuple(t["failureMessages"]),
            )
            for r in report["testResults"]
            for t in r["assertionResults"]
        }
        want_files = {
            r["name"].removeprefix("/scratch/ws/"): r["message"] for r in report["testResults"]
        }
        assert (
            len(want) == 10
            and report["numFailedTests"] == 3
            and report["numRuntimeErrorTestSuites"] == 1
        )
        for _ in range(2):
            report = _raw_jest_report(s)
            got = {
                (r["file"], t["name"], t["status"], tuple(t["failureMessages"]))
                for r in report["testResults"]
                for t in r["tests"]
            }
            assert got == want
            got_files = {r["file"]: r["failureMessage"] or "" for r in report["testResults"]}
            assert got_files == want_files
