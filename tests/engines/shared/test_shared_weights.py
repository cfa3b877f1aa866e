"""The weights every engine loads, by format and split (kvplan.engines.shared.weights): bytes per
parameter, 16-bit embeddings beside quantized layers, the TP/PP split, and the shapes estimated
when config.json gives none. Expected numbers are hand sums written beside them or a real log's
figure, cited."""

from __future__ import annotations

import pytest
from engine_cases import GIB, LLAMA8B, LLAMA8B_DIMS, model

from kvplan.core.errors import BadInputError
from kvplan.engines.shared import weights as shared_weights


def test_bf16_weights_are_params_times_two():
    split = shared_weights.weight_split(LLAMA8B, shared_weights.weight_format("auto"), LLAMA8B_DIMS)
    assert split.total_bytes == 8030261248 * 2
    assert split.embedding_bytes == split.lm_head_bytes == 128256 * 4096 * 2


def test_quantized_weights_keep_embeddings_in_16_bit():
    dims = shared_weights.ModelDims(3584, 18944, 152064)  # Qwen2.5-7B config.json
    spec = model("qwen2.5-7b")
    split = shared_weights.weight_split(spec, shared_weights.weight_format("awq"), dims)
    embed = 152064 * 3584
    layers = spec.num_params - 2 * embed
    # int4 + (fp16 scale + 4-bit zero) per 128 weights = 4.15625 bits
    assert split.layer_bytes == -(-layers * 532 // (128 * 8))
    assert split.embedding_bytes == embed * 2
    # the RTX 4080 log: "Model loading took 5.29 GiB"
    assert abs(split.total_bytes / GIB - 5.29) < 0.11
    assert shared_weights.weight_format("mxfp4").bits_per_weight() == 4 + 8 / 32
    with pytest.raises(BadInputError):
        shared_weights.weight_format("int3")


def test_stage_weights_follow_pp_split_and_tp():
    split = shared_weights.weight_split(LLAMA8B, shared_weights.weight_format("bf16"), LLAMA8B_DIMS)
    one = shared_weights.stage_weight_bytes(LLAMA8B, split, tp=1, pp=1)
    assert one == (split.total_bytes,)
    tp2 = shared_weights.stage_weight_bytes(LLAMA8B, split, tp=2, pp=1)
    assert tp2 == (split.total_bytes // 2,)
    first, last = shared_weights.stage_weight_bytes(LLAMA8B, split, tp=1, pp=2)
    assert first == split.layer_bytes // 2 + split.embedding_bytes
    assert last == split.layer_bytes // 2 + split.lm_head_bytes


def test_estimated_dims():
    d = shared_weights.estimate_dims(LLAMA8B)
    assert d.hidden_size == 32 * 128 and d.estimated  # heads x head_dim
    assert d.vocab_size == 128256  # Llama 3's, the documented default
    # per layer (8,030,261,248 - 2 x 128,256 x 4,096) / 32 = 218,112,128 parameters, less
    # q/o (2 x 4,096^2) and k/v (2 x 4,096 x 1,024), over the 3 MLP matrices of 4,096 rows:
    # 14,336.7 -- config.json's intermediate_size is 14,336
    per_layer = (8030261248 - 2 * 128256 * 4096) / 32
    guess = (per_layer - (2 * 4096**2 + 2 * 4096 * 8 * 128)) / (3 * 4096)
    assert abs(guess - 14336) < 1
    assert abs(d.intermediate_size - 14336) <= 1
