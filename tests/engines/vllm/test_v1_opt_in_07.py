"""vLLM 0.7's opt-in V1 engine (VLLM_USE_V1=1 where V0 is the default), read from 0.7.1's
wheel: v1/worker/gpu_model_runner.py `profile_run` (the logits of every dummy token, no
sampler), v1/worker/gpu_worker.py `determine_available_memory` (non-torch memory counted
absolutely) and engine/arg_utils.py `_override_v1_engine_args` (the batch by device name)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.engines.vllm.config import default_max_num_batched_tokens, rules_for
from kvplan.planning.launch import from_command

runner = CliRunner()
MIB = 2**20

# vllm-project/vllm#12569: Llama 3.1 70B W8A8 on one 80 GB GPU with VLLM_USE_V1=1 (0.7.1)
LINE = ("vllm serve neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 --max-model-len "
        "2048 --gpu-memory-utilization 0.98")
# Llama 3.1 70B's config.json: hidden_size 8192, vocab_size 128256, intermediate 28672
HIDDEN, VOCAB = 8192, 128_256


def _budget(line: str, gpu: str = "h100", version: str = "0.7.1") -> dict:
    result = runner.invoke(app, ["plan", "llama-3.1-70b", "--from-command", line, "--gpu", gpu,
                                 "--engine-version", version, "--weights-dtype", "int8",
                                 "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["budget"]


def test_the_launch_environment_selects_v1():
    assert from_command("VLLM_USE_V1=1 " + LINE).overrides["vllm_v1"] is True
    assert from_command("VLLM_USE_V1=0 " + LINE).overrides["vllm_v1"] is False
    assert "vllm_v1" not in from_command(LINE).overrides
    # docker run -e, the same single declaration (VllmEngine.launch_overrides)
    docker = from_command("docker run --gpus all -e VLLM_USE_V1=1 vllm/vllm-openai:v0.7.1 "
                          "--model neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8")
    assert docker.overrides["vllm_v1"] is True
    docker = from_command("docker run --env VLLM_USE_V1=1 vllm/vllm-openai:v0.7.1 --model m")
    assert docker.overrides["vllm_v1"] is True


def test_v1_profile_of_0_7_1_on_an_h100():
    budget = _budget("VLLM_USE_V1=1 " + LINE)
    # `_override_v1_engine_args`: "h100" is in the device's name, so the OpenAI server's batch
    # is 8,192 tokens; V1's max_num_seqs default is 1,024 (arg_utils.py)
    assert budget["max_num_batched_tokens"] == 8192 and budget["max_num_seqs"] == 1024
    # profile_run: compute_logits over all 8,192 hidden states (bf16), which stay alive; the
    # forward's widest buffers (8,192 x (3 x 28,672 + 3 x 8,192) x 2 B = 1.69 GiB) are less
    logits = 8192 * VOCAB * 2
    hidden = 8192 * HIDDEN * 2
    # and GPUModelRunner.__init__'s inputs_embeds buffer (max_num_tokens x hidden_size x
    # bf16), allocated before the run: the absolute allocated_bytes.all.peak holds it
    embeds = 8192 * HIDDEN * 2
    assert budget["activation_bytes"] == [logits + hidden + embeds]  # 2,369,781,760
    # determine_available_memory: mem_get_info's used bytes less torch's allocated, after the
    # run: the CUDA context and the kernels (0.35 GiB on the RTX 3090 V0 log that prints it
    # absolutely; kvplan's split 296 + 64 MiB)
    assert budget["non_torch_bytes"] == (296 + 64) * MIB
    assert any("opt-in V1" in note for note in budget["notes"])


def test_without_the_variable_0_7_1_runs_v0():
    budget = _budget(LINE)
    # V0 (SchedulerConfig): max(max_model_len 2,048, 2,048) tokens, 256 sequences; 0.7's V0
    # counts only non-torch growth (the kernels)
    assert budget["max_num_batched_tokens"] == 2048 and budget["max_num_seqs"] == 256
    assert budget["non_torch_bytes"] == 64 * MIB


def test_the_batch_goes_by_device_name_in_0_7_v1():
    # an 80 GB A100 is not named h100/h200: 2,048 tokens (arg_utils.py "other hardware")
    budget = _budget("VLLM_USE_V1=1 " + LINE, gpu="a100-80gb")
    assert budget["max_num_batched_tokens"] == 2048
    assert budget["activation_bytes"] == [2048 * HIDDEN * 2 + max(  # + inputs_embeds
        2048 * VOCAB * 2 + 2048 * HIDDEN * 2, 2048 * (3 * 28672 + 3 * HIDDEN) * 2)]
    # a 192 GB MI300X is neither: 2,048 in 0.7's V1 (and 0.8.0-0.8.4's), where 0.8.5's rule
    # by memory gives 8,192
    gib = 2**30
    assert default_max_num_batched_tokens(192 * gib, "mi300x", version=(0, 7, 1),
                                          v1=True) == 2048
    assert default_max_num_batched_tokens(192 * gib, "mi300x", version=(0, 8, 5)) == 8192
    assert default_max_num_batched_tokens(80 * gib, "H200 NVL", version=(0, 7, 1),
                                          v1=True) == 8192


def test_tp_gathers_the_logits_in_0_7_v1():
    from kvplan.engines.shared.activations import Shapes
    from kvplan.engines.vllm.memory import all_token_logits_bytes, non_torch_bytes

    shapes = Shapes(HIDDEN, VOCAB, 28672)
    # each rank's vocab / 2 columns and the all-gathered full vocabulary
    assert all_token_logits_bytes(shapes, 8192, tp=2) == \
        8192 * VOCAB * 2 + 8192 * VOCAB + 8192 * HIDDEN * 2
    # absolute non-torch: context + kernels, the TP group's pynccl communicator and custom
    # all-reduce buffer, and torch's NCCL communicator made by the logits' all_gather
    assert non_torch_bytes((0, 7, 1), tp=2, v1=True) == (296 + 64 + 64 + 8 + 64) * MIB


def test_releases_without_the_opt_in_say_so():
    with pytest.raises(BadInputError, match="VLLM_USE_V1=1: kvplan models the opt-in V1"):
        rules_for((0, 6, 4), True)
    with pytest.raises(BadInputError, match="VLLM_USE_V1=0"):
        rules_for((0, 10, 1), False)
    # the release's own default is its row
    assert rules_for((0, 8, 0), True) is rules_for((0, 8, 0))
    assert rules_for((0, 7, 1), False) is rules_for((0, 7, 1))
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--engine-version",
                                 "0.7.1", "--from-command", "VLLM_USE_V1=yes vllm serve x"])
    assert result.exit_code == 2 and "VLLM_USE_V1='yes'" in result.output
