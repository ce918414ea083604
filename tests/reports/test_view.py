"""`etai view` in Debian's chromium over the DevTools protocol (tests/reports/headless.py): a real run
of oracle, noop and a hostile replayed agent on two bundled sessions, opened as the static file and
from the loopback server; clicked through as a user would, with a quiet console and nothing of the
agent's run. The hostile agent writes `<script>`, an `onerror` image and `javascript:` links into a
file edit, its final answer and a tool name."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

import headless
from etai_cmd import ETAI, etai

SESSIONS = ["profile-display-name-null", "paginate-page-size-off-by-one"]
# Each payload sets window.__pwned if the page ever runs it.
EDIT = (
    'const FALLBACK_NAME = \'<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    '<a href="javascript:window.__pwned=3">click</a>\';'
)
ANSWER = '<script>window.__pwned=4</script> see <a href="javascript:window.__pwned=5">javascript:alert(1)</a>'
HOSTILE = [
    {
        "session_id": SESSIONS[0],
        "actions": [
            {"tool": "jest_run", "args": {"test_file": "tests/profile.test.js"}},
            {
                "tool": "file_edit",
                "args": {
                    "file": "src/profile.js",
                    "old": "const FALLBACK_NAME = 'Anonymous';",
                    "new": EDIT,
                },
            },
            {"tool": "jest_run", "args": {"test_file": "tests/profile.test.js"}},
        ],
        "final_output": ANSWER + " \u001b[31mred\u001b[0m",
    },
    {
        "session_id": SESSIONS[1],
        "actions": [
            {"tool": "jest_run", "args": {}},
            {"tool": "<img src=x onerror=window.__pwned=6>", "args": {}},
        ],
        "final_output": "</script><script>window.__pwned=7</script>",
    },
]
REPLAY = "replay:hostile.jsonl"


@pytest.fixture(scope="module")
def three_agents(tmp_path_factory, image) -> Path:
    """`etai run` with oracle, noop and the hostile replay on two sessions (about 15 s)."""
    root = tmp_path_factory.mktemp("view")
    (root / "hostile.jsonl").write_text("".join(json.dumps(x) + "\n" for x in HOSTILE))
    agents = [x for a in ("oracle", "noop", REPLAY) for x in ("--agent", a)]
    sessions = [x for s in SESSIONS for x in ("--session", s)]
    p = etai(
        "run",
        "--suite",
        "jest-bugfix",
        *agents,
        *sessions,
        "--out",
        "run",
        "--no-progress",
        cwd=root,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return root / "run"


def _select(tab: headless.Tab, name: str, value: str) -> None:
    tab.eval(
        f"(() => {{ const s = document.querySelector('select[data-filter={name}]'); s.value = {json.dumps(value)};"
        " s.dispatchEvent(new Event('change', {bubbles: true})); })()"
    )


def _count(tab: headless.Tab) -> str:
    return tab.eval("document.getElementById('count').textContent")


def _nothing_ran(tab: headless.Tab) -> None:
    """No payload ran, no markup of the agent's exists, and its text is on the page as text."""
    assert tab.eval("String(window.__pwned)") == "undefined"
    assert (
        tab.eval(
            "document.querySelectorAll('img, iframe, object, embed, a[href^=\"javascript\" i]').length"
        )
        == 0
    )
    scripts = tab.eval("[...document.scripts].map(s => s.type)")
    assert scripts.count("") == 1 and set(scripts) <= {"", "application/json"}  # view.js alone runs


