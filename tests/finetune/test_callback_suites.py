"""HarnessEval over several suites (#34): a project split holds out whole projects, and each real
project is a suite of its own (its base, its node_modules), so the callback evaluates a list of
suites. Each runs into ``ba<N>/<suite name>/``, the metrics are over all of them, and the
held-out check and the split's eval sessions see every suite. Config errors name the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from finetune.callbacks import HarnessEval
from finetune.config import load_config
from finetune.errors import ConfigError
from finetune.split import check_held_out, split_of
from finetune.train import train
from finetune.trainers import SFTTrainer

from .test_ft_callbacks import _logged

pytestmark = pytest.mark.train
PROJECT = Path(__file__).resolve().parents[2]
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"
IMPLEMENT = "tests/harness/data/implement"  # relative to the project: found from any directory
BUGFIX_ONE = "retry-default-attempts"
SUITES = f"[jest-bugfix, {IMPLEMENT}]"


@pytest.mark.docker
@pytest.mark.slow
def test_two_suites_are_evaluated_each_in_its_folder_and_merged(tmp_path, tiny_overrides):
    spec = (
        f"{{interval: 1ba, suite: {SUITES}, sessions: [{BUGFIX_ONE}, slugify], k: 1, "
        "max_steps: 1, workers: 2, budget_s: 300, at_fit_end: false, "
        "generation: {max_new_tokens: 8}}"
    )
    overrides = tiny_overrides(
        tmp_path,
        data__format="memory",
        train__max_duration="1ba",
        train__save_interval="100ep",
        train__autoresume="false",
        callbacks__harness_eval=spec,
    )
    trainer = train(TINY_CONFIG, overrides)
    assert _logged(trainer, "harness/error") == [(1, 0.0)]
    assert _logged(trainer, "harness/infra_errors") == [(1, 0.0)]
    out = tmp_path / "ckpt" / "harness-eval" / "ba1"
    for folder, session in (("jest-bugfix", BUGFIX_ONE), ("implement", "slugify")):
        rows = [json.loads(x) for x in (out / folder / "results.jsonl").read_text().splitlines()]
        assert [r["session_id"] for r in rows] == [session]
        assert rows[0]["status"] not in ("infra_error", "skipped_budget")  # an episode ran
    merged = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["session_id"] for r in merged) == sorted([BUGFIX_ONE, "slugify"])
    summary = json.loads((out / "summary.json").read_text())
    [agent] = summary["agents"].values()
    assert agent["n_rows"] == 2 and agent["n_valid"] == 2


def _callback(tmp_path: Path, spec: str, *sets: str) -> HarnessEval:
    base = [
        f"data.sessions={PROJECT / 'suites/jest-bugfix/sessions.jsonl'}",
        f"train.save_folder={tmp_path / 'ckpt'}",
        f"callbacks.harness_eval={spec}",
    ]
    trainer = SFTTrainer(load_config(TINY_CONFIG, [*base, *sets]))
    [callback] = [c for c in trainer.callbacks() if isinstance(c, HarnessEval)]
    return callback


def test_a_project_split_evaluates_its_held_out_projects_across_suites(tmp_path):
    split = {
        "by": "project",
        "projects": {"bugfix": ["*-*"], "implement": ["slug*"]},
        "train": ["bugfix"],
        "eval": ["implement"],
    }
    path = tmp_path / "split.yaml"
    path.write_text(json.dumps(split))
    callback = _callback(tmp_path, f"{{interval: 1000ba, suite: {SUITES}}}", f"data.split={path}")
    assert callback.evaluated_ids() == ("slugify",)
    assert [s.name for s in callback.suites] == ["jest-bugfix", "implement"]
    split_ = split_of(load_config(TINY_CONFIG, [f"data.split={path}"]))
    check_held_out({"data.sessions": [BUGFIX_ONE]}, [callback], split_)
    with pytest.raises(ConfigError, match="project.*implement.*evaluated and trained on"):
        check_held_out({"data.rollouts": ["slugifyAnotherBug"]}, [callback], split_)


def test_the_whole_of_both_suites_is_evaluated_when_no_session_is_named(tmp_path):
    callback = _callback(tmp_path, f"{{interval: 1000ba, suite: {SUITES}, allow_overlap: true}}")
    assert len(callback.evaluated_ids()) == 15 and callback.evaluated_ids()[-1] == "slugify"
    with pytest.raises(ConfigError, match="callbacks.harness_eval.sessions.*trained on"):
        check_held_out(
            {"data.sessions": ["slugify"]}, [_callback(tmp_path, f"{{suite: {SUITES}}}")]
        )


@pytest.mark.parametrize(
    "spec, words",
    [
        ("{suite: [jest-bugfix, jest-bugfix]}", "suite name in two suites: jest-bugfix"),
        ("{suite: [jest-bugfix, COPY]}", "session id in two suites: billing-month-range-utc"),
        (f"{{suite: {SUITES}, mode: async}}", "mode: async evaluates one suite"),
        (f"{{suite: {SUITES}, sessions: [nope]}}", "not in suite jest-bugfix, implement: nope"),
        ("{suite: []}", "names no suite"),
    ],
)
def test_bad_suite_lists_name_the_key(tmp_path, spec, words):
    copy = tmp_path / "copy"
    shutil.copytree(PROJECT / "suites" / "jest-bugfix", copy)
    meta = copy / "suite.yaml"
    meta.write_text(meta.read_text().replace("name: jest-bugfix", "name: copy", 1))
    with pytest.raises(ConfigError, match=words) as caught:
        _callback(tmp_path, spec.replace("COPY", str(copy)))
    assert str(caught.value).startswith("callbacks.harness_eval.")
