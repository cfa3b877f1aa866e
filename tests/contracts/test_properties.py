"""Laws of the maths, checked with hypothesis over generated specs and inputs."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.core.dtypes import BF16, parse_format
from kvplan.core.layers import (
    MLA,
    ChunkedLocal,
    FullAttention,
    RecurrentState,
    SlidingWindow,
    StateTensor,
)
from kvplan.core.sizing import batch_bytes, request_bytes, size
from kvplan.core.spec import ModelSpec

heads = st.sampled_from([1, 2, 4, 8, 16, 32])
dims = st.sampled_from([64, 80, 96, 128, 192, 256])
windows = st.integers(min_value=1, max_value=5000)


@st.composite
def layers(draw):
    kv, dim = draw(heads), draw(dims)
    return draw(st.sampled_from([
        FullAttention(kv, dim),
        SlidingWindow(kv, dim, window=draw(windows)),
        ChunkedLocal(kv, dim, chunk=draw(windows)),
        MLA(512, 64),
        RecurrentState("mamba2", (StateTensor("ssm", (kv, dim, 16), 4, tp_axis=0),)),
    ]))


specs = st.lists(layers(), min_size=1, max_size=12).map(
    lambda ls: ModelSpec("gen", tuple(ls), num_attention_heads=64))
tokens = st.integers(min_value=1, max_value=200_000)
formats = st.sampled_from(["bf16", "fp32", "fp8", "int8", "int4", "int2", "nvfp4", "int4:g64",
                           "int2:g32:kivi", "int4:g64:r128"]).map(parse_format)


@given(specs, tokens, st.integers(min_value=1, max_value=64), formats)
def test_linear_in_batch(spec, n, b, fmt):
    one = request_bytes(spec.layers, n, fmt)
    assert batch_bytes(spec.layers, [n] * b, fmt) == b * one


@given(specs, tokens, tokens, formats)
def test_non_decreasing_in_tokens(spec, a, b, fmt):
    lo, hi = sorted((a, b))
    assert request_bytes(spec.layers, lo, fmt) <= request_bytes(spec.layers, hi, fmt)


@given(heads, dims, windows, st.integers(min_value=0, max_value=100_000))
def test_flat_past_the_window(kv, dim, w, extra):
    layer = SlidingWindow(kv, dim, window=w)
    assert layer.request_bytes(w + extra, BF16) == layer.request_bytes(w, BF16)


@given(st.integers(min_value=1, max_value=100), heads, dims, tokens)
def test_gqa_never_more_than_mha(n_layers, kv, dim, n):
    mha = (FullAttention(32, dim),) * n_layers
    gqa = (FullAttention(min(kv, 32), dim),) * n_layers
    assert request_bytes(gqa, n, BF16) <= request_bytes(mha, n, BF16)


@given(specs, tokens, st.sampled_from(["fp8", "int8", "int4", "int2", "nvfp4", "int4:g64",
                                       "int4:g32:sym", "int2:g32:kivi"]))
def test_quantized_never_more_than_bf16(spec, n, name):
    assert request_bytes(spec.layers, n, parse_format(name)) <= request_bytes(spec.layers, n, BF16)


@settings(max_examples=200)
@given(specs, tokens, st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
def test_tp_per_rank_times_ranks_covers_the_total(spec, n, tp):
    spec = ModelSpec("gen", spec.layers, num_attention_heads=64)
    r = size(spec, BF16, tokens=n, tp=tp)
    assert r.per_gpu_batch_bytes * tp >= r.batch_bytes
    assert r.all_gpus_batch_bytes == r.per_gpu_batch_bytes * tp


@given(specs, st.lists(tokens, min_size=1, max_size=8), st.sampled_from([1, 16, 32, 256]))
def test_paged_never_less_than_exact(spec, lengths, block):
    r = size(spec, BF16, lengths=lengths, block_size=block, max_len=max(lengths))
    assert r.paged_batch_bytes >= r.batch_bytes
    assert r.contiguous_batch_bytes >= r.batch_bytes


def test_kivi_request_bytes_hold_the_peak_before_a_flush():
    # int2:g32:kivi:r128, one head of 64. KIVI Algorithm 1 (arXiv:2402.02750, KeyQuant): the
    # key residual holds l mod R tokens and is quantized whole when it reaches R = 128, so at
    # 127 tokens every key is bf16 and at 128 all are quantized and the exact bytes drop.
    # A request that reached 128 tokens held the 127-token bytes: capacity must hold the peak.
    from kvplan.core.layers import FullAttention

    fmt = parse_format("int2:g32:kivi:r128")
    layer = FullAttention(1, 64)
    assert layer.bytes_for_tokens(128, fmt) < layer.bytes_for_tokens(127, fmt)
    assert layer.request_bytes(128, fmt) == layer.bytes_for_tokens(127, fmt)
    assert layer.request_bytes(300, fmt) == max(layer.bytes_for_tokens(300, fmt),
                                                layer.bytes_for_tokens(255, fmt))
    sizes = [request_bytes((layer,), n, fmt) for n in range(1, 400)]
    assert sizes == sorted(sizes)
