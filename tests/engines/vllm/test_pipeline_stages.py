"""Unequal pipeline stages (vLLM): VLLM_PP_LAYER_PARTITION as the layer count of each stage
(vllm/distributed/utils.py get_pp_indices) and a GPU per stage (`--gpu a,b`), each worker
sizing its own budget and the engine keeping the fewest blocks over the workers
(v1/core/kv_cache_utils.get_kv_cache_configs). vllm-project/vllm#34076 is the case: 16 of
Qwen3-30B-A3B's 48 layers on an RTX 5070 Ti, 32 on an RTX 5090."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from kvplan.api import deploy
from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.core.sizing import pp_stages
from kvplan.engines.vllm.budget import vllm_budget
from kvplan.sources.library import resolve

runner = CliRunner()
GIB = 2**30


def test_a_partition_is_the_layer_count_of_each_stage():
    assert pp_stages(48, 2) == [(0, 24), (24, 48)]
    assert pp_stages(48, 2, (16, 32)) == [(0, 16), (16, 48)]
    assert pp_stages(61, 3, (20, 20, 21)) == [(0, 20), (20, 40), (40, 61)]
    with pytest.raises(BadInputError, match="does not split 48 layers over 2 stages"):
        pp_stages(48, 2, (16, 16))
    with pytest.raises(BadInputError, match="over 2 stages"):
        pp_stages(48, 2, (16, 16, 16))
    with pytest.raises(BadInputError):
        pp_stages(48, 2, (0, 48))  # get_pp_indices gives every stage at least one layer


def test_each_stage_requests_its_own_gpu():
    # gpu_worker.determine_available_memory on each worker: its GPU x utilization less its
    # own weights, activation peak and non-torch memory (0.15: v1/worker/utils.py
    # request_memory rounds GPU x utilization up, math.ceil, from 0.14.0)
    spec = resolve("qwen3-30b-a3b")
    small, large = 16_300 * 2**20, 32_604 * 2**20
    budget = vllm_budget(spec, small, version=(0, 15, 2), pp=2, pp_layers=(16, 32),
                         stage_gpu_memory_bytes=(small, large), gpu_memory_utilization=0.9,
                         stage_weights_bytes=(10 * GIB, 19 * GIB), activation_bytes=GIB // 8,
                         non_torch_bytes=64 * 2**20, cudagraph_bytes=0)
    # 16,300 MiB x 0.9 = 15,382,609,920 bytes exactly; 32,604 MiB x 0.9 =
    # 30,768,994,713.6 -> 30,768,994,714
    assert (math.ceil(small * 0.9), math.ceil(large * 0.9)) == (15_382_609_920, 30_768_994_714)
    assert budget.available_kv_cache_bytes == (
        15_382_609_920 - (10 * GIB + GIB // 8 + 64 * 2**20),
        30_768_994_714 - (19 * GIB + GIB // 8 + 64 * 2**20))
    with pytest.raises(BadInputError, match="3 GPUs given for 2 pipeline stages"):
        vllm_budget(spec, small, pp=2, stage_gpu_memory_bytes=(small, large, large),
                    stage_weights_bytes=(GIB, GIB))


def test_the_partition_moves_layers_between_stages():
    # a stage holds its layers' weights: 16 + 32 gives the first stage 8 fewer layers and the
    # last 8 more than 24 + 24, the embedding staying on the first and the head on the last
    from kvplan.core.weights import placement

    spec = resolve("qwen3-8b")  # 36 identical layers
    even = placement(spec, pp=2)
    moved = placement(spec, pp=2, partition=(10, 26))
    per_layer = even.inventory.bytes_where("layer", range(0, 1))
    assert even.inventory.bytes_where("layer", range(0, 36)) == 36 * per_layer
    assert moved.stage_bytes[0] == even.stage_bytes[0] - 8 * per_layer
    assert moved.stage_bytes[1] == even.stage_bytes[1] + 8 * per_layer
    assert placement(spec, pp=2, partition=(18, 18)).stage_bytes == even.stage_bytes


def test_the_stage_with_the_fewest_blocks_limits_every_worker():
    # bytes per block of a stage: 16 tokens x its layers x (K + V) 4 KV heads x 128 x 2 B
    d = deploy("qwen3-30b-a3b", gpu="rtx 5070 ti,rtx 5090", engine_version="0.15.2",
               gpu_memory_utilization=0.9, weights_dtype="fp8", pp_layers=(16, 32))
    assert d.deployment.pp == 2
    assert d.deployment.stage_gpu_memory_bytes == (16_300 * 2**20, 32_604 * 2**20)
    profile = d.capacity.engine_profile
    first, last = profile.stage_available_bytes
    blocks = (first // (16 * 16 * 2 * 4 * 128 * 2), last // (16 * 32 * 2 * 4 * 128 * 2))
    assert profile.stage_num_blocks == blocks
    assert profile.num_blocks == min(blocks)
    limiting = blocks.index(min(blocks))
    assert profile.available_kv_cache_bytes == profile.stage_available_bytes[limiting]


def test_a_gpu_per_stage_from_the_command_line():
    line = ("VLLM_PP_LAYER_PARTITION=16,32 vllm serve ./Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8 "
            "--gpu-memory-utilization 0.9 --pipeline-parallel-size 2")
    base = ["plan", "qwen3-30b-a3b", "--from-command", line, "--engine-version", "0.15.2",
            "--format", "json"]
    two = runner.invoke(app, [*base, "--gpu", "rtx 5070 ti,rtx 5090"])
    one = runner.invoke(app, [*base, "--gpu", "rtx 5090"])
    assert two.exit_code in (0, 1) and one.exit_code in (0, 1), two.output + one.output
    # the first stage's worker on the 16 GB card has less left than on a 32 GB one; the
    # last stage's worker is on the same RTX 5090 either way
    two_stages = json.loads(two.stdout)["engine"]["stage_available_kv_cache_bytes"]
    one_kind = json.loads(one.stdout)["engine"]["stage_available_kv_cache_bytes"]
    assert two_stages[0] < one_kind[0] and two_stages[1] == one_kind[1]
    # one GPU per stage: a list that does not match the stages, or another engine, is refused
    result = runner.invoke(app, ["plan", "qwen3-8b", "--gpu", "rtx 5070 ti,rtx 5090",
                                 "--pp", "3"])
    assert result.exit_code == 2 and "names 2 GPUs, one per pipeline stage" in result.output
    result = runner.invoke(app, ["plan", "qwen3-8b", "--gpu", "rtx 5070 ti,rtx 5090",
                                 "--engine", "sglang"])
    assert result.exit_code == 2 and "does not model for sglang (only for vLLM)" in result.output


def test_a_release_before_0_17_checks_each_worker_against_the_whole_model():
    # vllm-project/vllm#34076 (0.15.2): 16 + 32 of Qwen3-30B-A3B's 48 layers, the refusal
    # "24.0 GiB KV cache is needed ... available KV cache memory (3.18 GiB) ... the estimated
    # maximum model length is 34736". 0.15's get_kv_cache_configs checks every worker against
    # the merged spec of all 48 layers: 262,144 tokens x 48 x 2 x 4 heads x 128 x 2 B = 24 GiB,
    # and estimate_max_model_len finds the longest request of all 48 layers in 3.18 GiB:
    # 16 tokens a block, 48 x 2 x 4 x 128 x 2 B a token: int(3.18 GiB) // 1,572,864 = 2,170
    # blocks, 34,720 tokens (the log's 34,736 is one block more: 3.18 is rounded)
    from kvplan.engines.vllm.config import VllmConfig
    from kvplan.engines.vllm.startup import profile

    spec = resolve("qwen3-30b-a3b")
    budget = int(3.18 * GIB)
    assert 262_144 * 48 * 2 * 4 * 128 * 2 == 24 * GIB
    old = profile(spec, VllmConfig(max_model_len=262_144, version=(0, 15, 2), pp=2,
                                   pp_layers=(16, 32)), budget)
    assert not old.fits_max_model_len
    assert old.estimated_max_model_len == budget // (16 * 48 * 2 * 4 * 128 * 2) * 16 == 34_720
    # 0.32 projects the groups onto each worker's layers: the 32-layer stage limits, with
    # one block kept aside for the null block (0.29 on)
    new = profile(spec, VllmConfig(max_model_len=262_144, version=(0, 32, 0), pp=2,
                                   pp_layers=(16, 32)), budget)
    assert new.estimated_max_model_len == (budget // (16 * 32 * 2 * 4 * 128 * 2) - 1) * 16
    # the projection is in the 0.17.0 wheel's get_kv_cache_configs
    # (_project_kv_cache_groups_to_worker), not in 0.16.0's; no null block aside before 0.29
    for version, whole in (((0, 16, 0), True), ((0, 17, 0), False)):
        p = profile(spec, VllmConfig(max_model_len=262_144, version=version, pp=2,
                                     pp_layers=(16, 32)), budget)
        assert p.estimated_max_model_len == (
            34_720 if whole else budget // (16 * 32 * 2 * 4 * 128 * 2) * 16)


def test_explain_reads_the_partition_the_log_echoes():
    from kvplan.planning.explain import explain

    text = ("VLLM_PP_LAYER_PARTITION=16,32 vllm serve Qwen/Qwen3-30B-A3B "
            "--pipeline-parallel-size 2\n"
            "ValueError: To serve at least one request with the models's max seq len (262144), "
            "(24.0 GiB KV cache is needed, which is larger than the available KV cache memory "
            "(3.18 GiB). Based on the available memory, the estimated maximum model length is "
            "34736. Try increasing `gpu_memory_utilization`\n")
    result = explain(text, model="qwen3-30b-a3b", engine_version="0.15.2")
    assert result.settings["pp_layer_partition"] == "16,32"
    assert result.ok
    with pytest.raises(BadInputError, match="VLLM_PP_LAYER_PARTITION '16,16,16' names 3"):
        explain(text.replace("16,32", "16,16,16"), model="qwen3-30b-a3b",
                engine_version="0.15.2")


def test_qwen3_moe_builds_its_embedding_and_head_on_every_stage():
    # qwen3_moe.py (the 0.15.1, 0.19.0 and 0.24.0 wheels): Qwen3MoeModel.__init__ makes
    # embed_tokens and norm, Qwen3MoeForCausalLM.__init__ makes lm_head, with no
    # is_first_rank / is_last_rank guard, so the first stage's worker also allocates the
    # final norm and the 151,936 x 2,048 bf16 LM head (untied), and the last stage the input
    # embedding of the same size. By hand, as torch's caching allocator counts them: the head's
    # 622,329,856 B (593.5 MiB) take a fresh segment rounded up to a 2 MiB multiple, 594 MiB,
    # whose 0.5 MiB rest is too small to split off (kLargeBuffer blocks split only above
    # 1 MiB); the norm's 2,048 x 2 B is one 4 KiB block of the small pool.
    from kvplan.engines.shared.loading import loaded_weights

    spec = resolve("qwen3-30b-a3b")
    assert spec.is_moe and spec.traits.vllm_pp_every_stage_ends
    head = 151_936 * 2_048 * 2
    assert head == 622_329_856
    counted_head = 594 * 2**20
    norm = 2_048 * 2
    guarded = loaded_weights(spec, "fp8", pp=2, partition=(16, 32))
    every = loaded_weights(spec, "fp8", pp=2, partition=(16, 32), every_stage_ends=True)
    assert every[0] - guarded[0] == counted_head + norm
    assert every[1] - guarded[1] == counted_head  # the embedding, the same matrix size


def test_the_budget_counts_the_extra_head_only_for_unguarded_classes():
    # llama.py, qwen3.py (dense): embed_tokens on the first rank and lm_head on the last
    # (PPMissingLayer elsewhere) in the same wheels; mixtral.py and gpt_oss.py build both on
    # every rank like qwen3_moe.py. One stage: nothing to add.
    from kvplan.engines.shared.loading import loaded_weights

    assert not resolve("qwen3-8b").traits.vllm_pp_every_stage_ends
    assert not resolve("llama-3.1-8b").traits.vllm_pp_every_stage_ends
    assert resolve("mixtral-8x7b").traits.vllm_pp_every_stage_ends
    assert resolve("gpt-oss-20b").traits.vllm_pp_every_stage_ends
    # the trait, not the name: a spec without a family that carries it
    from dataclasses import replace

    from kvplan.core.spec import EngineTraits

    nameless = replace(resolve("qwen3-30b-a3b"), family=None,
                       traits=EngineTraits(vllm_pp_every_stage_ends=True))
    spec = resolve("qwen3-30b-a3b")
    small, large = 16_300 * 2**20, 32_604 * 2**20
    budget = vllm_budget(nameless, small, version=(0, 15, 2), pp=2, pp_layers=(16, 32),
                         stage_gpu_memory_bytes=(small, large), gpu_memory_utilization=0.9,
                         weights="fp8")
    guarded = vllm_budget(spec, small, version=(0, 15, 2), pp=2, pp_layers=(16, 32),
                          stage_gpu_memory_bytes=(small, large), gpu_memory_utilization=0.9,
                          weights="fp8", stage_weights_bytes=loaded_weights(spec, "fp8", pp=2,
                                                             partition=(16, 32)))
    # each stage holds the other's end too: the head (and norm) first, the embedding last
    assert budget.weights_bytes[0] - guarded.weights_bytes[0] == 594 * 2**20 + 4096
    assert budget.weights_bytes[1] - guarded.weights_bytes[1] == 594 * 2**20
    assert budget.available_kv_cache_bytes[0] == guarded.available_kv_cache_bytes[0] - (
        594 * 2**20 + 4096)
    assert any("every pipeline stage" in note for note in budget.notes)
