"""vLLM's attention backends by GPU (kvplan.engines.vllm.backends): the MLA block size and the
GDN prefill kernel's checkpoint alignment, with vLLM's source rules cited in each test.
"""

from __future__ import annotations

from engine_cases import GIB, model
from factories import dense, hybrid

from kvplan.engines import vllm
from kvplan.engines.base import Deployment
from kvplan.engines.vllm.backends import capability
from kvplan.engines.vllm.engine import config_for
from kvplan.sources.gpus import custom_gpu, find_gpu
from kvplan.sources.library import resolve


def test_qwen3_next_hopper_gdn_checkpoint_alignment():
    # vLLM 0.33 on Hopper: the FlashInfer GDN prefill exports a checkpoint per GDN layer
    # (qwen_gdn_linear_attn.py, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT 64), so
    # _align_hybrid_block_size takes the block in multiples of lcm(16, 64) = 64 and
    # MambaSpec.max_memory_usage_bytes charges 2 + 0 + 1 checkpoint page per GDN group.
    mamba_page = 3 * 8192 * 2 + 32 * 128 * 128 * 2  # 1,097,728 B
    attn_token = 2 * 2 * 256 * 2  # 2,048 B
    block = 64 * -(-mamba_page // (64 * attn_token))  # 64 x 9 = 576
    assert block == 576
    for cc in ("9.0", None):  # an H100/H200, or no GPU given (Hopper assumed)
        config = vllm.VllmConfig(max_model_len=262144, compute_capability=cc)
        assert vllm.gdn_prefill_backend(hybrid(), config) == "flashinfer"
        p = vllm.profile(hybrid(), config, 40 * GIB)
        assert p.block_size == block
        assert p.num_blocks == 40 * GIB // (block * attn_token * 12)  # 12 slots per group
        assert p.blocks_per_request == -(-262144 // block) + 3 * 3 == 465
        assert p.max_concurrency == p.num_blocks / 465
    # Blackwell (SM 10.x / 12.x, head_k_dim 128, the CUDA 13 wheel): FlashInfer too
    for cc in ("10.0", "12.0"):
        config = vllm.VllmConfig(max_model_len=262144, compute_capability=cc)
        assert vllm.profile(hybrid(), config, 40 * GIB).block_size == 576
    # Ampere, Ada, ROCm: the Triton prefill, 544 tokens and 2 pages per GDN group
    for cc in ("8.0", "8.9", "gfx942"):
        config = vllm.VllmConfig(max_model_len=262144, compute_capability=cc)
        assert vllm.gdn_prefill_backend(hybrid(), config) == "triton"
        assert vllm.profile(hybrid(), config, 40 * GIB).blocks_per_request == 482 + 3 * 2


def test_vllm_033_mla_block_size_by_backend():
    # vLLM 0.33.0 platforms/cuda.py::_get_backend_priorities with each backend's checks:
    # Hopper: FLASH_ATTN_MLA (kv auto/bf16/fp16; MultipleOf(16) -> 16), FlashMLA for fp8 ([64]);
    # SM 10.x: FLASHINFER_MLA ([32, 64]: 16 unsupported -> the smallest, 32);
    # SM 12.x, Ampere, Ada: TRITON_MLA (MultipleOf(16) -> 16).
    ds = resolve("deepseek-v3")  # the library entry: 61 MLA layers
    expect = {("9.0", "auto"): 16, ("9.0", "fp8"): 64, ("10.0", "auto"): 32,
              ("10.0", "fp8"): 32, ("12.0", "auto"): 16, ("8.0", "auto"): 16,
              ("8.9", "fp8"): 16}
    for (cc, kv), block in expect.items():
        assert vllm.default_block_size(ds, None, vllm.LATEST, kv, cc) == block, (cc, kv)
        config = vllm.VllmConfig(max_model_len=4096, kv_cache_dtype=kv, compute_capability=cc)
        # one MLA group of 61 layers: bytes per block = 61 x block x 576 x dtype bytes
        per_block = 61 * block * 576 * (1 if kv == "fp8" else 2)
        assert vllm.profile(ds, config, 21 * GIB).num_blocks == 21 * GIB // per_block
    # up to 0.32 (the 0.11 rule): FlashMLA 64 on Hopper, CUTLASS MLA 128 on Blackwell
    assert vllm.default_block_size(ds, "H100 SXM", (0, 11, 0), compute_capability="9.0") == 64
    assert vllm.default_block_size(ds, "B200", (0, 11, 0), compute_capability="10.0") == 128


def test_vllm_mla_block_size_by_backend():
    # §1.7 (0.11 rule): FlashMLA (Hopper) 64, CUTLASS MLA (Blackwell) 128; Triton MLA
    # elsewhere keeps 16. 0.33: test_vllm_033_mla_block_size_by_backend.
    spec = model("deepseek-v2-lite")
    old = (0, 11, 0)
    assert vllm.default_block_size(spec, "H100 SXM", old, compute_capability="9.0") == 64
    assert vllm.default_block_size(spec, "B200", old, compute_capability="10.0") == 128
    assert vllm.default_block_size(spec, "L4", old, compute_capability="8.9") == 16
    assert vllm.default_block_size(dense(), "B200", compute_capability="10.0") == 16  # not MLA


def test_vllm_reads_the_gpu_catalogs_compute_capability():
    # config_for passes the catalog's compute_capability (kvplan/data/gpus.yaml, the
    # vendors' CUDA GPU table) through Deployment.compute_capability, and the GPU's own name
    spec = model("deepseek-v2-lite")
    old = (0, 11, 0)
    for name, cc, block in (("h100", "9.0", 64), ("h200 nvl", "9.0", 64), ("b200", "10.0", 128),
                            ("gb200", "10.0", 128), ("l4", "8.9", 16), ("rtx 5090", "12.0", 16),
                            ("a100-80gb", "8.0", 16)):
        gpu = find_gpu(name)
        config = config_for(Deployment(spec, engine_version="0.11.0").with_gpu(gpu))
        assert (config.gpu_name, config.compute_capability) == (gpu.name, cc)
        assert vllm.default_block_size(spec, config.gpu_name, old,
                                       compute_capability=config.compute_capability) == block
    # an AMD gfx target has no CUDA capability: named, it stands for neither Hopper nor
    # Blackwell (Triton MLA's 16), as does a custom GPU known only by its memory
    for gpu in (find_gpu("mi300x"), custom_gpu("80GiB")):
        config = config_for(Deployment(spec, engine_version="0.11.0").with_gpu(gpu))
        assert (config.gpu_name, config.compute_capability) == (gpu.name, None)
        assert capability(config.compute_capability, config.gpu_name) == (8, 0)
        assert vllm.default_block_size(spec, config.gpu_name, old) == 16
    # no GPU at all: Hopper, where most MLA models are served (FlashMLA's 64)
    assert capability(None, None) is None
    assert vllm.default_block_size(spec, None, old) == 64
