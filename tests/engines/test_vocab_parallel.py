"""Per-rank rows of the vocabulary-parallel embedding and LM head, as vLLM builds them.

Source: vllm/model_executor/layers/vocab_parallel_embedding.py of vLLM 0.33.0.
VocabParallelEmbedding.__init__ pads the vocabulary with pad_vocab_size(vocab, 64)
(DEFAULT_VOCAB_PADDING_SIZE; ParallelLMHead passes the same default) and sets
num_embeddings_per_partition = divide(num_embeddings_padded, tp_size); divide() asserts
"{padded} is not divisible by {tp}". TP is not folded into the padding, so TP 3, 6 and 12 work
for some vocabularies and stop vLLM for others (vllm-project/vllm#31474: GLM-4.7's 151,552 at
TP 6). The hand formula below is that source's arithmetic, written out.
"""

from __future__ import annotations

import pytest

from kvplan.core.errors import BadInputError
from kvplan.core.weights import inventory, vocab_shard_rows
from kvplan.sources.library import resolve


def _vllm_rows(vocab: int, tp: int) -> int | None:
    padded = (vocab + 64 - 1) // 64 * 64  # pad_vocab_size(vocab, 64)
    return padded // tp if padded % tp == 0 else None  # divide(padded, tp) or AssertionError


@pytest.mark.parametrize("tp", [1, 2, 3, 4, 6, 8, 12, 16])
@pytest.mark.parametrize("vocab", [128256, 50257, 32064, 151936, 163840, 129280, 151552])
def test_rows_per_rank_follow_vllm(vocab, tp):
    expected = _vllm_rows(vocab, tp)
    if expected is None:
        with pytest.raises(BadInputError, match=f"not divisible by {tp}"):
            vocab_shard_rows(vocab, tp)
    else:
        assert vocab_shard_rows(vocab, tp) == expected


def test_gpt3_embedding_per_rank_at_tp_3_6_12():
    # GPT-3 175B: 96 heads (TP 3, 6, 12 divide them), vocabulary 50,257 -> 50,304 = 3 x 16,768
    # padded rows, hidden 12,288, fp16, tied head
    spec = resolve("gpt-3-175b")
    for tp, rows in ((3, 16768), (6, 8384), (12, 4192)):
        inv = inventory(spec, spec.quantization, tp=tp, padded_vocab=True)
        (embed,) = [t for t in inv.tensors if t.name == "model.embed_tokens.weight"]
        assert embed.shape == (rows, 12288) and rows * tp == 50304
        assert embed.num_bytes == 50304 // tp * 12288 * 2


def test_llama3_vocabulary_splits_over_twelve():
    # 128,256 = 64 x 2,004 and 2,004 = 12 x 167: TP 3, 6 and 12 split it with no extra row
    assert [vocab_shard_rows(128256, tp) for tp in (3, 6, 12)] == [42752, 21376, 10688]


@pytest.mark.parametrize("tp", [3, 6, 12])
def test_a_vocabulary_tp_does_not_divide_is_refused(tp):
    # Kimi-K3: 96 heads divide by 3, 6 and 12, but its 163,840-token vocabulary (= 64 x 2,560)
    # does not, and vLLM 0.33 stops at the embedding ("163840 is not divisible by 6")
    spec = resolve("kimi-k3")
    with pytest.raises(BadInputError, match="163,840 is not divisible by"):
        inventory(spec, spec.quantization, tp=tp, padded_vocab=True)
    # the checkpoint itself (no engine's padding) is still listed, rows rounded up per rank
    inv = inventory(spec, spec.quantization, tp=tp)
    (embed,) = [t for t in inv.tensors if t.name == "model.embed_tokens.weight"]
    assert embed.shape[0] == -(-163840 // tp)


@pytest.mark.parametrize("tp", [3, 6, 12])
def test_trtllm_rounds_the_rows_up_without_padding(tp):
    """TensorRT-LLM's PyTorch flow (tensorrt_llm/_torch/modules/embedding.py: Embedding and
    LMHead with TensorParallelMode.COLUMN) holds ceil(vocab / tp) rows a rank, no padding to
    64: GPT-2's 50,257 words at TP 3 are 16,753 rows a rank where vLLM holds 16,768."""
    from kvplan.engines.shared.weights import stage_weights
    from kvplan.engines.trtllm import TRTLLM_VOCAB, trtllm_memory

    spec = resolve("gpt2")
    trt = inventory(spec, spec.quantization, tp=tp, padded_vocab=True, vocab=TRTLLM_VOCAB)
    vllm = inventory(spec, spec.quantization, tp=tp, padded_vocab=True)
    rows = {name: [t.shape[0] for t in inv.tensors if t.name == "model.embed_tokens.weight"]
            for name, inv in (("trt", trt), ("vllm", vllm))}
    assert rows == {"trt": [-(-50257 // tp)], "vllm": [50304 // tp]}
    per_row = 768 * 4  # GPT-2: hidden 768, fp32 checkpoint, tied head
    assert vllm.total_bytes - trt.total_bytes == (50304 // tp - -(-50257 // tp)) * per_row
    # the engine's weights term: TRT-LLM's memory profile asks for its own split (GPT-2's fp32
    # loaded as bf16 by every engine here, so 768 x 2 bytes a row)
    memory = trtllm_memory(spec, 80 * 2**30, tp=tp)
    trt_stage = max(stage_weights(spec, tp=tp, vocab=TRTLLM_VOCAB)[0])
    assert memory.weights_bytes == trt_stage
    assert max(stage_weights(spec, tp=tp)[0]) - trt_stage == \
        (50304 // tp - -(-50257 // tp)) * 768 * 2
