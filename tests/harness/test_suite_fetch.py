"""The etai-js manifest and `etai suite fetch`, on a tiny project made here under real git: mined by
`etai suite mine` in the sandbox, turned into manifest rows, materialised from a `file://` URL (a
bare repository as the remote) and offline from a --mirror folder holding a bundle, each giving
the mined suite back byte for byte; one session replayed by the oracle, green. Then what must stop
with exit 2 and leave no suite behind (a damaged mirror, a missing commit, a hash mismatch), a fetch
killed half way that resumes, and a released version that refuses to change."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.authoring.etai_js import convert, manifest
from harness.base.errors import InputError
from harness.cli import main
from harness.runs.runner import run
from harness.suites.load import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]
GIT_ENV = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@example.org", "PATH": "/usr/bin:/bin"}  # fmt: skip
SOURCE = "exports.half = (x) => x / 3;\nexports.twice = (x) => x * 3;\n"


def _git(cwd: Path, *args: str) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)
    return r.stdout.decode()


def _tiny_project(root: Path) -> Path:
    """lib/calc.js with two bugs and two fixes, each commit bringing the tests that catch it (the
    first fix turns two tests green, so one can be held out)."""
    repo = root / "tiny"
    (repo / "lib").mkdir(parents=True)
    (repo / "test").mkdir()
    (repo / "package.json").write_text(json.dumps({"name": "tiny", "version": "1.0.0"}))
    lock = {"name": "tiny", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "tiny", "version": "1.0.0"}}}  # fmt: skip
    (repo / "package-lock.json").write_text(json.dumps(lock))
    _git(repo, "init", "-q", "-b", "main")
    test = (
        "const c = require('../lib/calc');\n\ntest('loads', () => expect(c.half).toBeTruthy());\n"
    )
    commits = [
        ("calc", SOURCE, test),
        ("fix: half halves", SOURCE.replace("x / 3", "x / 2"),
         test + "test('halves six', () => expect(c.half(6)).toBe(3));\n"
         "test('halves ten', () => expect(c.half(10)).toBe(5));\n"),
        ("fix: twice doubles", SOURCE.replace("x / 3", "x / 2").replace("x * 3", "x * 2"),
         test + "test('halves six', () => expect(c.half(6)).toBe(3));\n"
         "test('halves ten', () => expect(c.half(10)).toBe(5));\n"
         "test('twice two', () => expect(c.twice(2)).toBe(4));\n"),
    ]  # fmt: skip
    for message, source, tests in commits:
        (repo / "lib" / "calc.js").write_text(source)
        (repo / "test" / "calc.test.js").write_text(tests)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", message)
    return repo


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, image):
    """The project, its "remote" (a bare repository), a mirror folder with its bundle, the suite
    `etai suite mine` made of it and the manifest converted from that suite."""
    root = tmp_path_factory.mktemp("fetch")
    repo = _tiny_project(root)
    remote = root / "remote" / "tiny.git"
    _git(root, "clone", "-q", "--bare", str(repo), str(remote))
    (root / "mirror").mkdir()
    _git(repo, "bundle", "create", "-q", str(root / "mirror" / "tiny.bundle"), "--all")
    mined = root / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(mined), "--range", "HEAD~2..HEAD"]
    assert main([*argv, "--src", "lib", "--runs", "1", "--no-progress"]) == 0
    ids = convert.add(root / "manifest" / "1", mined, repo, url=remote.as_uri(), license="MIT")
    assert len(ids) == 2, ids
    return {"root": root, "repo": repo, "mined": mined, "manifest": root / "manifest" / "1",
            "url": remote.as_uri(), "mirror": root / "mirror", "ids": ids}  # fmt: skip


def _fetch(*args: str) -> int:
    return main(["suite", "fetch", *[str(a) for a in args], "--no-progress"])


def _no_suite(out: Path, *, staged: bool | None = False) -> None:
    """Nothing a run could take for a suite: no suite.yaml or sessions.jsonl anywhere under
    ``out``; and no stage either unless a verified session is there to resume from."""
    left = [p for p in out.rglob("*") if p.name in ("suite.yaml", "sessions.jsonl")]
    assert left == [] and not (out / "tiny").exists(), left
    assert staged is None or (out / ".partial").exists() == staged


def _copy_manifest(tiny, dest: Path, change=None) -> Path:
    shutil.copytree(tiny["manifest"], dest)
    if change:
        rows = [json.loads(x) for x in (dest / "rows.jsonl").read_text().splitlines()]
        change(rows)
        (dest / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dest


def test_rows_hold_what_a_benchmark_row_holds_and_no_source_tree(tiny):
    m = manifest.load(tiny["manifest"])
    assert m.label == "etai-js@1" and set(m.projects) == {"tiny"}
    assert m.projects["tiny"].url == tiny["url"] and m.projects["tiny"].license == "MIT"
    assert (m.projects["tiny"].lockfile / "package-lock.json").is_file()
    by_subject = {r["subject"]: r for r in m.rows}
    first, second = by_subject["fix: half halves"], by_subject["fix: twice doubles"]
    head = _git(tiny["repo"], "rev-parse", "HEAD").strip()
    assert (
        second["fix_commit"] == head
        and second["base_commit"] == _git(tiny["repo"], "rev-parse", "HEAD~1").strip()
    )
    assert first["fail_to_pass"] == [
        "test/calc.test.js::halves six",
        "test/calc.test.js::halves ten",
    ]
    assert len(first["held_out"]) == 1 and first["held_out_files"] == ["test/calc.test.js"]
    assert first["reference"] == [{"file": "lib/calc.js", "old": "exports.half = (x) => x / 3;",
                                   "new": "exports.half = (x) => x / 2;"}]  # fmt: skip
    assert "+test('twice two'" in second["test_patch"] and "lib/calc.js" not in second["test_patch"]
    # The files the reference reads are rebuilt from the repository, never stored.
    text = (tiny["manifest"] / "rows.jsonl").read_text()
    assert json.dumps(SOURCE)[1:-1] not in text


@pytest.mark.parametrize("how", ["url", "mirror"])
def test_fetch_gives_back_the_mined_suite(tiny, tmp_path, how):
    source = ["--mirror", tiny["mirror"]] if how == "mirror" else []
    assert _fetch(tiny["manifest"], "--out", tmp_path / "out", *source) == 0
    suite = load_suite(tmp_path / "out" / "tiny")
    mined = load_suite(tiny["mined"])
    assert [s.session_id for s in suite.sessions] == tiny["ids"]
    hashes = {s.session_id: s.content_hash for s in mined.sessions}
    assert {s.session_id: s.content_hash for s in suite.sessions} == hashes
    assert suite.sandbox.node_modules == (tmp_path / "out" / "tiny" / "deps").resolve()
    assert not (tmp_path / "out" / ".partial").exists()
    # Fetched again: the finished suite is recognised and kept.
    assert _fetch(tiny["manifest"], "--out", tmp_path / "out", *source) == 0


def test_the_oracle_replays_a_fetched_session_green(tiny, tmp_path):
    assert _fetch(tiny["manifest"], "--out", tmp_path / "out", "--mirror", tiny["mirror"]) == 0
    summary = run(str(tmp_path / "out" / "tiny"), ["oracle"], out=tmp_path / "run",
                  session_ids=tiny["ids"][:1], progress=False)  # fmt: skip
    oracle = summary["agents"]["oracle"]
    assert summary["n_sessions"] == 1, summary
    assert oracle["reference_broken"] == [] and oracle["n_infra_error"] == 0
    assert oracle["path_accuracy"][summary["k"]] == 1.0


def _fails(capsys, *argv) -> str:
    assert _fetch(*argv) == 2
    return capsys.readouterr().err


def test_a_damaged_mirror_stops_with_exit_2(tiny, tmp_path, capsys):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    data = (tiny["mirror"] / "tiny.bundle").read_bytes()
    (mirror / "tiny.bundle").write_bytes(data[: len(data) // 2])  # a bundle cut short
    err = _fails(capsys, tiny["manifest"], "--out", tmp_path / "out", "--mirror", mirror)
    assert "tiny.bundle" in err and "not a git bundle" in err, err
    _no_suite(tmp_path / "out")
    # A bare repository whose blob of lib/calc.js is gone.
    (mirror / "tiny.bundle").unlink()
    bare = mirror / "tiny.git"
    _git(tmp_path, "clone", "-q", "--bare", str(tiny["repo"]), str(bare))
    blob = _git(tiny["repo"], "rev-parse", "HEAD~2:lib/calc.js").strip()
    (bare / "objects" / blob[:2] / blob[2:]).unlink()
    err = _fails(capsys, tiny["manifest"], "--out", tmp_path / "out", "--mirror", mirror)
    half = next(
        r for r in manifest.load(tiny["manifest"]).rows if r["subject"] == "fix: half halves"
    )
    assert half["session_id"] in err and "lacks the content" in err and "lib/calc.js" in err, err
    _no_suite(tmp_path / "out", staged=None)  # the other session may come first, and be verified


def test_a_missing_commit_stops_with_exit_2(tiny, tmp_path, capsys):
    def gone(rows):
        rows[1]["base_commit"] = "0" * 40

    m = _copy_manifest(tiny, tmp_path / "m", gone)
    err = _fails(capsys, m, "--out", tmp_path / "out")  # from the URL, which has no such commit
    assert tiny["ids"][1] in err and "0" * 40 in err and "not in the repository" in err, err
    _no_suite(tmp_path / "out", staged=True)


def test_a_hash_mismatch_names_the_session_and_stops(tiny, tmp_path, capsys):
    def wrong(rows):
        rows[1]["workspace_sha256"] = "f" * 64

    m = _copy_manifest(tiny, tmp_path / "m", wrong)
    err = _fails(capsys, m, "--out", tmp_path / "out", "--mirror", tiny["mirror"])
    assert f"session {tiny['ids'][1]}" in err and "f" * 64 in err, err
    _no_suite(tmp_path / "out", staged=True)  # the first session, verified
    stage = tmp_path / "out" / ".partial" / "tiny"
    assert [p.name for p in (stage / "workspaces").iterdir()] == [tiny["ids"][0]]
    assert not (stage / ".build" / tiny["ids"][1]).exists()  # the mismatched one is not kept


def test_a_killed_fetch_resumes_and_skips_what_it_built(tiny, tmp_path):
    """Killed (SIGKILL) once its first session is verified: no suite is left, and the rerun builds
    only what is missing (the first workspace is the very folder the killed run made)."""
    out = tmp_path / "out"
    first = out / ".partial" / "tiny" / "workspaces" / tiny["ids"][0]
    # A fresh cache: the dependencies are installed again, so the kill lands before the end.
    env = {**os.environ, "ETAI_CACHE": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "harness.cli", "suite", "fetch", str(tiny["manifest"]),
            "--out", str(out), "--mirror", str(tiny["mirror"]), "--no-progress"]  # fmt: skip
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not first.is_dir() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert p.poll() is None, "the fetch ended before it could be killed"
    p.send_signal(signal.SIGKILL)
    p.wait()
    _no_suite(out, staged=True)
    inode = first.stat().st_ino
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "already there" in r.stdout and "(0 built" not in r.stdout, r.stdout
    suite = load_suite(out / "tiny")
    assert [s.session_id for s in suite.sessions] == tiny["ids"]
    assert (out / "tiny" / "workspaces" / tiny["ids"][0]).stat().st_ino == inode


def test_a_released_version_never_changes(tiny, tmp_path):
    home = tmp_path / "etai-js"
    m = _copy_manifest(tiny, home / "1")
    (home / "versions.json").write_text(json.dumps({"1": {"status": "draft"}}))
    digest = manifest.release(m)
    assert json.loads((home / "versions.json").read_text()) == {"1": {"sha256": digest}}
    assert manifest.load(home).version == 1  # the newest version of a home folder
    with pytest.raises(InputError, match="already released"):
        manifest.release(m)
    with pytest.raises(InputError, match="never changes"):
        convert.add(m, tiny["mined"], tiny["repo"], url=tiny["url"], license="MIT")
    (m / "rows.jsonl").write_text((m / "rows.jsonl").read_text().replace("halves", "Halves"))
    with pytest.raises(InputError, match="released version's files changed"):
        manifest.load(home)


def test_the_bundled_manifest_loads():
    m = manifest.load("etai-js")
    assert m.label.startswith("etai-js@") and m.rows
    for row in m.rows:
        assert row["project"] in m.projects and len(row["workspace_sha256"]) == 64


def test_a_bad_row_is_named_before_anything_is_fetched(tiny, tmp_path, capsys):
    def damage(rows):
        del rows[0]["test_patch"]
        rows[1]["project"] = "elsewhere"

    m = _copy_manifest(tiny, tmp_path / "m", damage)
    err = _fails(capsys, m, "--out", tmp_path / "out")
    assert "2 problem(s)" in err and "missing or mistyped: test_patch" in err, err
    assert "project elsewhere is not in manifest.json" in err, err
    assert not (tmp_path / "out").exists()


def _two_projects(tiny, dest: Path) -> Path:
    """tiny's manifest with a second project, twin: the same history under other session ids, with
    a lockfile of its own (another package name, so another dependency folder)."""
    m = _copy_manifest(tiny, dest)
    meta = json.loads((m / "manifest.json").read_text())
    meta["projects"]["twin"] = meta["projects"]["tiny"]
    (m / "manifest.json").write_text(json.dumps(meta))
    shutil.copytree(m / "projects" / "tiny", m / "projects" / "twin")
    for f in ("package.json", "package-lock.json"):
        p = m / "projects" / "twin" / f
        p.write_text(p.read_text().replace('"tiny"', '"twin"'))
    rows = [json.loads(x) for x in (m / "rows.jsonl").read_text().splitlines()]
    for r in list(rows):
        sid = "twin-" + r["session_id"]
        gold = {**r["gold"], "session_id": sid,
                "provenance": {**r["gold"]["provenance"], "repo": "twin"}}  # fmt: skip
        if "held_out_tests" in gold:
            gold["held_out_tests"] = f"held_out/{sid}"
        rows.append({**r, "session_id": sid, "project": "twin", "gold": gold})
    (m / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return m


def test_fetch_writes_one_suite_set_of_its_projects(tiny, tmp_path, capsys):
    """Each project a suite of its own (its own dependency folder), suite-set.json naming them
    all; what `etai run` refuses on it before anything runs."""
    from harness.session.suite_set import SET_FILE, load_set

    m, out = _two_projects(tiny, tmp_path / "m"), tmp_path / "out"
    assert _fetch(m, "--out", out, "--mirror", tiny["mirror"], "--only", "twin") == 0
    assert load_set(out).members == ("twin",)
    assert _fetch(m, "--out", out, "--mirror", tiny["mirror"]) == 0
    assert f"etai run --suite {out}" in capsys.readouterr().out
    st = load_set(out)
    assert (st.name, st.members) == ("etai-js@1", ("tiny", "twin"))
    for name in st.members:
        suite = load_suite(out / name)
        deps = suite.sandbox.node_modules
        assert deps == (out / name / "deps").resolve()
        assert json.loads((deps / "package.json").read_text())["name"] == name
        assert {s.project for s in suite.sessions} == {name}
    # Another manifest (here the lite subset) into the same folder: refused, nothing changed.
    before = (out / SET_FILE).read_text()
    err = _fails(capsys, m, "--lite", "--out", out, "--mirror", tiny["mirror"])
    assert "holds the suites of etai-js@1, not etai-js@1-lite" in err, err
    assert (out / SET_FILE).read_text() == before and not (out / ".partial").exists()

    def refused(*argv: str) -> str:
        assert main(["run", "--suite", str(out), "--agent", "noop", "--out",
                     str(tmp_path / "run"), "--no-progress", *argv]) == 2  # fmt: skip
        assert not (tmp_path / "run").exists()
        return capsys.readouterr().err

    assert "unknown session id(s) in etai-js@1: nope" in refused("--session", "nope")
    assert "inside the suite set" in refused("--out", str(out / "runs"))
    meta = yaml.safe_load((out / "twin" / "suite.yaml").read_text())
    k = load_suite(out / "tiny").defaults.get("k", 3)
    meta["defaults"] = {**meta.get("defaults", {}), "k": k + 1, "max_steps": k + 1}
    (out / "twin" / "suite.yaml").write_text(yaml.safe_dump(meta))
    err = refused()
    assert f"different k (tiny: {k}, twin: {k + 1}): give -k" in err, err
    (out / SET_FILE).write_text(before.replace('"twin"', '"twin", "ghost"'))
    err = refused("-k", str(k))
    assert "member ghost" in err and "is not a suite folder" in err, err


def test_a_fetched_set_runs_and_gates_as_one_benchmark(tiny, tmp_path, capsys):
    """`etai run --suite OUT` runs every project's suite into RUN/<project>/, every row naming its
    project; `etai gate RUN` gives one verdict with the error clustered over both projects."""
    from harness.session.suite_set import load_set

    m, out, run_ = _two_projects(tiny, tmp_path / "m"), tmp_path / "out", tmp_path / "run"
    assert _fetch(m, "--out", out, "--mirror", tiny["mirror"]) == 0
    one = [tiny["ids"][0], "twin-" + tiny["ids"][0]]  # a session of each project
    argv = ["run", "--suite", str(out), "--agent", "oracle", "--agent", "noop", "--out", str(run_),
            "--session", one[0], "--session", one[1], "--no-progress", "--json"]  # fmt: skip
    assert main(argv) == 0
    assert load_set(run_).members == ("tiny", "twin")
    for name, sid in zip(("tiny", "twin"), one):
        rows = [json.loads(x) for x in (run_ / name / "results.jsonl").read_text().splitlines()]
        assert {(r["session_id"], r["project"], r["suite"]) for r in rows} == {
            (sid, name, f"etai-js@1-{name}")
        }
        assert sorted(r["agent"] for r in rows) == ["noop", "oracle"]
    capsys.readouterr()
    g = tmp_path / "g.json"
    gate = ["gate", str(run_), "--rule", "pass@1>=0.9", "--json", str(g)]
    assert main([*gate, "--agent", "oracle"]) == 0, capsys.readouterr().out
    [rule] = json.loads(g.read_text())["rules"]
    assert rule["value"] == 1.0 and rule["projects"] == 2
    sessions = json.loads(g.read_text())["sessions"]
    assert {(s["session_id"], s["project"]) for s in sessions} == {
        (f"tiny/{one[0]}", "tiny"),
        (f"twin/{one[1]}", "twin"),
    }
    assert main([*gate, "--agent", "noop"]) == 1


def test_pass_to_pass_is_a_list_after_version_1(tiny, tmp_path):
    """The mine lists PASS_TO_PASS's test ids, and a later version's rows carry them; a count (what
    the mine recorded before it listed them) is accepted in version 1 rows only: a later version
    refuses it, naming the session, before anything is written."""
    listed = [json.loads(x)["pass_to_pass"] for x in (tiny["mined"] / "sessions.jsonl").open()]
    assert all(isinstance(p, list) and p and all("::" in t for t in p) for p in listed), listed
    convert.add(tmp_path / "v" / "2", tiny["mined"], tiny["repo"], url=tiny["url"],
                license="MIT", version=2)  # fmt: skip
    m = manifest.load(tmp_path / "v" / "2")
    assert m.version == 2 and sorted(map(sorted, (r["pass_to_pass"] for r in m.rows))) == sorted(
        map(sorted, listed)
    )
    # A suite an older mine wrote, with counts: refused at version 2, converted at version 1.
    counted = tmp_path / "counted"
    shutil.copytree(tiny["mined"], counted)
    sessions = [json.loads(x) for x in (counted / "sessions.jsonl").read_text().splitlines()]
    for s in sessions:
        s["pass_to_pass"] = len(s["pass_to_pass"])
    (counted / "sessions.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sessions))
    with pytest.raises(InputError, match="only version 1 rows may give their count"):
        convert.add(tmp_path / "c" / "2", counted, tiny["repo"], url=tiny["url"],
                    license="MIT", version=2)  # fmt: skip
    assert not (tmp_path / "c").exists()
    convert.add(tmp_path / "c" / "1", counted, tiny["repo"], url=tiny["url"], license="MIT",
                version=1)  # fmt: skip
    rows1 = manifest.load(tmp_path / "c" / "1").rows
    assert sorted(r["pass_to_pass"] for r in rows1) == sorted(map(len, listed))
    # A count written into a version 2 row by hand, and an id that is not a string: named.
    rows = (tmp_path / "v" / "2" / "rows.jsonl").read_text().splitlines()
    bad = [json.loads(x) for x in rows]
    bad[0]["pass_to_pass"], bad[1]["pass_to_pass"] = 1, [1]
    (tmp_path / "v" / "2" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.raises(InputError) as e:
        manifest.load(tmp_path / "v" / "2")
    assert "pass_to_pass: a count (1); rows of version 2 list" in str(e.value)
    assert "pass_to_pass: 1 item(s) not a test id" in str(e.value)
