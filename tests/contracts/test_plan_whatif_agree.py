"""`kvplan plan` and `kvplan whatif` share one decode-step model and one prefill model: over
models, GPUs, layouts and batches, every figure they both print is the same number."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvplan.core.errors import BadInputError

# dense, GQA with sliding windows, MoE, MLA + MoE with an FP8 checkpoint, hybrid attention
MODELS = ["llama-3.1-8b", "llama-3.1-70b", "gemma-2-9b", "mixtral-8x7b", "qwen3-32b",
          "deepseek-v3", "gpt-oss-20b"]
GPUS = ["h100", "h200", "a100-80gb", "l40s", "b200"]


@st.composite
def cases(draw):
    return (draw(st.sampled_from(MODELS)), draw(st.sampled_from(GPUS)),
            draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(1, 64)),
            draw(st.integers(1, 8192)), draw(st.integers(0, 2048)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_plan_and_whatif_agree_on_the_decode_step_and_prefill(case):
    import kvplan
    from kvplan.planning import plan, whatif
    from kvplan.planning.traffic import size_for_traffic
    from kvplan.sources.workload import parse_workload

    model, gpu, count, batch, prompt, output = case
    try:
        d = kvplan.deploy(model, gpu=gpu, count=count)
        cap = d.capacity
        fits = plan.max_concurrency(cap, prompt + output).max_requests
    except BadInputError:
        assume(False)
        return
    assume(fits >= batch)
    floor = plan.decode_floor(cap, batch, prompt + output)
    w = whatif.run(d.deployment, whatif.WhatIfQuestion(prompt, output, prefill=True,
                                                       decode_batch=batch))
    p = w.prefill
    assert p is not None
    # the decode step: the same bytes and the same time in both commands
    assert p.weights_read_bytes == floor.weights_read_bytes_per_gpu
    assert p.kv_read_bytes == floor.kv_bytes_per_gpu
    assert p.decode_step_s == pytest.approx(floor.ms_per_token / 1000, rel=1e-12)
    assert p.decode_batch == batch and p.decode_context_tokens == prompt + output
    # the prefill: plan --rate's floor for a one-shape mix is whatif's time to first token
    if output:
        t = size_for_traffic(cap, parse_workload(f"{prompt}+{output}"), Fraction(1))
        assert t.prefill_floor_s == pytest.approx(p.ttft_s, rel=1e-12)
        assert t.compute_dtype == p.compute_dtype
        assert t.peak_flops_per_s == p.peak_flops_per_s
        assert t.prefill_flops_per_request == p.flops.total_flops
        # and its decode step at its own batch is plan's at that batch
        at = plan.decode_floor(cap, t.decode_batch, t.decode_context_tokens)
        assert t.decode is not None and t.decode.ms_per_token == at.ms_per_token
