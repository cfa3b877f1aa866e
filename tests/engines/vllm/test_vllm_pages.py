"""vLLM's page kinds (kvplan.engines.vllm.pages): one class per KVCacheSpec kind, each with
one per-request rule. The formulas below are each spec's max_memory_usage_bytes in pages,
written from vllm/v1/kv_cache_interface.py (0.33), not read from kvplan."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.core.dtypes import cdiv
from kvplan.engines import vllm


def _config(**kw):
    return vllm.VllmConfig(max_model_len=1, **kw)


@settings(max_examples=200, deadline=None)
@given(length=st.integers(1, 300_000), block=st.sampled_from([1, 16, 32, 64, 128, 544]),
       window=st.integers(1, 40_000), batched=st.integers(1, 16_384),
       dcp=st.sampled_from([1, 2, 4]), async_on=st.booleans())
def test_each_kind_needs_what_its_spec_says(length, block, window, batched, dcp, async_on):
    config = _config(max_num_batched_tokens=batched, dcp=dcp, async_scheduling=async_on)
    t = batched * (2 if async_on else 1)  # two batches in flight with async scheduling, PP 1
    # FullAttentionSpec / MLAAttentionSpec: every token, cdiv(len, dcp) of them on each rank
    for page in (vllm.FullPage(block, 1, 1), vllm.MlaPage(block, 1, 1)):
        assert page.blocks_per_request(length, config) == cdiv(cdiv(length, dcp), block)
    # SlidingWindowSpec: min(W - 1 + T, len) tokens, one block more (the window's start)
    sliding = vllm.SlidingPage(block, 1, 1, window)
    assert sliding.blocks_per_request(length, config) == cdiv(min(window - 1 + t, length),
                                                              block) + 1
    # ChunkedLocalAttentionSpec: min(C + T, len)
    chunked = vllm.ChunkedPage(block, 1, 1, window)
    assert chunked.blocks_per_request(length, config) == cdiv(min(window + t, length), block)
    # CrossAttentionSpec: the encoder's tokens, whatever the length
    cross = vllm.CrossPage(block, 1, 1, window)
    assert cross.blocks_per_request(length, config) == cdiv(window, block)


@pytest.mark.parametrize("mode, speculative, checkpoints, pages", [
    ("align", 0, 0, 2), ("align", 2, 1, 5), ("none", 0, 0, 1), ("none", 3, 0, 4)])
def test_mamba_pages_by_cache_mode(mode, speculative, checkpoints, pages):
    # MambaSpec.max_memory_usage_bytes (0.33): "align" keeps 2 + speculative + the layer's
    # prefill-checkpoint pages, "none" 1 + speculative; any length
    config = _config(mamba_cache_mode=mode, num_speculative_tokens=speculative)
    page = vllm.MambaPage(16, 1, 1, checkpoints)
    assert page.blocks_per_request(1, config) == page.blocks_per_request(10**6, config) == pages


@settings(max_examples=100, deadline=None)
@given(tokens=st.integers(1, 5_000), block=st.sampled_from([1, 16, 64]),
       window=st.integers(1, 3_000))
def test_a_request_never_holds_more_than_it_was_admitted_for(tokens, block, window):
    config = _config()
    for page in (vllm.FullPage(block, 1, 1), vllm.SlidingPage(block, 1, 1, window),
                 vllm.ChunkedPage(block, 1, 1, window), vllm.CrossPage(block, 1, 1, window)):
        assert page.held_blocks(tokens, config) <= page.need(config).units(tokens)


def test_kinds_are_told_apart_by_class_not_by_fields():
    # the same block and page bytes: a full and an MLA page are still two buckets
    assert vllm.FullPage(16, 4096, 4096) != vllm.MlaPage(16, 4096, 4096)
    same_kind = vllm.SlidingPage(16, 1, 1, 4096), vllm.SlidingPage(16, 9, 9, 4096)
    assert same_kind[0].token_slots == same_kind[1].token_slots


@pytest.mark.parametrize("window", [1, 7, 16, 20, 24, 33, 64])
@pytest.mark.parametrize("block", [1, 16, 64])
def test_vllm_held_blocks_agree_with_the_layers_paged_tokens(window, block):
    """The engine's peak blocks per request (a replay of its managers freeing blocks) and the
    layer kinds' own paged-token formulas are written independently; they must agree."""
    from kvplan.core.layers import ChunkedLocal, SlidingWindow
    from kvplan.engines import vllm

    config = vllm.VllmConfig(max_model_len=4096)
    sliding = vllm.SlidingPage(block, 0, 0, window)
    chunked = vllm.ChunkedPage(block, 0, 0, window)
    for tokens in range(1, 3 * (window + block) + 2):
        assert sliding.held_blocks(tokens, config) * block == \
            SlidingWindow(1, 8, window=window).paged_tokens(tokens, block), tokens
        assert chunked.held_blocks(tokens, config) * block == \
            ChunkedLocal(1, 8, chunk=window).paged_tokens(tokens, block), tokens


