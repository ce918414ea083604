"""`etai suite mine`'s parts that need no sandbox: a fix as edits, the cursor target, the instruction
rule, FAIL_TO_PASS over runs, and the git side on a real history (a bundle of
../shared/realrepos-history, read in place)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.agents.etai_format import Action
from harness.authoring.build.compose import Failure
from harness.authoring.mine import fix, history
from harness.authoring.mine.mine import _skip_reason, fail_to_pass
from harness.authoring.mine.options import MineOptions
from harness.base.errors import InputError
from harness.runs.loop import edit_cursor

HISTORY = Path(__file__).resolve().parents[3] / "shared" / "realrepos-history"


def _apply_all(text: str, edits: list[fix.Edit]) -> str:
    for e in edits:
        assert text.count(e.old) == 1, e  # each old is unique in the file as it is then
        text = fix.apply(text, e)
    return text


@pytest.mark.parametrize(
    "before, after",
    [
        ("a\nb\nc\n", "a\nB\nc\n"),  # one changed line
        ("x = 1\ny = 2\nx = 1\n", "x = 1\ny = 3\nx = 1\n"),
        ("x\nx\nx\n", "x\nx\ny\nx\n"),  # an insertion among repeated lines needs context
        ("f()\nf()\n", "f()\n"),  # a deletion of one of two equal lines
        ("one\n", "zero\none\ntwo\n"),  # insertions at both ends
        ("a\nb\nc\nd\ne\nf\n", "A\nb\nc\nd\ne\nF\n"),  # two hunks, applied in order
    ],
)
def test_edits_rebuild_the_commit_from_the_parent(before, after):
    edits = fix.edits("lib/x.js", before, after)
    assert edits and all(e.old for e in edits)  # file_edit refuses an empty old
    assert _apply_all(before, edits) == after


def test_changes_a_few_lines_apart_are_one_edit():
    lines = [f"line{i}" for i in range(20)]
    near = list(lines)
    near[3], near[6] = "X", "Y"
    far = list(lines)
    far[3], far[15] = "X", "Y"
    before = "\n".join(lines)
    assert len(fix.edits("a.js", before, "\n".join(near))) == 1
    assert len(fix.edits("a.js", before, "\n".join(far))) == 2
    assert fix.changed_lines(before, "\n".join(far)) == 4


class _File:
    """What edit_cursor reads of a sandbox: one file (the rule is pure; no container needed)."""

    def __init__(self, text: str):
        self.text = text

    def read_file(self, path: str) -> bytes:
        return self.text.encode()


@pytest.mark.parametrize(
    "before, after, line, column",
    [
        ("let a = 1;\nif (a < n) go();\n", "let a = 1;\nif (a <= n) go();\n", 2, 8),
        ("a();\nb();\n", "a();\nx();\nb();\n", 1, 5),  # an insertion: the line above's end
    ],
)
def test_the_cursor_target_is_where_the_scorer_places_the_first_edit(before, after, line, column):
    first = fix.edits("lib/x.js", before, after)[0]
    got = fix.cursor_target(first, before)
    assert got == {"file": "lib/x.js", "line": line, "column": column, "placement": "before"}
    action = Action("file_edit", {"file": first.file, "old": first.old, "new": first.new})
    scored = edit_cursor(_File(before), action)
    assert (scored.file, scored.line, scored.column) == (first.file, line, column)


def test_the_instruction_never_names_what_only_the_fix_introduces():
    workspace = "function parse(x) { return x }\ntest('parses dates', () => parse('1'))"
    introduced = fix.new_identifiers(
        "function parseStrict(x) { return normalizeInput(x) }", workspace
    )
    assert introduced == {"parseStrict", "normalizeInput"}
    f = Failure("test/parse.test.js", "parses dates", "expected 1", 3, 5)
    rng = random.Random(0)
    leaking = fix.instruction("Use normalizeInput in parse", f, ["lib/parse.js"], introduced, rng)
    assert not fix.leaks(leaking, introduced) and "normalizeInput" not in leaking
    assert "parses dates" in leaking and "lib/parse.js" in leaking
    sound = fix.instruction("Parse dates strictly", f, ["lib/parse.js"], introduced, rng)
    assert sound.startswith("Parse dates strictly") or "Parse dates strictly" in sound
    assert fix.leaks("call parseStrict()", introduced) == ["parseStrict"]


@pytest.mark.parametrize(
    "subject, body, want",
    [
        (
            "Fix missing 'field' property in custom validator. Fix #109",
            "",
            "Fix missing 'field' property in custom validator",
        ),
        ("fix(array): keep empty items (#1234)", "", "Keep empty items"),
        (
            "Set milliseconds to 0 before returning schedule (fixes #363)",
            "",
            "Set milliseconds to 0 before returning schedule",
        ),
        ("Accept leap days [closes #7] in ranges", "", "Accept leap days in ranges"),
        (
            "Merge pull request #104 from someone/master",
            "Add messages to array rule\n\nmore",
            "Add messages to array rule",
        ),
    ],
)
def test_the_summary_line_is_what_the_commit_says_it_does(subject, body, want):
    assert fix.summary_line(subject, body) == want


def test_intent_from_what_the_commit_and_the_failure_say():
    assert fix.intent("Fix regexp of email rule", "") == "fix_regex"
    assert fix.intent("Handle time zones in diff", "") == "fix_date_handling"
    assert fix.intent("Keep default values", "TypeError: Cannot read properties of undefined") == (
        "debug_runtime_error"
    )
    assert fix.intent("Allow multiple flags", "expected 2") == "fix_test_failure"


def _runs(*statuses: dict) -> list[dict]:
    return list(statuses)


def test_fail_to_pass_needs_every_run_on_both_sides():
    parent = _runs(
        {"t.js::a": "failed", "t.js::b": "passed"}, {"t.js::b": "passed"}
    )  # a: absent once
    commit = _runs(
        {"t.js::a": "passed", "t.js::b": "passed"}, {"t.js::a": "passed", "t.js::b": "passed"}
    )
    got = fail_to_pass(parent, commit)
    assert got["fail_to_pass"] == ["t.js::a"] and got["pass_to_pass"] == ["t.js::b"]
    assert got["verify_files"] == ["t.js"]
    flaky = fail_to_pass(parent, _runs({"t.js::a": "passed"}, {"t.js::a": "failed"}))
    assert flaky["verdict"] == "flaky"
    mixed_parent = _runs({"t.js::a": "passed"}, {"t.js::a": "failed"})
    only_a = _runs({"t.js::a": "passed"}, {"t.js::a": "passed"})
    assert fail_to_pass(mixed_parent, only_a)["verdict"] == "flaky"
    assert fail_to_pass(commit, commit)["verdict"] == "no_failing_test"


def test_a_file_with_a_test_failing_at_the_commit_cannot_verify():
    parent = _runs({"t.js::a": "failed", "t.js::c": "failed"})
    commit = _runs({"t.js::a": "passed", "t.js::c": "failed"})
    assert fail_to_pass(parent, commit)["verdict"] == "fails_at_commit"
    # ... unless the failing test lives in another file, which the verification does not run
    commit = _runs({"t.js::a": "passed", "u.js::c": "failed"})
    assert fail_to_pass(_runs({"t.js::a": "failed"}), commit)["verify_files"] == ["t.js"]


def test_test_paths_and_test_files():
    assert history.is_test_path("test/helpers/deep-extend.js")
    assert history.is_test_path("src/__tests__/x.js") and history.is_test_path("lib/a.spec.ts")
    assert not history.is_test_path("package.json") and not history.is_test_path("lib/rules/a.js")
    # Scripts Jest may run: which it does run is its config's say, asked in the sandbox.
    assert history.is_test_script("tests/command.action.test.js")
    assert history.is_test_script("test/string.ts") and history.is_test_script("lib/a.spec.ts")
    assert not history.is_test_script("test/__snapshots__/a.test.js.snap")
    assert not history.is_test_script("lib/rules/a.js") and not history.is_test_script(
        "jest.config.js"
    )


@pytest.fixture(scope="module")
def commander():
    bundle = HISTORY / "commander.js.bundle"
    if not bundle.is_file():
        pytest.fail(f"{bundle} is missing: the realrepos-history bundles are the test's input")
    return history.open_repo(bundle)


def test_candidates_of_a_real_history(commander):
    found = history.commits(commander, "395cf714~30..395cf714")
    assert len(found) == 30 and all(c.parent and len(c.sha) == 40 for c in found)
    assert found[-1].sha.startswith("395cf714")
    opts = MineOptions(src=("lib", "index.js"))
    reasons = {c.sha: _skip_reason(c, opts) for c in found}
    tried = [c for c in found if reasons[c.sha] is None]
    assert tried, "a real history of 30 commits has fixes with tests"
    for c in tried:
        assert c.sources(opts.src) and any(history.is_test_script(t.path) for t in c.tests())
    c = tried[0]
    text = history.read(commander, c.parent, c.sources(opts.src)[0].path).decode()
    assert text and "author" not in {c.author} and len(c.author) == 12


def test_a_range_that_is_not_there_is_input_error(commander, tmp_path):
    with pytest.raises(InputError):
        history.commits(commander, "no-such-rev..HEAD")
    with pytest.raises(InputError, match="no such folder"):
        history.open_repo(tmp_path / "missing.bundle")


def test_export_writes_plain_files_and_names_the_ones_a_snapshot_lacks(commander, tmp_path):
    rev = "395cf714"
    got = history.export_tree(commander, rev, tmp_path / "full")
    entries = history._git(commander, "ls-tree", "-r", "-z", rev).split("\0")
    names = [e.split("\t", 1)[1] for e in entries if e and e.split()[0] != "120000"]  # no links
    files = {p.relative_to(tmp_path / "full").as_posix() for p in (tmp_path / "full").rglob("*")
             if p.is_file()}  # fmt: skip
    assert got == [] and files == {n for n in names if "node_modules" not in n.split("/")}
    assert (tmp_path / "full" / "lib" / "command.js").read_bytes() == history.read(
        commander, rev, "lib/command.js"
    )
    # A copy of the history without one file's content, as a fetched snapshot lacks large files.
    import subprocess

    clone = tmp_path / "clone.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(commander), str(clone)],
                   check=True)  # fmt: skip
    blob = history._git(clone, "rev-parse", f"{rev}:Readme.md").strip()
    subprocess.run(["git", "-C", str(clone), "repack", "-adq"], check=True)
    pack = next((clone / "objects" / "pack").glob("*.pack"))
    objs = history._git(clone, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    keep = "".join(o + "\n" for o in objs.split() if o != blob)
    for p in (clone / "objects" / "pack").iterdir():
        p.unlink()
    subprocess.run(["git", "-C", str(commander), "pack-objects", "-q", str(clone / "objects" /
                    "pack" / "pack")], input=keep.encode(), check=True)  # fmt: skip
    assert not pack.exists()
    lacks = history.export_tree(clone, rev, tmp_path / "partial")
    assert lacks == ["Readme.md"] and not (tmp_path / "partial" / "Readme.md").exists()
    assert (tmp_path / "partial" / "lib" / "command.js").read_bytes() == (
        tmp_path / "full" / "lib" / "command.js"
    ).read_bytes()


def test_a_commit_whose_jest_config_cannot_be_written_is_left_out_with_why(tmp_path):
    """NODE_PATH, --entry and --map-module are written into a JSON config; a commit whose config is
    a jest.config.js, or whose package.json is not JSON, is left out with the reason, and the mine
    goes on (no sandbox is reached)."""
    import subprocess

    from harness.authoring.jest_config import JestAdditions
    from harness.authoring.mine.mine import examine
    from harness.sandbox import Limits

    repo = tmp_path / "p"
    (repo / "lib").mkdir(parents=True)
    (repo / "test").mkdir()
    (repo / "package.json").write_text('{"name": "p"}')
    (repo / "jest.config.js").write_text("module.exports = {};\n")
    (repo / "lib" / "a.js").write_text("module.exports = () => 1;\n")
    (repo / "test" / "a.test.js").write_text("test('a', () => {});\n")
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@example.org", "PATH": "/usr/bin:/bin"}  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "a"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    (repo / "lib" / "a.js").write_text("module.exports = () => 2;\n")
    (repo / "test" / "a.test.js").write_text("test('a is 2', () => {});\n")
    subprocess.run(["git", "commit", "-qam", "fix: a"], cwd=repo, env=env, check=True)
    (c,) = history.commits(repo, "HEAD~1..HEAD")
    opts = MineOptions(src=("lib",), sandbox="no-such-sandbox")
    row = examine(repo, "p", c, opts, Limits(), tmp_path / "out", JestAdditions(("<rootDir>",)))
    assert row["verdict"] == "config_not_json", row
    assert "jest.config.js: add" in row["why"] and "modulePaths" in row["why"]
    assert not (tmp_path / "out" / ".work").exists() or not any(
        (tmp_path / "out" / ".work").iterdir()
    )
    # A parent whose package.json is not JSON is left out with its own reason.
    (repo / "jest.config.js").unlink()
    (repo / "package.json").write_text("{not json")
    subprocess.run(["git", "commit", "-qam", "chore: break it"], cwd=repo, env=env, check=True)
    (repo / "lib" / "a.js").write_text("module.exports = () => 3;\n")
    (repo / "test" / "a.test.js").write_text("test('a is 3', () => {});\n")
    subprocess.run(["git", "commit", "-qam", "fix: a again"], cwd=repo, env=env, check=True)
    (c,) = history.commits(repo, "HEAD~1..HEAD")
    row = examine(repo, "p", c, opts, Limits(), tmp_path / "out", JestAdditions(("<rootDir>",)))
    assert row["verdict"] == "config_unreadable" and "cannot read it as JSON" in row["why"], row


def test_the_eta_is_the_median_candidate_time_by_the_candidates_left(monkeypatch):
    """Nine candidates of 5 s and one of 10 min: ten left take about 50 s at the median, where a
    mean (or tqdm's rate after the slow one) says more than 15 min."""
    import io

    from harness.authoring.mine.mine import eta
    from harness.base import progress

    times = [5.0] * 9 + [600.0]
    assert eta(times, 10) == "0:50"
    assert eta([3600.0, 3600.0], 2) == "2:00:00" and eta(times, 0) == "0:00" and eta([], 3) == "?"
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    bar = progress.bar(20, "commits", unit="commit", own_eta=True)
    bar.set_postfix_str(f"ETA {eta(times, 10)}", refresh=False)
    bar.update(10)
    bar.close()
    last = err.getvalue().splitlines()[-1]
    assert "10/20" in last and last.endswith(", ETA 0:50]") and "<" not in last, last
