"""SGLang's KV cache dtype for a DeepSeek sparse-attention (DSA / NSA) model, by the GPU's
compute capability and the release (kvplan.engines.sglang.engine.dsa_cache_dtype).

Read in the wheels: 0.5.3 and 0.5.4 server_args.py `_handle_model_specific_adjustments` set
kv_cache_dtype to fp8_e4m3 when `torch.cuda.get_device_capability()[0] >= 10`, whatever was
asked; 0.5.5-0.5.12 (`_set_default_nsa_kv_cache_dtype`) and 0.5.16-0.5.23
(arg_groups/overrides.py) turn --kv-cache-dtype auto into "fp8_e4m3" if major >= 10 else
"bfloat16" and keep an explicit one. On ROCm torch reports the gfx target's major (9 for
gfx942 and gfx950), so bfloat16.

The cells, by hand for DeepSeek-V3.2's config.json (61 MLA layers, kv_lora_rank 512,
qk_rope_head_dim 64, index_head_dim 128): bf16 (512 + 64) x 2 = 1,152 B a layer; fp8 the
NSA record kv_lora_rank + kv_lora_rank / 128 x 4 + rope x 2 = 512 + 16 + 128 = 656 B; the
indexer's key 128 fp8 + one fp32 scale = 132 B a layer in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines.base import Deployment
from kvplan.engines.registry import get
from kvplan.engines.sglang.engine import cache_dtype
from kvplan.sources.gpus import find_gpu
from kvplan.sources.hfconfig import load_config_file

ROOT = Path(__file__).parents[3]
BF16_CELL = 61 * (1152 + 132)  # 78,324 B
FP8_CELL = 61 * (656 + 132)  # 48,068 B
KV_MEMORY = 8 * 2**30


def _v32():
    return load_config_file(ROOT / "tests/fixtures/hf-configs/deepseek-ai--DeepSeek-V3.2.json")


def _deployment(gpu: str | None, version: str | None, kv_dtype: str = "auto", spec=None):
    dep = Deployment(spec or _v32(), engine="sglang", engine_version=version,
                     kv_dtype=kv_dtype, kv_memory_bytes=KV_MEMORY)
    return dep if gpu is None else dep.with_gpu(find_gpu(gpu))


def _capacity(gpu: str | None, version: str | None, kv_dtype: str = "auto", spec=None):
    return get("sglang").capacity(_deployment(gpu, version, kv_dtype, spec))


@pytest.mark.parametrize("gpu, version, kv_dtype, fmt, cell", [
    ("h100", "0.5.9", "auto", "bfloat16", BF16_CELL),  # SM 9.0
    ("h200", None, "auto", "bfloat16", BF16_CELL),  # the newest release
    ("a100-80gb", "0.5.12", "auto", "bfloat16", BF16_CELL),  # SM 8.0
    ("b200", "0.5.9", "auto", "fp8_e4m3", FP8_CELL),  # SM 10.0
    ("gb200", "0.5.23", "auto", "fp8_e4m3", FP8_CELL),
    ("rtx-pro-6000", "0.5.9", "auto", "fp8_e4m3", FP8_CELL),  # SM 12.0: major 12 >= 10
    ("mi300x", "0.5.9", "auto", "bfloat16", BF16_CELL),  # ROCm: major 9
    ("mi355x", "0.5.23", "auto", "bfloat16", BF16_CELL),
    # an explicit request is kept from 0.5.5
    ("h100", "0.5.9", "fp8_e4m3", "fp8_e4m3", FP8_CELL),
    ("b200", "0.5.9", "bf16", "bf16", BF16_CELL),
    # 0.5.3-0.5.4: fp8 forced on SM 10 or newer, the request (auto: the model's bf16) before
    ("b200", "0.5.4", "bf16", "fp8_e4m3", FP8_CELL),
    # a budget given as 0.5.3's pool line, which leaves out the indexer keys (sglang#11309)
    ("h100", "0.5.3", "auto", "auto", 61 * 1152),
])
def test_sglang_dsa_kv_dtype_by_compute_capability(gpu, version, kv_dtype, fmt, cell):
    assert cache_dtype(_deployment(gpu, version, kv_dtype)) == fmt
    cap = _capacity(gpu, version, kv_dtype)
    # kvplan's names: the NSA fp8 record is fp8_ds_mla
    assert cap.kv_format == ("fp8_ds_mla" if cell == FP8_CELL else "bf16")
    assert cap.engine_profile.cell_size_bytes == cell
    # in 64-token pages: server_args.py sets page_size 64 for DeepSeek NSA (0.5.3 on; 1 on ROCm)
    page = 1 if gpu.startswith("mi") else 64
    assert cap.engine_profile.max_total_num_tokens == KV_MEMORY // cell // page * page


def test_a_dense_mla_model_keeps_auto():
    # DeepSeek-V3 (no indexer): the rule is the DSA models' alone
    spec = load_config_file(ROOT / "tests/fixtures/hf-configs/deepseek-ai--DeepSeek-V3.json")
    cap = _capacity("b200", "0.5.9", spec=spec)
    assert cap.engine_profile.cell_size_bytes == 61 * (512 + 64) * 2


def test_a_gpu_of_unknown_capability_is_said():
    # a GPU given by its memory alone: SGLang's pick is not known, the request is kept and said
    dep = Deployment(_v32(), engine="sglang", engine_version="0.5.9",
                     kv_memory_bytes=KV_MEMORY, gpu_memory_bytes=96 * 2**30)
    cap = get("sglang").capacity(dep)
    assert cap.engine_profile.cell_size_bytes == BF16_CELL
    assert any("compute capability" in n and "--kv-cache-dtype" in n for n in cap.notes)
    # a catalog GPU or an explicit dtype: no note
    assert not any("compute capability" in n for n in _capacity("h100", "0.5.9").notes)
    assert not any("compute capability" in n
                   for n in _capacity(None, "0.5.9", kv_dtype="fp8_e4m3").notes)


def test_the_profile_counts_the_indexer_from_0_5_3_post1():
    # model_runner.py profile_max_num_token: 0.5.3's MLA cell is (kv_lora_rank +
    # qk_rope_head_dim) x layers x element size = 61 x 1,152 B in bf16; the 0.5.3.post1 and
    # 0.5.4 wheels add the NSA indexer's index_head_dim + index_head_dim // 128 x 4 = 132 B a
    # layer (sglang#11309). The same free-memory readings (before the load 70 GiB, after it
    # 40 GiB, mem_fraction_static 0.9: rest = 40 - 70 x 0.1 = 33 GiB) on an H100 (bf16) give
    # rest // cell tokens, in 64-token pages
    engine = get("sglang")
    readings = {"free_before_load_bytes": 70 * 2**30, "free_after_load_bytes": 40 * 2**30}
    rest = 33 * 2**30
    for version, cell in (("0.5.3", 61 * 1152), ("0.5.4", BF16_CELL)):
        dep = Deployment(_v32(), engine="sglang", engine_version=version,
                         memory_fraction=0.9).with_gpu(find_gpu("h100"))
        cap = engine.capacity_from_readings(dep, readings)
        assert cap.engine_profile.max_total_num_tokens == rest // cell // 64 * 64, version
    # 0.5.3 counts 1,152 of the 1,284 B a layer the pool allocates: 11.5% more tokens
    assert 33 * 2**30 // (61 * 1152) // 64 * 64 == 504_192
