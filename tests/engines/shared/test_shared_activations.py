"""The forward pass every engine's profile run sizes (kvplan.engines.shared.activations), against
a real vLLM log's peak."""

from __future__ import annotations

from engine_cases import GIB, LLAMA8B_DIMS

from kvplan.engines.shared import activations as act


def test_forward_activation_matches_rtx3090_log():
    # issue 10517: peak torch 17.98 GiB - weights 14.99 GiB = 2.99 GiB at 29,000 tokens
    per_token = (3 * 14336 + 3 * 4096) * 2
    assert act.forward_activation_bytes(LLAMA8B_DIMS, 29000) == 29000 * per_token
    assert abs(29000 * per_token / GIB - 2.99) < 0.01
