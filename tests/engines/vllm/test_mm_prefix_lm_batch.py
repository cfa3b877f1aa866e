"""vLLM's floor under a default max_num_batched_tokens for a multimodal prefix LM (Gemma 4).

vLLM 0.22 on (engine/arg_utils.py `_set_default_max_num_seqs_and_batched_tokens_args`,
vllm#43051; read in the wheels of 0.22.0-0.25.1, 0.28.0 and 0.33.0, not in 0.21.0's): when
--max-num-batched-tokens is not given and the model is multimodal and a prefix LM
(config/model.py `is_mm_prefix_lm`; for Gemma 4 transformers_utils/
model_arch_config_convertor.py `Gemma4ModelArchConfigConvertor`: text_config
use_bidirectional_attention == "vision"), the default is raised to `_get_min_mm_batched_tokens`,
the largest item of `Gemma4ProcessingInfo.get_mm_max_tokens_per_item` (gemma4_mm.py): a video of
_VIDEO_MAX_FRAMES = 32 frames x (_VIDEO_MAX_SOFT_TOKENS = 70 + 2 + 6) = 2,496 tokens, above an
image's 280.

That batch is the T of every sliding layer's need (v1/kv_cache_interface.py
SlidingWindowSpec.max_admission_blocks_per_request: cdiv(min(W - 1 + T, L), block) + 1), so it
moves the token line of a real vLLM 0.25.1 start-up (Gemma-4-26B-A4B on an L40S,
max_model_len 32,768: "Available KV cache memory: 12.75 GiB", "GPU KV cache size: 321,600
tokens", "Maximum concurrency for 32,768 tokens per request: 9.81x"; the log corpus holds it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvplan.engines.base import Deployment
from kvplan.engines.vllm.config import VllmConfig
from kvplan.engines.vllm.engine import config_for
from kvplan.engines.vllm.memory import batch_settings, mm_item_tokens_floor
from kvplan.engines.vllm.startup import profile
from kvplan.sources.hfconfig import load_config_file, spec_from_config

CONFIG = Path(__file__).parents[2] / "fixtures" / "hf-configs" / "google--gemma-4-26B-A4B.json"
GIB = 2**30
L40S = 44 * GIB + 315 * 2**20  # under 70 GiB: the 2,048-token server default
H100 = 80 * GIB  # the 8,192-token default

VIDEO_ITEM = 32 * (70 + 2 + 6)  # gemma4_mm.py: 32 frames of 70 soft tokens + boi/eoi + 6


def _spec():
    return load_config_file(CONFIG)


def test_the_floor_is_gemma4s_video_item_from_022():
    spec = _spec()
    assert VIDEO_ITEM == 2496
    assert mm_item_tokens_floor(spec, (0, 25, 1)) == VIDEO_ITEM
    assert mm_item_tokens_floor(spec, (0, 22, 0)) == VIDEO_ITEM
    assert mm_item_tokens_floor(spec, (0, 21, 0)) == 0  # 0.21.0's arg_utils.py has no floor


def test_only_a_multimodal_prefix_lm_gets_it():
    import json

    raw = json.loads(CONFIG.read_text())
    # the text model alone (no vision_config): not multimodal
    text_only = dict(raw, vision_config=None)
    spec = spec_from_config(text_only, str(CONFIG), "gemma4-text-only")
    assert mm_item_tokens_floor(spec, (0, 25, 1)) == 0
    # use_bidirectional_attention null (as Gemma 4's smaller checkpoints have it): not a prefix LM
    causal = dict(raw, text_config=dict(raw["text_config"], use_bidirectional_attention=None))
    spec = spec_from_config(causal, str(CONFIG), "gemma4-causal")
    assert spec.vision_prefix_lm is None
    assert mm_item_tokens_floor(spec, (0, 25, 1)) == 0


def test_the_default_batch_is_raised_a_given_one_kept():
    spec = _spec()
    small = batch_settings((0, 25, 1), L40S, "L40S", 32768, spec=spec)
    assert small.max_num_batched_tokens == 2496  # 2,048 raised
    assert small.max_num_seqs == 256
    given = batch_settings((0, 25, 1), L40S, "L40S", 32768, max_num_batched_tokens=2048,
                           spec=spec)
    assert given.max_num_batched_tokens == 2048  # the flag wins (only the default is raised)
    big = batch_settings((0, 25, 1), H100, "H100", 32768, spec=spec)
    assert big.max_num_batched_tokens == 8192  # already above the item


def test_a_deployment_carries_it_into_the_cache_config():
    dep = Deployment(spec=_spec(), engine="vllm", engine_version="0.25.1", gpu_name="L40S",
                     gpu_memory_bytes=L40S, max_model_len=32768)
    assert config_for(dep).max_num_batched_tokens == 2496
    assert config_for(replace(dep, engine_version="0.21.0")).max_num_batched_tokens == 2048


def test_the_0251_l40s_log_by_hand():
    """Gemma-4-26B-A4B, bf16 KV, block 16 (TRITON_ATTN's smallest kernel block, which
    attention.py Attention.get_kv_cache_spec gives a sliding layer): 25 sliding layers of
    8 KV heads x (256 + 256) x 2 B = 8,192 B a token, a 131,072-byte page; 5 full layers of
    2 heads x (512 + 512) x 2 B = 4,096 B a token, whose 65,536-byte page
    unify_kv_cache_spec_page_size doubles to 32 tokens. Groups of 5 (the smallest bucket):
    5 sliding groups and 1 full, a block id 5 x 131,072 = 655,360 bytes.
    Per request (get_max_concurrency_for_kv_cache_config): full cdiv(32,768, 32) = 1,024
    blocks; each sliding group cdiv(min(1,023 + 2,496, 32,768), 16) + 1 = 221, so
    1,024 + 5 x 221 = 2,129 (with T = 2,048: 1,024 + 5 x 193 = 1,989).
    12.75 GiB as printed spans [12.745, 12.755) GiB: 20,881-20,897 blocks; 20,895 blocks
    (13,693,747,200 B, 12.7533 GiB) give int(20,895 / 2,129 x 32,768) = 321,600 tokens and
    9.81x, the logged lines; at T = 2,048 the same blocks give 344,236 and 10.51x."""
    spec = _spec()
    config = VllmConfig(max_model_len=32768, version=(0, 25, 1), max_num_batched_tokens=2496,
                        gpu_name="L40S", compute_capability="8.9")
    budget = 20895 * 655360
    p = profile(spec, config, budget)
    assert p.bytes_per_block == 5 * 131072
    assert p.num_blocks == 20895
    assert p.blocks_per_request == 1024 + 5 * 221
    assert p.kv_cache_tokens == 321600
    assert f"{p.max_concurrency:.2f}" == "9.81"
    old = profile(spec, replace(config, max_num_batched_tokens=2048), budget)
    assert old.blocks_per_request == 1024 + 5 * 193
    assert old.kv_cache_tokens == int(20895 / 1989 * 32768) == 344236


def test_a_second_0251_log_on_a_gb10():
    """https://github.com/sostrowsk/dgx-spark-local-llm/blob/4b5486468ec6941d55c25f0b4f9557c7893d8b58/gemma4-int4.log
    (vLLM 0.25.1, an AWQ checkpoint of the same model on a DGX Spark, max_model_len 262,144)
    prints "Raising max_num_batched_tokens from 2048 to 2496 to accommodate 'video' input for
    prefix-LM model", "Available KV cache memory: 83.89 GiB", "GPU KV cache size: 3,875,400
    tokens" and 14.78x. By hand: full cdiv(262,144, 32) = 8,192 blocks and 5 x 221 sliding,
    9,297 a request; 137,442 blocks (83.8879 GiB) give int(137,442 / 9,297 x 262,144) =
    3,875,400 and 14.78x (at T = 2,048: 8,192 + 5 x 193 = 9,157 blocks, 15.01x)."""
    spec = _spec()
    config = VllmConfig(max_model_len=262144, version=(0, 25, 1), max_num_batched_tokens=2496)
    p = profile(spec, config, 137442 * 655360)
    assert p.blocks_per_request == 8192 + 5 * 221
    assert p.kv_cache_tokens == 3875400
    assert f"{p.max_concurrency:.2f}" == "14.78"
    old = profile(spec, replace(config, max_num_batched_tokens=2048), 137442 * 655360)
    assert f"{old.max_concurrency:.2f}" == "15.01"


def test_the_engines_defaults_carry_the_floor():
    # VllmEngine.defaults (what kvplan reports as the engine's defaults for a model and GPU)
    # takes its batch from the same rule as a deployment without flags: the L40S's 2,048
    # raised to the video item at 0.25.1, and left at 2,048 at 0.21.0
    from kvplan.engines.vllm.engine import ENGINE

    spec = _spec()
    assert ENGINE.defaults(spec, "l40s", L40S, "0.25.1")["max_num_batched_tokens"] == VIDEO_ITEM
    assert ENGINE.defaults(spec, "l40s", L40S, "0.21.0")["max_num_batched_tokens"] == 2048
