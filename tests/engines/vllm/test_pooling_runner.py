"""vLLM's pooling runner (an embedding, classification or reward model): its profile runs the
pooler over the dummy forward's hidden states instead of computing logits and warming up the
sampler (v1/worker/gpu_model_runner.py::profile_run, `_dummy_pooler_run`, 0.9.2-0.32), and
the flags that select it (--runner, --convert, --task), read the same from a flag, a plan
file, a launch line and a log's echoed non-default args."""

from __future__ import annotations

import pytest

from kvplan.core.errors import BadInputError
from kvplan.engines.settings import BY_NAME, parse_runner
from kvplan.engines.shared import activations as act
from kvplan.engines.vllm import memory as vp

GIB = 2**30
# Qwen3-VL-Embedding-2B's language model (Qwen3-VL-2B text_config: hidden 2048,
# intermediate 6144, vocab 151936)
QWEN3_VL_2B = act.Shapes(2048, 151936, 6144)


def test_pooler_replaces_the_sampler_in_the_peak():
    # the flex run (vLLM 0.11.0, T4): 8,192 tokens, max_num_seqs 256, chunked prefill on
    batch = vp.BatchSettings(8192, 256, True, "V1")
    gen = vp.activation_peak(QWEN3_VL_2B, batch, (0, 11, 0))
    pool = vp.activation_peak(QWEN3_VL_2B, batch, (0, 11, 0), pooling=True)
    assert pool.sampler_bytes == 0
    # the embed task only (chunked prefill drops "encode"): the hidden states alive, 8,192 x
    # 2,048 x 2 B, and per dummy request the gathered row (2 B), its fp32 copy and the
    # normalized copy (4 + 4 B)
    assert pool.pooler_bytes == 8192 * 2048 * 2 + 256 * 2048 * (2 + 4 + 4)
    # the forward over 8,192 tokens sets the peak: gate/up (2 x 6,144) and the activation
    # (6,144) plus three hidden-size buffers, 2 B each
    assert pool.peak_bytes == pool.forward_bytes == 8192 * (3 * 6144 + 3 * 2048) * 2
    # a generating model of the same shapes would warm the sort-path sampler over 256 x
    # 151,936 logits (38 B each) with the hidden states alive: 1.41 GiB against the forward's
    # 0.375 GiB
    assert gen.peak_bytes == 256 * 151936 * 38 + 8192 * 2048 * 2
    assert (gen.peak_bytes - pool.peak_bytes) / GIB == pytest.approx(1.408 - 0.375, abs=0.001)


def test_encode_task_profiled_without_chunked_prefill():
    # --no-enable-chunked-prefill: get_supported_pooling_tasks keeps "encode" (ALL pooling),
    # every token's row in fp32 (RewardPoolerHead) and its softmax beside it
    batch = vp.BatchSettings(2048, 256, False, "V1")
    assert vp.pooler_bytes(QWEN3_VL_2B, batch) == 2048 * 2048 * 2 + 2048 * 2048 * (4 + 4)
    # still under the forward for a decoder of this width
    peak = vp.activation_peak(QWEN3_VL_2B, batch, (0, 11, 0), pooling=True)
    assert peak.peak_bytes == 2048 * (3 * 6144 + 3 * 2048) * 2


def test_earlier_stages_have_no_pooler():
    batch = vp.BatchSettings(2048, 256, True, "V1")
    peak = vp.activation_peak(QWEN3_VL_2B, batch, (0, 11, 0), pooling=True, last_stage=False)
    assert peak.pooler_bytes == 0 and peak.sampler_bytes == 0


@pytest.mark.parametrize(("value", "runner"), [
    ("pooling", "pooling"), ("embed", "pooling"), ("embedding", "pooling"),
    ("classify", "pooling"), ("score", "pooling"), ("reward", "pooling"),
    ("generate", "generate"), ("transcription", "generate"), ("auto", "auto"),
    ("none", "auto"), ("'pooling'", "pooling")])
def test_runner_values(value, runner):
    assert parse_runner(value) == runner


def test_runner_refusals_name_the_flag():
    with pytest.raises(BadInputError, match="--convert: no vLLM runner.*'embeddings'"):
        parse_runner("embeddings", "--convert ")
    with pytest.raises(BadInputError, match="draft runner"):
        parse_runner("draft")


def test_runner_row_reads_all_three_flags():
    row = BY_NAME["runner"]
    assert row.engine_flags["vllm"] == ("--runner", "--convert", "--task")
    assert row.only == ("vllm",)
