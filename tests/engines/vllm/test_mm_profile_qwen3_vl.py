"""Qwen3-VL's multimodal profile in vLLM V1 (kvplan.engines.vllm.mm_profile), checked by hand
against vLLM's source and two real start-up logs.

The logs (tests/fixtures/logs/index.yaml): the same user, machine, release (0.12.0), TP 2 and
settings (max_num_batched_tokens 8,192, max_num_seqs 64), once with Qwen3-30B-A3B
(vllm-videocut-qwen3-30b-a3b-0.12: "Model loading took 28.4571 GiB", "Available KV cache
memory: 41.68 GiB") and once with Qwen3-VL-30B-A3B-Instruct, whose language model is the same
(vllm-videocut-qwen3-vl-30b-a3b-tp2-0.12.0: "Model loading took 29.3114 GiB", "Encoder cache
will be initialized with a budget of 153600 tokens, and profiled with 1 video items of the
maximum feature size.", "Available KV cache memory: 38.15 GiB"). The second log's budget is
3.53 GiB lower (each figure +-0.005); less its 0.8543 GiB more of weights, the profile held
2.676 +- 0.01 GiB more.

By hand, from vLLM 0.12.0 (module docstring): 24,576 frames of 32 x 32 pixels, 2 frames per
temporal patch -> 12,288 merged tokens of 2 x 2 patches (49,152 patches of 3 x 2 x 16 x 16 =
1,536 values); the item counts 12.5 x 12,288 = 153,600 tokens, the log's budget; the encoder
output is 2,048 x (1 + 3 deepstack levels) = 8,192 wide, bf16.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines.vllm import mm_profile
from kvplan.engines.vllm.budget import vllm_budget
from kvplan.sources.hfconfig import load_config_file

FIXTURES = Path(__file__).parents[2] / "fixtures"
CONFIG = FIXTURES / "hf-configs" / "families" / "Qwen--Qwen3-VL-30B-A3B-Instruct.json"
GIB = 2**30

CACHE = 153600 * 8192 * 2  # the widened encoder cache (0.12: the item's tokens)
OUTPUT = 12288 * 8192 * 2  # the encoder's own output, still referenced
PIXELS = 49152 * 1536 * 2  # pixel_values_videos cast to bf16 by the processor
DEEPSTACK = 3 * 8192 * 2048 * 2  # three (max_num_batched_tokens, 2,048) bf16 buffers


def _vision():
    spec = load_config_file(CONFIG)
    assert spec.vision is not None
    return spec, spec.vision


def test_the_dummy_video_is_the_logs_encoder_budget() -> None:
    _, vision = _vision()
    mm = mm_profile.qwen3_vl_profile(vision, 65536, 8192, 64, (0, 12, 0))
    assert mm is not None
    assert (mm.modality, mm.tokens_per_item, mm.num_items) == ("video", 153600, 1)
    assert mm.soft_tokens_per_item == 12288
    assert (mm.cache_bytes, mm.output_bytes, mm.pixel_bytes) == (CACHE, OUTPUT, PIXELS)


def test_held_bytes_match_the_two_logs_difference() -> None:
    _, vision = _vision()
    mm = mm_profile.qwen3_vl_profile(vision, 65536, 8192, 64, (0, 12, 0))
    assert mm is not None
    observed = (41.68 - 38.15) - (29.3114 - 28.4571)  # GiB, each budget +-0.005
    assert abs(mm.held_bytes / GIB - observed) <= 0.011


def test_releases_differ_as_their_source() -> None:
    _, vision = _vision()
    old = mm_profile.qwen3_vl_profile(vision, 65536, 8192, 64, (0, 11, 0))
    new = mm_profile.qwen3_vl_profile(vision, 65536, 8192, 64, (0, 13, 0))
    assert old is not None and new is not None
    # 0.11 widens to the encoder budget, max(8,192, 153,600): the same rows for one item
    assert old.cache_bytes == CACHE and old.output_bytes == OUTPUT
    # 0.13 counts the soft tokens (budget max(8,192, 12,288)) and caches the outputs as they are
    assert (new.tokens_per_item, new.num_items) == (12288, 1)
    assert (new.cache_bytes, new.output_bytes, new.pixel_bytes) == (OUTPUT, 0, PIXELS)
    # a release not read (0.10 has no qwen3_vl.py; 0.15 on not read): not modelled
    assert mm_profile.qwen3_vl_profile(vision, 65536, 8192, 64, (0, 15, 0)) is None


def test_more_items_when_the_budget_holds_them() -> None:
    _, vision = _vision()
    # 0.13: a 40,000-token batch holds 40,000 // 12,288 = 3 items; max_model_len 65,536 holds
    # 5 per prompt, and 2 sequences x 5 bound nothing
    mm = mm_profile.qwen3_vl_profile(vision, 65536, 40000, 2, (0, 13, 0))
    assert mm is not None and mm.num_items == 3
    assert mm.cache_bytes == 3 * OUTPUT
    # chunked prefill off: sequences bounded by max_num_batched_tokens // tokens = 3 as well
    off = mm_profile.qwen3_vl_profile(vision, 65536, 40000, 64, (0, 13, 0),
                                      chunked_prefill=False)
    assert off is not None and off.num_items == 3


@pytest.mark.parametrize("max_model_len, video", [(8192, 999), (65536, 0)])
def test_not_modelled_is_none(max_model_len: int, video: int) -> None:
    _, vision = _vision()
    assert mm_profile.qwen3_vl_profile(vision, max_model_len, 8192, 64, (0, 12, 0),
                                       video) is None


def test_the_budget_holds_the_profile_and_the_buffers() -> None:
    spec, _ = _vision()
    args = dict(version=(0, 12, 0), tp=2, max_model_len=65536, max_num_seqs=64,
                max_num_batched_tokens=8192)
    with_mm = vllm_budget(spec, 80 * GIB, **args)
    text_only = vllm_budget(spec, 80 * GIB, mm_limits="image=0,video=0", **args)
    # the tower is skipped at 0 (qwen3_vl.py: visual None) and nothing is profiled
    assert with_mm.weights_bytes[0] - text_only.weights_bytes[0] > DEEPSTACK
    assert with_mm.activation_bytes[0] - text_only.activation_bytes[0] == \
        CACHE + OUTPUT + PIXELS
    assert any("deepstack input buffers (100,663,296 B" in n for n in with_mm.notes)
    assert any("153,600 tokens" in n for n in with_mm.notes)


def test_an_unread_release_says_so() -> None:
    spec, _ = _vision()
    budget = vllm_budget(spec, 80 * GIB, version=(0, 17, 0), tp=2, max_model_len=65536)
    assert any("Qwen3-VL's multimodal profile under vLLM 0.17.0 is not modelled" in n
               for n in budget.notes)


def test_deepstack_buffers() -> None:
    spec, _ = _vision()
    assert mm_profile.deepstack_buffer_bytes(spec, 8192, (0, 12, 0)) == DEEPSTACK
    assert mm_profile.deepstack_buffer_bytes(spec, 8192, (0, 20, 0)) == 0
