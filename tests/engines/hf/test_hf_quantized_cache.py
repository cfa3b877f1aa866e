"""transformers' QuantizedCache residual: what it keeps in full precision, against real runs.

Expected figures come from transformers 5.24.0 itself (tests/oracle_hf/run_oracle.py: a
random-weight model built from the config, batch 2, `QuantizedCache(backend="quanto", nbits=4,
q_group_size=64, residual_length=R)`, the bytes of every tensor its layers hold). The model
is Llama-3.1-8B-Instruct's config shrunk to 8 layers (8 KV heads of 128 kept).
"""

from __future__ import annotations

import pytest

from kvplan.core.dtypes import parse_format
from kvplan.core.errors import BadInputError
from kvplan.core.layers import FullAttention, SlidingWindow
from kvplan.core.spec import ModelSpec
from kvplan.engines import hf
from kvplan.validate.predict import predict
from kvplan.validate.results import ValidateRequest

LLAMA_8_LAYERS = ModelSpec(name="llama-3.1-8b-8-layers", layers=(FullAttention(8, 128),) * 8,
                           num_attention_heads=32, max_context_tokens=131072)


def _bytes(tokens: int, decoded: int, residual: int) -> int:
    fmt = f"int4:g64:r{residual}"
    return hf.profile(LLAMA_8_LAYERS, seq_len=tokens, batch=2, kv_dtype=fmt,
                      decoded=decoded).cache_bytes


@pytest.mark.parametrize(("tokens", "decoded", "residual", "real_bytes"), [
    # a prefill is quantized whole: 100 tokens x 8 layers x 2 rows x (K + V) of 8 heads x
    # (64 packed bytes + 2 groups x (scale + zero point) 2 B) = 1,843,200 B
    (40, 0, 128, 737_280),
    (100, 0, 128, 1_843_200),
])
def test_a_prefill_is_quantized_whole(tokens, decoded, residual, real_bytes):
    # kvplan charged min(N, R) = all 100 tokens in bf16 before: 6,553,600 B
    assert _bytes(tokens, decoded, residual) == real_bytes


def test_decoded_tokens_stay_in_full_precision_until_the_flush():
    # `QuantizedLayer.update`: each one-token step appends to a bf16 buffer, and the step that
    # would make it R long re-quantizes everything: the buffer holds decoded mod R tokens
    assert hf.full_precision_tokens(parse_format("int4:g64:r8"), 100, 10) == 2
    assert hf.full_precision_tokens(parse_format("int4:g64:r8"), 100, 7) == 7
    assert hf.full_precision_tokens(parse_format("int4:g64:r8"), 100, 8) == 0
    assert hf.full_precision_tokens(parse_format("int4:g64:r128"), 100, 0) == 0


def test_validate_hf_dynamic_prefill_has_no_recent_tokens():
    fmt = parse_format("int4:g64:r128")
    request = ValidateRequest(LLAMA_8_LAYERS, fmt, 100, 2, layout="hf-dynamic")
    assert sum(predict(request).values()) == 1_843_200


def test_quantized_cache_refuses_sliding_layers():
    # transformers 5.24 QuantizedCache.__init__: "`QuantizedCache` is only supported for
    # models with only full attention layers"
    spec = ModelSpec(name="mistral-like", layers=(SlidingWindow(8, 128, window=32),) * 2,
                     num_attention_heads=32, max_context_tokens=32768)
    with pytest.raises(BadInputError, match="full attention"):
        hf.profile(spec, seq_len=40, kv_dtype="int4:g64:r128")

