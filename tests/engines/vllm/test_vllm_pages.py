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
