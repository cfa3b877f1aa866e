"""vLLM's LoRA slots (--enable-lora, --max-loras, --max-lora-rank): the zeroed adapter buffers
every LoRA-wrapped module allocates inside the model load (lora/layers/*.py
create_lora_weights, vLLM 0.22.1), counted with the weights, and the flags read the same from
plan, a launch line and a log's echoed args."""

from __future__ import annotations

import pytest
from paths import FIXTURES  # noqa: E402

from kvplan.core.errors import BadInputError
from kvplan.engines.vllm import memory as vp
from kvplan.engines.vllm.budget import vllm_budget
from kvplan.planning.explain import explain
from kvplan.sources.library import resolve

GIB = 2**30
T4 = 15_843_721_216  # kvplan/data/gpus.yaml

# Qwen3-8B (config.json: hidden 4096, 32 heads and 8 KV heads of 128, intermediate 12288,
# vocab 151936, untied) over two GPUs, one slot of rank 16 in fp16, by hand:
R = 16
QKV = 3 * R * 4096 + (32 * 128 // 2 + 2 * (8 // 2) * 128) * R  # A per slice, B split by TP
O_PROJ = R * (32 * 128 // 2) + 4096 * R  # row-parallel: A split, B whole
MLP = 2 * R * 4096 + 2 * (12288 // 2) * R + R * (12288 // 2) + 4096 * R
EMBED = 151936 * R + 4096 * R
LM_HEAD = R * 4096 + 151936 * R


def test_qwen3_8b_tp2_slots_by_hand():
    slots = vp.lora_slots(resolve("qwen3-8b"), tp=2)
    assert slots == vp.LoraSlots((QKV + O_PROJ + MLP) * 2, EMBED * 2, LM_HEAD * 2)
    assert slots.layer_bytes == 1_671_168
    total = 36 * slots.layer_bytes + slots.embedding_bytes + slots.lm_head_bytes
    assert total == 70_148_096  # 0.065 GiB a GPU


def test_slots_scale_with_max_loras_and_rank():
    spec = resolve("qwen3-8b")
    one = vp.lora_slots(spec, tp=2)
    four = vp.lora_slots(spec, tp=2, max_loras=4, max_lora_rank=64)
    assert four.layer_bytes == 16 * one.layer_bytes
    assert four.lm_head_bytes == 16 * one.lm_head_bytes


def test_slots_join_the_weights_on_their_stages():
    spec = resolve("qwen3-8b")
    common = dict(version=(0, 22, 1), gpu_memory_utilization=0.85, max_model_len=4096,
                  enforce_eager=True, gpu_name="T4", max_num_seqs=1, weights="fp16")
    base = vllm_budget(spec, T4, tp=2, **common)
    lora = vllm_budget(spec, T4, tp=2, max_loras=1, **common)
    assert lora.weights_bytes[0] - base.weights_bytes[0] == 70_148_096
    assert base.available - lora.available == 70_148_096
    assert any("LoRA: 1 adapter slot of rank 16" in n for n in lora.notes)
    staged = vllm_budget(spec, T4, tp=2, pp=2, max_loras=1, **common)
    based = vllm_budget(spec, T4, tp=2, pp=2, **common)
    slots = vp.lora_slots(spec, tp=2)
    assert staged.weights_bytes[0] - based.weights_bytes[0] == \
        18 * slots.layer_bytes + slots.embedding_bytes
    assert staged.weights_bytes[1] - based.weights_bytes[1] == \
        18 * slots.layer_bytes + slots.lm_head_bytes


def test_the_t4_lora_log_weights_within_their_printed_digit():
    # vllm-exact-qwen3-8b-2xt4-tp2-0.22.1: "Model loading took 7.7 GiB" with enable_lora
    text = (FIXTURES / "logs" / "vllm" / "vllm-exact-qwen3-8b-2xt4-tp2-0.22.1.log").read_text(
        encoding="utf-8")
    result = explain(text, model="qwen3-8b", gpu="t4")
    assert result.settings.get("enable_lora") in (True, "True")
    weights = next(r for r in result.rows if r.quantity == "weights")
    assert abs(weights.kvplan / GIB - 7.7) < 0.05  # one printed decimal


def test_a_spec_without_shapes_is_refused_by_name():
    spec = resolve(str(FIXTURES / "engines" / "models" / "qwen3-1.7b.yaml"))
    if spec.hidden_size and spec.vocab_size:
        pytest.skip("the fixture states its shapes")
    with pytest.raises(BadInputError, match="--enable-lora"):
        vllm_budget(spec, T4, version=(0, 22, 1), max_loras=1)


def _weights(*args: str, line: str = "") -> int:
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    given = ["--from-command", f"vllm serve Qwen/Qwen3-8B -tp 2 --max-model-len 4096 {line}"]
    res = CliRunner().invoke(app, ["plan", "qwen3-8b", "--engine", "vllm", "--engine-version",
                                   "0.22.1", "--gpu", "t4", *given, *args, "-f", "json"])
    assert res.exit_code in (0, 1), res.output
    return int(json.loads(res.stdout)["budget"]["weights_bytes"][0])


def test_flags_and_launch_line_give_the_same_slots():
    spec = resolve("qwen3-8b")
    slots = vp.lora_slots(spec, tp=2, max_loras=2, max_lora_rank=32)
    per_gpu = 36 * slots.layer_bytes + slots.embedding_bytes + slots.lm_head_bytes
    base = _weights()
    flags = _weights("--enable-lora", "--max-loras", "2", "--max-lora-rank", "32")
    line = _weights(line="--enable-lora --max-loras 2 --max-lora-rank 32")
    assert flags - base == line - base == per_gpu
    # --max-loras without --enable-lora: vLLM builds no LoRA config, nothing is allocated
    assert _weights("--max-loras", "2") == base
