"""bf16 under FSDP keeps buffers fp32 (#34): what finetune.fsdp makes of every mixed-precision
setting a config may give, the refusal of a bf16 buffer dtype at the CLI, and the logits of a
tiny RoPE model at positions past 4k under Composer's FSDP against the fp32 model's (a real
2-process run, fsdp_precision_run.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from finetune.errors import ConfigError
from finetune.fsdp import fsdp_settings
from finetune.train import main

pytestmark = pytest.mark.train
PROJECT = Path(__file__).resolve().parents[2]
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"
# max |logits - fp32 logits| / std(fp32 logits) at positions 4128..4159. Measured: 0.032 with
# fp32 buffers (bf16 weights and activations alone), 0.56 with Composer's DEFAULT preset.
TOLERANCE = 0.1


@pytest.mark.parametrize(
    "given, param, reduce",
    [
        (None, "torch.bfloat16", "torch.float32"),  # no key: Composer would take DEFAULT
        ("DEFAULT", "torch.bfloat16", "torch.float32"),
        ("default", "torch.bfloat16", "torch.float32"),
        ("PURE", "torch.bfloat16", "torch.bfloat16"),
        ("FULL", None, None),
        ({"param_dtype": "bf16"}, "bf16", None),
        ({"param_dtype": "bf16", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}, "bf16", "fp32"),
    ],
)
def test_every_setting_keeps_buffers_fp32(given, param, reduce):
    fsdp = {"sharding_strategy": "FULL_SHARD"}
    if given is not None:
        fsdp["mixed_precision"] = given
    got = fsdp_settings(fsdp, "amp_bf16")
    mixed = {k: v for k, v in got.pop("mixed_precision").items() if v is not None}
    want = {"param_dtype": param, "reduce_dtype": reduce, "buffer_dtype": "fp32"}
    assert mixed == {k: v for k, v in want.items() if v is not None}
    assert got == {"sharding_strategy": "FULL_SHARD"}  # the rest passes through


def test_the_shipped_configs_keep_buffers_fp32():
    checked = 0
    for path in sorted((PROJECT / "finetune" / "configs").glob("*.yaml")):
        train = yaml.safe_load(path.read_text()).get("train", {})
        if train.get("fsdp"):
            got = fsdp_settings(train["fsdp"], train.get("precision", "fp32"))
            assert got["mixed_precision"]["buffer_dtype"] == "fp32", path.name
            checked += 1
    assert checked  # agent-8xa100.yaml at least: nothing checked is not a pass


@pytest.mark.parametrize(
    "given, key, words",
    [
        ({"buffer_dtype": "bf16"}, "buffer_dtype", "inv_freq"),
        ({"param_dtype": "bf16", "buffr_dtype": "fp32"}, "mixed_precision", "buffr_dtype"),
        ("HALF", "mixed_precision", "DEFAULT, PURE, FULL"),
        (16, "mixed_precision", "mapping"),
    ],
)
def test_a_setting_that_would_round_buffers_is_refused(given, key, words):
    with pytest.raises(ConfigError) as err:
        fsdp_settings({"mixed_precision": given}, "amp_bf16")
    assert err.value.key.endswith(key) and err.value.key.startswith("train.fsdp")
    assert words in err.value.message


def test_the_cli_refuses_a_bf16_buffer_dtype_before_any_data_work(tmp_path, capsys):
    bad = "train.fsdp={mixed_precision: {param_dtype: bf16, buffer_dtype: bf16}}"
    missing = tmp_path / "absent.jsonl"  # never read: the refusal comes first
    assert main([str(TINY_CONFIG), "--set", f"data.sessions={missing}", "--set", bad]) == 2
    err = capsys.readouterr().err
    assert "train.fsdp.mixed_precision.buffer_dtype" in err and "fp32" in err


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("ETAI_LONG"),
    reason="a two-process FSDP launch (about 25 s): ETAI_LONG=1 runs it (make test-long); the "
    "mixed-precision settings and the CLI's refusal above run in make test",
)
def test_rope_logits_past_4k_match_fp32_under_fsdp_bf16(tmp_path, free_port):
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "composer"),
        *("-n", "2", "--master_port", str(free_port())),
        *("--stdout", str(tmp_path / "out{rank}.txt"), "--stderr", str(tmp_path / "err{rank}.txt")),
        str(Path(__file__).with_name("fsdp_precision_run.py")),
        str(tmp_path / "report"),
    ]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    logs = "".join(f.read_text()[-3000:] for f in sorted(tmp_path.glob("err*.txt")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + logs
    for rank in (0, 1):
        rep = json.loads((tmp_path / "report" / f"rank{rank}.json").read_text())
        ours, composers = rep["finetune"], rep["composer"]
        assert ours["error"] <= TOLERANCE, ours
        assert ours["dtypes"] == {"inv_freq": "torch.float32", "q_proj": "torch.bfloat16"}
        # The check can fail: Composer's preset rounds inv_freq and misses by far more.
        assert composers["dtypes"]["inv_freq"] == "torch.bfloat16"
        assert composers["error"] > 3 * TOLERANCE