@pytest.mark.docker
@pytest.mark.slow
def test_the_viewer_in_chromium(three_agents, tmp_path):
    html = tmp_path / "view.html"
    p = etai("view", str(three_agents), "--out", str(html))
    assert p.returncode == 0, p.stderr
    text = html.read_text()
    assert "http://" not in text and "https://" not in text  # nothing fetched from anywhere
    assert "<script>window.__pwned" not in text  # agent text is never markup, even inside JSON
    with headless.browser() as tab:
        tab.navigate(html.resolve().as_uri())
        tab.wait("document.body.dataset.ready === 'list'")
        assert _count(tab) == "6 of 6 episodes"
        _select(tab, "outcome", "failed")
        assert _count(tab) == "4 of 6 episodes"  # noop twice and the hostile agent twice
        _select(tab, "agent", REPLAY)
        assert _count(tab) == "2 of 6 episodes"
        # sorted by steps, descending: the hostile agent's 3-step episode first
        tab.eval("document.querySelector('th[data-sort=steps]').click()")
        tab.eval("document.querySelector('th[data-sort=steps]').click()")
        assert tab.eval("document.querySelector('#episodes tbody a.ep').textContent") == SESSIONS[0]
        tab.eval("document.querySelector('#episodes tbody a.ep').click()")
        tab.wait("document.getElementById('episode-title')")
        assert tab.eval("[...document.querySelectorAll('section')].map(s => s.id)") == [
            "instruction",
            "context",
            "steps",
            "paths",
            "cursor",
            "verdict",
            "final",
        ]
        # a Jest result, folded until clicked: the failing test with its message and location
        assert tab.eval("document.querySelector('details.jest').open") is False
        tab.eval("document.querySelector('details.jest summary').click()")
        assert tab.eval("document.querySelector('details.jest').open") is True
        failed = tab.eval("document.querySelector('details.jest tr.t-failed').innerText")
        assert "falls back to first and last name" in failed and "src/profile.js:11:33" in failed
        # the edit as a diff, the verdict with the check that fired, hostile text shown as text
        assert (
            tab.eval("document.querySelector('.diff .ddel').textContent")
            == "- const FALLBACK_NAME = 'Anonymous';"
        )
        assert tab.eval("document.querySelector('.diff .dadd').textContent") == "+ " + EDIT
        assert "verification: a verification test fails" in tab.eval(
            "document.getElementById('verdict').innerText"
        )
        assert (
            tab.eval("document.querySelector('#final pre').textContent") == ANSWER + " red"
        )  # ANSI dropped
        _nothing_ran(tab)
        keep = os.environ.get("ETAI_VIEW_SCREENSHOT")  # a path: keep the screenshot (docs/view.png)
        if keep:
            Path(keep).write_bytes(tab.screenshot())
        tab.eval("document.getElementById('to-session').click()")
        tab.wait("document.getElementById('session-title')")
        heads = tab.eval(
            "[...document.querySelectorAll('table.compare thead a')].map(a => a.textContent)"
        )
        assert heads == ["noop", "oracle", REPLAY]
        statuses = tab.eval(
            "[...document.querySelectorAll('table.compare tbody tr:first-child .badge')].map(b => b.textContent)"
        )
        assert statuses == ["failed", "passed", "failed"]
        # the other session's hostile tool name, through the list's filters
        tab.eval("location.hash = '#'")
        tab.wait("document.body.dataset.ready === 'list'")
        tab.eval(f"location.hash = '#s/{SESSIONS[1]}'")
        tab.wait("document.getElementById('session-title')")
        assert "</script><script>window.__pwned=7</script>" in tab.eval("document.body.innerText")
        _nothing_ran(tab)
        assert tab.console_errors() == []


