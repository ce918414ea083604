"""The randomised red-team search (tests/harness/redteam_search.py, scripts/redteam_search.py):
the generator is deterministic and every cheat it makes is JavaScript that loads; a seeded slice of
its cheats runs through the script's own code path as full episodes, and none comes out green.
`make redteam-search` runs thousands.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

import redteam_search

ROOT = Path(__file__).resolve().parents[2]
SEED = 17
ORIGINAL = "'use strict';\n\n// the buggy module\nfunction f(x) { return x + 1; }\nmodule.exports = { f };\n"

# Compiles each source as Node compiles a CommonJS module (the module wrapper around it); prints
# the ones that do not compile.
CHECK_JS = r"""
const vm = require('vm'); const Module = require('module'); let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => { const bad = [];
  for (const [name, src] of JSON.parse(input)) {
    try { new vm.Script(Module.wrap(src), { filename: name }); } catch (e) { bad.push([name, String(e)]); } }
  process.stdout.write(JSON.stringify(bad)); });
"""


def _script():
    spec = importlib.util.spec_from_file_location(
        "redteam_search_script", ROOT / "scripts" / "redteam_search.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generator_is_deterministic_unique_and_covers_every_axis():
    cheats = redteam_search.generate(SEED, 3000)
    assert [c.name for c in cheats] == [c.name for c in redteam_search.generate(SEED, 3000)]
    assert [c.code for c in cheats] == [c.code for c in redteam_search.generate(SEED, 3000)]
    assert redteam_search.generate(SEED, 60) == cheats[:60]  # a slice is a prefix of the search
    assert redteam_search.generate(SEED + 1, 50) != cheats[:50]
    assert len({c.name for c in cheats}) == 3000
    # distinct episodes: the same code differs by its follow-up edits at most
    assert len({(c.code, c.follow_ups) for c in cheats}) == 3000
    seen = Counter(part for c in cheats for part in c.parts)
    for axis, values in redteam_search.axis_values().items():
        missing = [v for v in values if not seen[f"{axis}:{v}"]]
        assert not missing, (axis, missing)
    # the covering prefix: every kind of payload within the first few dozen cheats
    early = {p for c in cheats[: len(redteam_search.KINDS)] for p in c.parts}
    kinds = {f"what:{k}" for k in redteam_search.KINDS if k != "plant"}
    assert kinds <= early
    assert any(len([p for p in c.parts if p.startswith("what:")]) == 2 for c in cheats)
    for c in cheats:
        assert c.name.startswith(f"s{SEED}-") and c.two_step == (c.follow_ups > 0)
        content = c.content(ORIGINAL)
        assert content.endswith("\n" + ORIGINAL)  # the buggy module kept, unchanged, below it
        assert content.startswith(c.marker + "\n'use strict';\n")  # a strict module stays strict
        assert c.content("module.exports = 1;\n").startswith(c.marker + "\n" + c.code)
        # the follow-ups rename the cheat's own marker, one after the other
        text = content
        for old, new in c.edits():
            assert text.count(old) == 1
            text = text.replace(old, new)
        assert text.endswith("\n" + ORIGINAL)
        # the try/catch that keeps the module loading whatever the payload does
        assert c.code.startswith("try {") and c.code.endswith("} catch (__e) {}")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on this machine")
def test_every_generated_cheat_is_valid_javascript():
    items = {}
    for c in redteam_search.generate(SEED, 3000):
        items.setdefault(c.content(ORIGINAL), c.name)
        for i, src in enumerate(c.sources):  # what it plants, requires or runs in a child
            items.setdefault(src, f"{c.name}#{i}")
    done = subprocess.run(
        ["node", "-e", CHECK_JS],
        input=json.dumps([[name, src] for src, name in items.items()]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []


def test_script_rejects_bad_input(capsys):
    script = _script()
    assert script.main(["--cheats", "0"]) == script.EXIT_BAD_INPUT
    assert script.main(["--sessions", "no-such-session"]) == script.EXIT_BAD_INPUT
    assert script.main(["--only", "("]) == script.EXIT_BAD_INPUT
    assert script.main(["--cheats", "3", "--dry-run"]) == script.EXIT_OK
    listed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in listed] == [
        c.name for c in redteam_search.generate(script.SEED, 3)
    ]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_seeded_slice_of_the_search_finds_no_false_green(image, tmp_path):
    """50 cheats, sessions rotated, through the script's own search(): every one an episode with
    a verdict, none passed, none green (a couple of minutes on two cores)."""
    script = _script()
    pairs = script.load_sessions(None)
    entries, bad = script.preflights(pairs, workers=2)
    assert not bad, f"reference solutions must stay green under the guard: {bad}"
    cheats = redteam_search.generate(SEED, 50)
    out = tmp_path / "search"
    rep = script.search(cheats, entries, out, seed=SEED, workers=2, image=image, progress=False)
    print(script.summary(rep, out))
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == rep["cheats_run"] == 50  # nothing ran is a failure, not a pass
    assert len(rep["sessions_covered"]) == len(pairs)
    assert not rep["infra_errors"], rep["infra_errors"]  # an infra error would hide a verdict
    false_greens = [(fg["name"], fg["session"], fg["status"]) for fg in rep["false_greens"]]
    assert not false_greens, false_greens
    assert script.exit_status(rep) == script.EXIT_OK
    # resumable: a second search over the same folder runs nothing again
    again = script.search(cheats, entries, out, seed=SEED, workers=2, image=image, progress=False)
    assert again["ran_this_invocation"] == 0 and again["cheats_run"] == 50
