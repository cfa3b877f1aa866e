"""Which MoE backend vLLM runs MXFP4 experts with on Hopper, by release.

`get_mxfp4_backend` (model_executor/layers/quantization/mxfp4.py) takes the Triton kernels on
SM 9.0 only when `has_triton_kernels()` is true. vllm-project/vllm#27370 (merged 2025-10-22:
"At the moment, users have to install `triton_kernels` manually") added the package to
requirements/cuda.txt on main, but the 0.11.1 release does not hold it: its sdist's
requirements/cuda.txt, docker/Dockerfile and CMakeLists.txt name no triton_kernels, and its
utils/import_utils.py `has_triton_kernels()` looks for the top-level module alone. The 0.12.0
wheel vendors it (vllm/third_party/triton_kernels) and `has_triton_kernels()` also imports
that. Before 0.12.0 a stock install falls back to Marlin."""

from __future__ import annotations

from kvplan.engines.vllm import mxfp4_expert_load
from kvplan.engines.vllm.budget import vllm_budget
from kvplan.engines.vllm.config import rules_for
from kvplan.sources.library import resolve

GIB = 2**30


def test_triton_kernels_arrive_with_0_12_0():
    assert not rules_for((0, 10, 1)).triton_kernels_installed
    assert not rules_for((0, 11, 0)).triton_kernels_installed
    assert not rules_for((0, 11, 2)).triton_kernels_installed
    assert rules_for((0, 12, 0)).triton_kernels_installed


def test_hopper_without_triton_kernels_lays_experts_out_for_marlin():
    marlin = mxfp4_expert_load("ampere sm8.0")
    assert mxfp4_expert_load("hopper sm9.0", triton_kernels=False) == marlin
    assert mxfp4_expert_load("hopper sm9.0") != marlin
    # Marlin: the expert width padded to a multiple of 128 and the hidden size to 256
    # (gpt-oss: 2,880 -> 2,944 and 2,880 -> 3,072), as vllm#23278 logs it on an H100
    assert (marlin.width_align, marlin.hidden_align) == (128, 256)


H100 = 85_028_896_768  # what an H100 80GB reports (kvplan's GPU catalog)


def _budget(version: tuple[int, ...], **settings) -> tuple[float, float]:
    """(KV budget GiB, weights GiB) of gpt-oss-120b on one H100."""
    budget = vllm_budget(resolve("gpt-oss-120b"), H100, version=version, gpu_name="H100 SXM",
                         gpu_arch="hopper sm9.0", check=False, **settings)
    return budget.available_kv_cache_bytes[0] / GIB, budget.weights_bytes[0] / GIB


def test_gpt_oss_120b_on_h100_at_0_10_1_refuses_as_logged():
    # vllm#23278 (0.10.1, an H100, `vllm serve openai/gpt-oss-120b`): the Marlin warning,
    # "Model loading took 65.9651 GiB", "Available KV cache memory: -2.14 GiB"
    kv, weights = _budget((0, 10, 1))
    assert abs(weights - 65.9651) <= 0.02, weights
    assert abs(kv - -2.14) <= 0.1, kv


def test_gpt_oss_120b_on_h100_budget_follows_the_installed_kernels():
    # vllm#27508 (0.11.0, pip install, --gpu-memory-utilization 0.95
    # --max-num-batched-tokens 1024): "Available KV cache memory: 1.71 GiB". With Marlin's
    # layout kvplan comes within 0.25 GiB; 0.11.1 and 0.11.2 still run Marlin (no
    # triton_kernels); 0.12.0 on run Triton's (vllm#33155, 0.14.1, logs 64.38 GiB of weights on
    # an H100 with "Using Triton backend"), 1.7 GiB less weight, as much more cache.
    settings = {"gpu_memory_utilization": 0.95, "max_num_batched_tokens": 1024}
    assert _budget((0, 11, 2), **settings) == _budget((0, 11, 0), **settings)
    (marlin, _), (triton, triton_weights) = _budget((0, 11, 0), **settings), \
        _budget((0, 12, 0), **settings)
    assert abs(marlin - 1.71) <= 0.25, marlin
    assert abs(triton_weights - 64.38) <= 0.15, triton_weights
    assert 1.5 <= triton - marlin <= 1.8, (marlin, triton)
