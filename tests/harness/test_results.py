"""Crash-safe result storage: torn lines, duplicates, infra retries, atomic JSON."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from harness.base.errors import FolderBusy, InfraError, InputError
from harness.runs import results
from harness.runs.results import (
    LOCK,
    ResultStore,
    RunFolder,
    cache_key,
    read_rows,
    write_json_atomic,
)


def test_cache_key_is_stable_and_order_sensitive():
    assert cache_key("a", 1, {"x": 1, "y": 2}) == cache_key("a", 1, {"y": 2, "x": 1})
    assert cache_key("a", 1) != cache_key(1, "a")
    assert len(cache_key("a")) == 32


def test_append_resume_and_terminal_status(tmp_path):
    s = ResultStore(tmp_path)
    s.append({"cache_key": "k1", "status": "passed"})
    s.append({"cache_key": "k2", "status": "infra_error"})
    again = ResultStore(tmp_path)
    assert again.has("k1") and not again.has("k2")  # infra errors are retried
    again.append({"cache_key": "k2", "status": "failed"})
    rows = {r["cache_key"]: r["status"] for r in read_rows(tmp_path / "results.jsonl")}
    assert rows == {"k1": "passed", "k2": "failed"}
    assert [r["cache_key"] for r in again.rows(["k2"])] == ["k2"]


def test_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text(
        json.dumps({"cache_key": "k1", "status": "passed"}) + "\n" + '{"cache_key": "k2", "sta'
    )
    assert [r["cache_key"] for r in read_rows(p)] == ["k1"]
    s = ResultStore(tmp_path)
    assert not s.has("k2")
    s.append({"cache_key": "k2", "status": "passed"})
    lines = p.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line) for line in lines)


def test_duplicates_first_terminal_row_wins(tmp_path):
    p = tmp_path / "results.jsonl"
    rows = [
        {"cache_key": "k", "status": "passed", "n": 1},
        {"cache_key": "k", "status": "failed", "n": 2},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_rows(p) == [rows[0]]


def test_write_json_atomic_leaves_no_temp_file(tmp_path):
    write_json_atomic(tmp_path / "s.json", {"a": 1})
    write_json_atomic(tmp_path / "s.json", {"a": 2})
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 2}
    assert [f.name for f in tmp_path.iterdir()] == ["s.json"]


# --- what the mutation run (scripts/mutation, #12) showed untested ----------------------------

ENOSPC = OSError(errno.ENOSPC, "No space left on device")
UMASK = os.umask(0o022)  # read the process's umask (there is no getter) ...
os.umask(UMASK)  # ... and put it back


def test_cache_key_is_the_sha256_of_compact_sorted_json():
    # the blob written by hand: compact separators, sorted keys, non-JSON values as str()
    blob = b'["a",1,{"x":1,"y":[2,3]},"runs/x"]'
    got = cache_key("a", 1, {"y": [2, 3], "x": 1}, Path("runs/x"))
    assert got == hashlib.sha256(blob).hexdigest()[:32]


def test_write_json_atomic_writes_sorted_indented_json(tmp_path):
    write_json_atomic(tmp_path / "s.json", {"b": [1], "a": Path("p")})
    assert (tmp_path / "s.json").read_text() == '{\n  "a": "p",\n  "b": [\n    1\n  ]\n}\n'


def test_write_json_atomic_failures_are_typed_and_leave_nothing(tmp_path, monkeypatch):
    # a missing folder is the user's choice of place: InputError naming the file
    target = tmp_path / "no" / "s.json"
    with pytest.raises(InputError) as err:
        write_json_atomic(target, {})
    assert err.value.where == str(target)
    assert "cannot write: No such file or directory" in str(err.value)
    # a full disk is the machine's: InfraError, and the temp file is gone
    monkeypatch.setattr(results.os, "replace", lambda *a: (_ for _ in ()).throw(ENOSPC))
    full = f"^{tmp_path / 's.json'}: cannot write: No space left on device$"
    with pytest.raises(InfraError, match=full):
        write_json_atomic(tmp_path / "s.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_storage_error_full_or_failing_disk_is_infra(code):
    e = results.storage_error(OSError(code, "boom"), Path("/r/x"), "cannot write")
    assert type(e) is InfraError and str(e) == "/r/x: cannot write: boom"


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.ENOTDIR])
def test_storage_error_anything_else_is_the_users_place(code):
    e = results.storage_error(OSError(code, "nope"), Path("/r/x"), "cannot write")
    assert type(e) is InputError and e.where == "/r/x" and str(e) == "/r/x: cannot write: nope"


def test_read_rows_skips_bad_lines_and_keeps_the_first_of_two_infra_errors(tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text(
        '{"cache_key": "a", "status": "passed"}\n'
        "not json\n"
        "null\n"  # valid JSON but not a row (a hand-edited file): skipped, not a crash
        '{"status": "passed"}\n'  # a row without a key: skipped too (was a KeyError)
        '{"cache_key": "b", "status": "infra_error", "n": 1}\n'
        '{"cache_key": "b", "status": "infra_error", "n": 2}\n'
        '{"cache_key": "c", "status": "passed"}\n'
    )
    got = [(r["cache_key"], r.get("n")) for r in read_rows(p)]
    assert got == [("a", None), ("b", 1), ("c", None)]


def test_store_creates_nested_folders_and_lists_its_rows(tmp_path):
    s = ResultStore(tmp_path / "a" / "b")
    s.append({"cache_key": "k1", "status": "passed"})
    s.append({"cache_key": "k2", "status": "failed"})
    assert [r["cache_key"] for r in s.rows()] == ["k1", "k2"]


def test_append_writes_one_sorted_line_with_mode_0644(tmp_path):
    old = os.umask(0o022)
    try:
        s = ResultStore(tmp_path)
        s.append({"status": "passed", "cache_key": "k", "path": Path("p")})
    finally:
        os.umask(old)
    p = tmp_path / "results.jsonl"
    assert (
        p.read_text()
        == '{"cache_key": "k", "path": "p", "schema_version": 1, "status": "passed"}\n'
    )
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    with pytest.raises(ValueError, match="^a result row needs a cache_key$"):
        s.append({"status": "passed"})


def test_append_terminal_status_is_known_at_once(tmp_path):
    s = ResultStore(tmp_path)
    s.append({"cache_key": "k", "status": "infra_error"})
    assert not s.has("k")
    s.append({"cache_key": "k", "status": "failed"})
    assert s.has("k")
    assert [r["status"] for r in s.rows()] == ["failed"]  # the retry replaces the infra row


def short_then_full(monkeypatch):
    """os.write as on a disk filling up: the first call writes 5 bytes, the next fails ENOSPC."""
    real, calls = os.write, []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[:5]))
        raise ENOSPC

    monkeypatch.setattr(results.os, "write", write)
    return calls


def test_a_failed_first_append_leaves_no_file(tmp_path, monkeypatch):
    s = ResultStore(tmp_path)
    short_then_full(monkeypatch)
    full = "results.jsonl: cannot write a result row: No space left on device$"
    with pytest.raises(InfraError, match=full):
        s.append({"cache_key": "k", "status": "passed"})
    assert not (tmp_path / "results.jsonl").exists() and not s.has("k")


def test_a_failed_append_is_cut_back_to_the_rows_before(tmp_path, monkeypatch):
    s = ResultStore(tmp_path)
    s.append({"cache_key": "k1", "status": "passed"})
    before = (tmp_path / "results.jsonl").read_bytes()
    calls = short_then_full(monkeypatch)
    with pytest.raises(InfraError):
        s.append({"cache_key": "k2", "status": "passed"})
    assert calls[1] == calls[0] - 5  # the short write was continued, not restarted
    assert (tmp_path / "results.jsonl").read_bytes() == before


def test_append_line_keeps_what_the_file_held_when_a_write_fails(tmp_path, monkeypatch):
    # HumanEval's completions go through append_line with the default new=False: a full disk
    # must cut back only the line that failed, never remove completions already paid for.
    p = tmp_path / "samples.jsonl"
    results.append_line(p, b"one\n")
    short_then_full(monkeypatch)
    with pytest.raises(OSError):
        results.append_line(p, b"two, longer than one short write\n")
    assert p.read_bytes() == b"one\n"


@pytest.mark.parametrize(
    "torn",
    [
        "{",  # a one-byte file: nothing but the torn row
        '{}\n{"cache_key": "k2", "sta',  # a newline at byte 2 says nothing about the end of the file
        '{"cache_key": "a"}\n{"cache_key": "b"}\n{"cache_k',  # two whole rows before the torn one
    ],
)
def test_torn_tail_is_cut_whatever_comes_before(tmp_path, torn):
    p = tmp_path / "results.jsonl"
    p.write_text(torn)
    whole = torn[: torn.rfind("\n") + 1]
    ResultStore(tmp_path).append({"cache_key": "new"})
    assert p.read_text() == whole + '{"cache_key": "new", "schema_version": 1}\n'


# --- RunFolder: the run's hold on its folder ---------------------------------------------------


def test_run_folder_holds_the_folder_and_names_its_pid(tmp_path):
    with RunFolder(tmp_path / "run") as f:
        assert (tmp_path / "run" / LOCK).read_text() == f"{os.getpid()}\n"
        with pytest.raises(FolderBusy) as err:  # a second hold (its own open file) is refused
            RunFolder(tmp_path / "run").__enter__()
        assert err.value.holder == os.getpid() and err.value.where == str(tmp_path / "run")
        assert str(err.value) == (
            f"{tmp_path / 'run'}: the run folder is in use by another etai run "
            f"(pid {os.getpid()}); wait for it to end or choose another --out"
        )
        assert stat.S_IMODE((tmp_path / "run" / LOCK).stat().st_mode) == 0o644 & ~UMASK
        (f.path / "results.jsonl").write_text("")
    # released: the next run takes it (and the folder, not empty, stays)
    with RunFolder(tmp_path / "run"):
        pass
    assert sorted(x.name for x in (tmp_path / "run").iterdir()) == [LOCK, "results.jsonl"]


def test_run_folder_takes_over_a_dead_runs_lock(tmp_path):
    (tmp_path / LOCK).write_text("999999999\n")  # no lock held: its process is gone
    with RunFolder(tmp_path):
        assert (tmp_path / LOCK).read_text() == f"{os.getpid()}\n"


@pytest.mark.parametrize("holder", [b"garbage", b"\xff\xfe12\n"])  # not a pid; not even UTF-8
def test_run_folder_busy_with_an_unreadable_holder(tmp_path, holder):
    with RunFolder(tmp_path):
        (tmp_path / LOCK).write_bytes(holder)
        with pytest.raises(FolderBusy, match=r"\(pid unknown\)") as err:
            RunFolder(tmp_path).__enter__()
        assert err.value.holder is None


def test_run_folder_that_cannot_write_its_lock_goes_again(tmp_path, monkeypatch):
    monkeypatch.setattr(results.os, "ftruncate", lambda fd, n: (_ for _ in ()).throw(ENOSPC))
    full = r"run: cannot write the run folder: No space left on device$"
    with pytest.raises(InfraError, match=full):
        RunFolder(tmp_path / "a" / "run").__enter__()
    assert list(tmp_path.iterdir()) == []


def test_run_folder_removed_during_the_run_still_takes_its_parents(tmp_path):
    import shutil

    with RunFolder(tmp_path / "a" / "b" / "run"):
        shutil.rmtree(tmp_path / "a" / "b" / "run")  # someone cleaned up under the run
    assert list(tmp_path.iterdir()) == []


def test_run_folder_made_by_a_run_that_wrote_nothing_goes_again(tmp_path):
    with RunFolder(tmp_path / "a" / "b" / "run"):
        assert (tmp_path / "a" / "b" / "run" / LOCK).exists()
    assert list(tmp_path.iterdir()) == []  # the parents it made go too
    (tmp_path / "mine").mkdir()
    with RunFolder(tmp_path / "mine"):
        pass
    assert (tmp_path / "mine").is_dir()  # a folder the user made stays


def test_run_folder_that_is_a_file_or_under_a_file_is_input_error(tmp_path):
    (tmp_path / "f").write_text("x")
    message = "^.*/f: the run folder is a file; name a folder with --out$"
    with pytest.raises(InputError, match=message) as err:
        RunFolder(tmp_path / "f").__enter__()
    assert err.value.where == str(tmp_path / "f")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    run = tmp_path / "d" / "f" / "run"
    message = f"^{run}: cannot write the run folder: Not a directory$"
    with pytest.raises(InputError, match=message) as err:
        RunFolder(run).__enter__()  # mkdir under a file: ENOTDIR
    assert not isinstance(err.value, InfraError)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["d", "f"]