@pytest.mark.docker
@pytest.mark.slow
def test_the_server_answers_on_loopback_with_the_given_runs_only(three_agents):
    proc = subprocess.Popen(
        [ETAI, "view", str(three_agents), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = re.search(r"http://\S+/", proc.stdout.readline()).group(0)
        assert url.startswith("http://127.0.0.1:")
        page = urllib.request.urlopen(url).read().decode()
        assert 'id="etai-index"' in page and 'id="ep-0"' not in page  # bodies come one by one
        first = json.loads(urllib.request.urlopen(url + "episode/0").read())
        assert first["session"] in SESSIONS
        for path in (
            "results.jsonl",
            "summary.json",
            "episode/99",
            "../results.jsonl",
            "etc/passwd",
            "view.js",
        ):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(url + path)
            assert e.value.code == 404, path
        with headless.browser() as tab:
            tab.navigate(url)
            tab.wait("document.body.dataset.ready === 'list'")
            tab.eval("document.querySelector('#episodes tbody a.ep').click()")
            tab.wait("document.getElementById('episode-title')")
            tab.eval("document.getElementById('to-session').click()")
            tab.wait("document.getElementById('session-title')")
            _nothing_ran(tab)
            assert tab.console_errors() == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_bad_input_is_named(tmp_path, capsys):
    from harness.cli import main

    assert main(["view", str(tmp_path / "nowhere"), "--out", str(tmp_path / "v.html")]) == 2
    assert "nowhere" in capsys.readouterr().err and not (tmp_path / "v.html").exists()


@pytest.mark.parametrize(
    "sig,code,said",
    [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")],
)
def test_the_server_stops_on_sigterm_as_on_ctrl_c(tmp_path, make_run, make_row, sig, code, said):
    """A scheduler or `timeout` stops the server with SIGTERM: closed, said, exit 143 (130 Ctrl-C)."""
    run = make_run(tmp_path / "r", [make_row("s1", "m", "passed", steps_to_green=1)])
    proc = subprocess.Popen(
        [ETAI, "view", str(run), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = re.search(r"http://\S+/", proc.stdout.readline()).group(0)
        assert b"etai-index" in urllib.request.urlopen(url).read()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert f"etai: {said}; the viewer's server stopped" in err and "Traceback" not in err, err
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def test_the_viewer_shows_both_readings_of_a_held_out_failure(tmp_path, make_run, make_row):
    """Hand-built rows: a held-out failure read as special-casing and one read as an incomplete fix
    are flagged and filtered apart in the list, and an episode's verdict names its reading and
    each failing held-out case with whether it is a near twin (harness/runs/held_out.py)."""
    case = {"test": "tests/h.test.js::numbers every page", "near_twin": False,
            "calls": ["pageNumbers"], "twins": []}  # fmt: skip
    rows = [
        make_row("s1", "m", "passed", steps_to_green=1),
        make_row(
            "s2",
            "m",
            "failed",
            special_cased=True,
            incomplete=False,
            held_out_failed="special_cased",
            checks=["held_out"],
        ),  # fmt: skip
        make_row(
            "s3",
            "m",
            "failed",
            special_cased=False,
            incomplete=True,
            held_out_failed="incomplete",
            checks=["held_out"],
            held_out={"green": False, "failed_cases": [case]},
        ),  # fmt: skip
        make_row("s4", "m", "failed"),  # a row from before the distinction: neither
    ]
    html = tmp_path / "view.html"
    p = etai("view", str(make_run(tmp_path / "r", rows)), "--out", str(html))
    assert p.returncode == 0, p.stderr
    with headless.browser() as tab:
        tab.navigate(html.resolve().as_uri())
        tab.wait("document.body.dataset.ready === 'list'")
        _select(tab, "incomplete", "yes")
        assert _count(tab) == "1 of 4 episodes"
        assert tab.eval("document.querySelector('#episodes tbody a.ep').textContent") == "s3"
        assert "incomplete" in tab.eval(
            "document.querySelector('#episodes tbody .flag').textContent"
        )
        _select(tab, "incomplete", "")
        _select(tab, "special", "yes")
        assert _count(tab) == "1 of 4 episodes"
        tab.eval("document.querySelector('#episodes tbody a.ep').click()")
        tab.wait("document.getElementById('episode-title')")
        assert "read as special_cased" in tab.eval("document.getElementById('verdict').innerText")
        tab.eval("location.hash = '#'")
        tab.wait("document.body.dataset.ready === 'list'")
        _select(tab, "special", "")
        _select(tab, "incomplete", "yes")
        tab.eval("document.querySelector('#episodes tbody a.ep').click()")
        tab.wait("document.getElementById('episode-title')")
        verdict = tab.eval("document.getElementById('verdict').innerText")
        assert "read as incomplete" in verdict
        assert "numbers every page: not a near twin (calls pageNumbers)" in verdict
        assert tab.console_errors() == []
