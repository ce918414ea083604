"""The held-out check sees every data source (#34): rollouts for the reward head and DPO pairs
made from rollouts are refused when they are of an evaluated session, naming the source; and a
split by project holds out whole projects (a rollout of another bug of an evaluated project is
refused too). Through the CLI (exit 2) or the trainer's steps; nothing trains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from finetune.config import load_config
from finetune.errors import ConfigError
from finetune.split import check_held_out, load_split, split_of
from finetune.train import main
from finetune.trainers import SFTTrainer

from .test_ft_rollouts import BAD_EDIT, EDIT, READ, _row

pytestmark = pytest.mark.train
PROJECT = Path(__file__).resolve().parents[2]
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"
SPLIT = PROJECT / "finetune" / "splits" / "jest-bugfix.yaml"
SUITE_SESSIONS = PROJECT / "suites" / "jest-bugfix" / "sessions.jsonl"
HELD_OUT = "price-formatter-lost-this"  # in SPLIT's eval list
# The bundled suite grouped as if it were three code bases; "shop" is never trained on.
PROJECTS = {
    "by": "project",
    "projects": {
        "shop": ["checkout-*", "price-*", "billing-*", "restock-*"],
        "text": ["text-*", "semver-*", "duration-*"],
        "web": [
            *("profile-*", "paginate-*", "weather-*", "request-*"),
            *("retry-*", "contact-*", "leaderboard-*"),
        ],
    },
    "train": ["web", "text"],
    "eval": ["shop"],
}
# Evaluation never starts here (no interval is reached, none at fit end): no Docker needed.
EVAL = "callbacks.harness_eval={interval: 1000ba, at_fit_end: false}"


def _run(tmp_path: Path, rows: list[dict]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _args(tmp_path: Path, *sets: str) -> list[str]:
    base = [
        f"data.sessions={SUITE_SESSIONS}",
        "data.format=memory",
        "train.max_duration=1ba",  # what the code before #34 went on to do: train, exit 0
        f"train.save_folder={tmp_path / 'ckpt'}",
        f"train.log_file={tmp_path / 'log.txt'}",
    ]
    return [str(TINY_CONFIG), *(x for o in [*base, *sets] for x in ("--set", o))]


def test_reward_rollouts_of_an_evaluated_session_are_refused(tmp_path, capsys):
    run = _run(tmp_path, [_row(HELD_OUT, 0, [EDIT], "passed", green_at=1)])
    sets = [f"data.split={SPLIT}", EVAL, f"data.reward_rollouts={run}"]
    assert main(_args(tmp_path, *sets)) == 2
    err = capsys.readouterr().err
    assert "through data.reward_rollouts" in err and HELD_OUT in err
    assert not (tmp_path / "ckpt").exists()  # refused before anything was written


def test_dpo_pairs_from_rollouts_of_an_evaluated_session_are_refused(tmp_path, capsys):
    rows = [
        _row(HELD_OUT, 0, [READ, EDIT], "passed", green_at=2),
        _row(HELD_OUT, 1, [READ, BAD_EDIT], "failed"),
    ]
    sets = [
        f"data.split={SPLIT}",
        EVAL,
        "trainer.type=dpo",
        "loss.name=dpo",
        "data.pairs=rollouts",
        "algorithms.loss_weight_schedule=false",  # the composite loss's, not DPO's
        "algorithms.tool_failure_mask=false",
        f"data.rollouts={_run(tmp_path, rows)}",
    ]
    assert main(_args(tmp_path, *sets)) == 2
    err = capsys.readouterr().err
    assert "through data.rollouts (data.pairs: rollouts)" in err and HELD_OUT in err


def _project_trainer(tmp_path: Path, split: dict, *sets: str) -> SFTTrainer:
    path = tmp_path / "projects.yaml"
    path.write_text(json.dumps(split))  # JSON is YAML
    cfg = load_config(TINY_CONFIG, _args(tmp_path, f"data.split={path}", EVAL, *sets)[2::2])
    return SFTTrainer(cfg)


def test_a_project_split_trains_on_some_projects_and_evaluates_the_others(tmp_path):
    trainer = _project_trainer(tmp_path, PROJECTS)
    sessions, [callback] = trainer.sessions(), trainer.callbacks()
    trained = {s["session_id"] for s in sessions}
    evaluated = set(callback.session_ids)
    shop = {"checkout-missing-await", HELD_OUT, "billing-month-range-utc"}
    shop.add("restock-zero-reorder-point")
    assert evaluated == shop and len(trained) == 14 - 4 and not trained & evaluated
    check_held_out(trainer.trained_ids(sessions), [callback], split_of(trainer.cfg))


def test_another_bug_of_an_evaluated_project_is_refused(tmp_path, capsys):
    """Not an evaluated session, but of the project evaluated: held out by project, not by id."""
    run = _run(tmp_path, [_row("checkout-rounding-error", 0, [EDIT], "passed", green_at=1)])
    path = tmp_path / "projects.yaml"
    path.write_text(json.dumps(PROJECTS))
    sets = [f"data.split={path}", EVAL, f"data.reward_rollouts={run}"]
    assert main(_args(tmp_path, *sets)) == 2
    err = capsys.readouterr().err
    assert "data.split" in err and "shop" in err and "checkout-rounding-error" in err


def test_a_session_of_no_project_is_named(tmp_path):
    split = json.loads(json.dumps(PROJECTS))
    split["projects"]["text"].remove("semver-*")
    with pytest.raises(ConfigError, match="'semver-unescaped-dot' matches no project"):
        _project_trainer(tmp_path, split).sessions()


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s["eval"].append("text"), "in both train and eval: text"),
        (lambda s: s["train"].remove("text"), "every project in train or eval.*text"),
        (lambda s: s["projects"].update(web=[]), "projects.web must be a non-empty list"),
        (lambda s: s.pop("projects"), "needs exactly by, projects, train and eval"),
    ],
)
def test_a_malformed_project_split_names_what_is_wrong(tmp_path, change, words):
    split = json.loads(json.dumps(PROJECTS))
    change(split)
    path = tmp_path / "projects.yaml"
    path.write_text(json.dumps(split))
    with pytest.raises(ConfigError, match=f"data.split: .*{words}"):
        load_split(path)