def test_sliding_pages_hold_two_batches_from_0_26():
    # gpt-oss-20b's sliding layers (its config.json: sliding_window 128), 16-token blocks,
    # max_num_batched_tokens 8,192, max_model_len 131,072. SlidingWindowSpec.
    # max_memory_usage_bytes takes min(W - 1 + T, len) tokens and one block more: T is
    # max_num_batched_tokens in 0.25 (v1/kv_cache_interface.py), VllmConfig.
    # max_in_flight_tokens from 0.26, 2 x 8,192 with async scheduling (CUDA's default) at PP 1
    import json

    from tests.paths import FIXTURES

    window = json.loads((FIXTURES / "hf-configs" / "openai--gpt-oss-20b.json").read_text())[
        "sliding_window"]
    page = vllm.SlidingPage(16, 1, 1, window)

    def pages(version, **kw):
        config = vllm.VllmConfig(max_model_len=131_072, version=version,
                                 max_num_batched_tokens=8192, **kw)
        return page.blocks_per_request(131_072, config)

    one_batch = (127 + 8192 + 15) // 16 + 1  # 520 + 1
    two_batches = (127 + 16_384 + 15) // 16 + 1  # 1,032 + 1
    assert (one_batch, two_batches) == (521, 1033)
    assert pages((0, 25, 1)) == pages((0, 25, 1), async_scheduling=True) == one_batch
    assert pages((0, 26, 0)) == pages((0, 33, 0)) == two_batches
    # --no-async-scheduling (and the CPU build, which turns it off)
    assert pages((0, 26, 0), async_scheduling=False) == one_batch
    # PP: VllmConfig.max_concurrent_batches (0.26.0 config/vllm.py) is PP + 1 with async on
    # Model Runner V2, PP otherwise (V1's runner keeps no second batch at PP > 1)
    three_batches = (127 + 24_576 + 15) // 16 + 1  # 1,544 + 1
    assert three_batches == 1545
    assert pages((0, 26, 0), pp=2) == two_batches
    assert pages((0, 33, 0), pp=2, v2_runner=True) == three_batches
    assert pages((0, 33, 0), pp=2, v2_runner=True, async_scheduling=False) == two_batches
    assert pages((0, 25, 1), pp=2, v2_runner=True) == one_batch


@pytest.mark.parametrize("words, value", [
    ("", None), ("--async-scheduling", True), ("--no-async-scheduling", False)])
def test_async_scheduling_from_a_launch_line(words, value):
    from kvplan.planning.launch import from_command

    lp = from_command(f"vllm serve openai/gpt-oss-20b --max-model-len 8192 {words}")
    assert lp.overrides.get("async_scheduling") is value


def test_the_deployment_tells_the_runner_that_sets_the_batches_in_flight():
    # config/vllm.py use_v2_model_runner: every model from 0.29; in 0.27-0.28 dense attention
    # models and listed MoE types; V1's runner before (kvplan reads V2 from 0.27)
    from kvplan.engines.base import Deployment
    from kvplan.engines.vllm.engine import config_for
    from kvplan.sources.library import resolve

    dense_spec = resolve("llama-3.1-8b")
    moe_spec = resolve("mixtral-8x7b")
    assert config_for(Deployment(dense_spec, engine_version="0.33.0", pp=2)).v2_runner
    assert config_for(Deployment(moe_spec, engine_version="0.29.0", pp=2)).v2_runner
    assert not config_for(Deployment(moe_spec, engine_version="0.28.0", pp=2)).v2_runner
    assert not config_for(Deployment(dense_spec, engine_version="0.26.0", pp=2)).v2_runner
