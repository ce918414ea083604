"""Registries resolve built-ins and 'module:Class' plug-ins and reject unknown names; config errors name the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from finetune.config import Config, apply_overrides, load_config, validate
from finetune.errors import ConfigError
from finetune.losses import LOSSES
from finetune.registry import Registry
from finetune.rewards import REWARDS
from finetune.schedules import SCHEDULES, CompositeWeights, default_schedule
from finetune.trainers import TRAINERS
from harness.agents import AGENTS
from harness.cli import COMMANDS
from harness.runs.executors import EXECUTORS
from harness.sandbox import SANDBOXES
from harness.suites.kinds import METRICS, SUITE_KINDS
from harness.tools import TOOLS


def test_registry_resolves_builtin_plugin_and_rejects_unknown():
    reg: Registry[type] = Registry("widget", "widget.name", group="etai.widgets")
    reg.register("plain")(dict)
    assert reg.resolve("plain") is dict
    assert reg.resolve("collections:OrderedDict").__name__ == "OrderedDict"
    with pytest.raises(ConfigError) as err:
        reg.resolve("fancy")
    assert err.value.key == "widget.name"
    assert "unknown widget 'fancy'; known: plain; or 'module:Class'" in str(err.value)
    with pytest.raises(ConfigError, match="cannot import 'no_such_module_xyz'"):
        reg.resolve("no_such_module_xyz:Thing")
    with pytest.raises(ConfigError, match="has no 'Nope'"):
        reg.resolve("collections:Nope")
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("plain")(list)


@pytest.mark.parametrize(
    ("epoch", "weights"),
    [  # hand-computed from the issue's schedule
        (0, CompositeWeights(code=0.80, intent=0.25, cursor=0.15, reward=0.20)),
        (4, CompositeWeights(code=0.72, intent=0.25, cursor=0.10, reward=0.20)),
        (5, CompositeWeights(code=0.70, intent=0.15, cursor=0.10, reward=0.20)),
        (10, CompositeWeights(code=0.60, intent=0.15, cursor=0.10, reward=0.25)),
        (30, CompositeWeights(code=0.40, intent=0.15, cursor=0.10, reward=0.25)),  # code floor
    ],
)
def test_default_schedule(epoch, weights):
    got = default_schedule(epoch)
    for field in ("code", "intent", "cursor", "reward"):
        assert getattr(got, field) == pytest.approx(getattr(weights, field))


def test_schedule_registry_resolves_plugin_and_rejects_unknown():
    assert SCHEDULES.resolve("default") is default_schedule
    assert SCHEDULES.resolve("finetune.schedules:constant_schedule")(9) == default_schedule(0)
    with pytest.raises(ConfigError, match="known: constant, default"):
        SCHEDULES.resolve("cosine")


def test_config_get_types_and_names_the_key():
    cfg = Config({"train": {"max_duration": 3, "batch_size": 4}, "optimizer": {"lr": "1e-4"}})
    assert cfg.get("train.batch_size", int) == 4
    assert cfg.get("optimizer.lr", float) == pytest.approx(1e-4)  # YAML reads 1e-4 as a string
    assert cfg.get("train.precision", str, "fp32") == "fp32"
    with pytest.raises(ConfigError) as err:
        cfg.get("train.max_duration", str)
    assert err.value.key == "train.max_duration" and "expected str, got int 3" in str(err.value)
    with pytest.raises(ConfigError, match="^data.sessions: required key is missing$"):
        cfg.get("data.sessions", str)
    with pytest.raises(ConfigError, match="expected int, got bool"):
        Config({"seed": True}).get("seed", int)


def test_validate_rejects_unknown_sections_and_keys():
    with pytest.raises(ConfigError, match="^trainr: unknown section"):
        validate({"trainr": {}})
    with pytest.raises(ConfigError, match="^train.max_duraton: unknown key; known: .*max_duration"):
        validate({"train": {"max_duraton": "1ep"}})
    validate({"loss": {"name": "composite", "anything": 1}})  # free-form: constructor kwargs


def test_overrides_parse_yaml_values_and_nest():
    raw = apply_overrides(
        {"train": {"batch_size": 4}}, ["train.batch_size=2", "loss.beta=0.5", "a.b.c=[1, 2]"]
    )
    assert raw == {"train": {"batch_size": 2}, "loss": {"beta": 0.5}, "a": {"b": {"c": [1, 2]}}}
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides({}, ["no-equals-sign"])


def test_path_of_tries_cwd_then_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = Config({"data": {"sessions": "finetune/configs/tiny-cpu.yaml", "missing": "nope.jsonl"}})
    assert cfg.path_of("data.sessions").is_file()  # found under the project root
    with pytest.raises(ConfigError, match="^data.missing: file not found: nope.jsonl"):
        cfg.path_of("data.missing")


def test_paths_of_takes_one_path_or_a_list_and_names_the_bad_item(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_text("")
    assert Config({"data": {"sessions": "a.jsonl"}}).paths_of("data.sessions") == [
        tmp_path / "a.jsonl"
    ]
    two = Config({"data": {"sessions": ["a.jsonl", "pyproject.toml"]}}).paths_of("data.sessions")
    assert two[0] == tmp_path / "a.jsonl" and two[1].name == "pyproject.toml"  # the project's
    with pytest.raises(ConfigError, match=r"data.sessions\[1\]: file not found: nope.jsonl"):
        Config({"data": {"sessions": ["a.jsonl", "nope.jsonl"]}}).paths_of("data.sessions")
    with pytest.raises(ConfigError, match="data.sessions: expected a path or a non-empty list"):
        Config({"data": {"sessions": []}}).paths_of("data.sessions")


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_bad_config_exits_2_naming_the_key(tmp_path, capsys):
    from finetune.train import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("trainer: {type: sft}\ntrain: {max_duraton: 1ep}\n")
    assert main([str(cfg)]) == 2
    assert "config error: train.max_duraton: unknown key" in capsys.readouterr().err


def test_import_finetune_is_cheap():
    import subprocess
    import sys

    code = (
        "import sys, finetune, finetune.config, finetune.registry, finetune.schedules, finetune.errors, "
        "finetune.train; print(sorted({'torch', 'composer', 'transformers', 'streaming'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_bundled_configs_validate_and_say_what_the_issue_asks():
    from pathlib import Path

    configs = Path(__file__).resolve().parents[2] / "finetune" / "configs"
    big = load_config(configs / "agent-8xa100.yaml")
    assert big.get("train.fsdp.sharding_strategy", str) == "FULL_SHARD"
    assert big.get("train.precision", str) == "amp_bf16" and big.get("train.batch_size", int) == 8
    assert big.get("data.max_seq_len", int) == 8192
    assert big.get("algorithms.seq_length_warmup.max_seq_len", int) == 8192
    assert big.get("optimizer.name", str) == "decoupled_adamw" and big.get("train.autoresume", bool)
    tiny = load_config(configs / "tiny-cpu.yaml")
    assert tiny.get("train.device", str) == "cpu" and "tiny" in tiny.section("model")


def test_every_registry_listens_on_the_group_the_readme_names():
    """A plug-in author registers under the group the README names; a registry on another group
    (one made by adding "s" to its kind was etai.losss) never sees the plug-in."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index("through entry points in the") :][:400]
    documented = set(re.findall(r"`(etai\.\w+)`", section))
    regs = [LOSSES, REWARDS, TRAINERS, SCHEDULES, AGENTS, COMMANDS, EXECUTORS, SANDBOXES]
    regs += [METRICS, SUITE_KINDS, TOOLS]
    assert {r.group for r in regs} == documented
    assert LOSSES.group == "etai.losses"
