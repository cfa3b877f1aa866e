"""SGLang's token and state pools (kvplan.engines.sglang.pools) against the real logs of
tests/fixtures/engines/engine-logs.yaml and the worked numbers of docs/engine-kv-sizing.md:
the logged settings (and the logged budget, where the log gives one) go in, and the
logged token count, block count and concurrency must come out within 0.5% (engine_cases.close).
"""

from __future__ import annotations

import pytest
from engine_cases import BY_ID, GIB, close, gib, model
from factories import FullAttention, ModelSpec, SlidingWindow, dense, hybrid, mla

from kvplan.engines import sglang
from kvplan.sources.families import with_family_facts
from kvplan.sources.library import resolve


def test_sglang_qwq32b_tp4_classic_mem_fraction():
    e = BY_ID["sglang-doc-qwq-32b-tp4-24gb"]["reported"]
    from kvplan.engines.sglang import sglang_default_mem_fraction

    # The server_args line with mem_fraction_static was not captured; SGLang of March 2025
    # used the per-TP table: TP 4 -> 0.85. rest = 6.09 - 21.63 x 0.15 GB.
    fraction = sglang_default_mem_fraction(0, tp=4, version=(0, 4, 3))
    assert fraction == 0.85
    p = sglang.profile(model("qwq-32b"), sglang.SglangConfig(tp=4),
                       gib(e["avail_mem_before_weights_gb"]),
                       gib(e["avail_mem_after_weights_gb"]), fraction)
    assert p.cell_size_bytes == 64 * 2 * (128 + 128) * 2  # 2 KV heads per rank
    assert p.max_total_num_tokens == int(gib(6.09) - gib(21.63) * 0.15) // 65536 == 46620
    assert close(p.max_total_num_tokens, e["kv_cache_tokens"])
    assert f"{p.k_size_bytes / GIB:.2f}" == f"{e['k_size_gb']:.2f}"
    assert f"{p.v_size_bytes / GIB:.2f}" == f"{e['v_size_gb']:.2f}"


def test_sglang_qwen3_235b_tp4_k_size_from_tokens():
    e = BY_ID["sglang-i21348-qwen3-235b-fp8-4xh100-tp4"]["reported"]
    # Only the token count and K/V sizes are logged (no free-memory readings), so the
    # token count is fed back as --max-total-tokens and the buffer sizes recomputed:
    # 94 layers x (N + 1 padding page) x 1 KV head per rank x 128 x 2 bytes.
    config = sglang.SglangConfig(tp=4, max_total_tokens=e["kv_cache_tokens"])
    p = sglang.profile(model("qwen3-235b-a22b"), config, 80 * GIB, 70 * GIB, 0.93)
    assert p.max_total_num_tokens == e["kv_cache_tokens"]
    assert p.k_size_bytes == 94 * (367404 + 1) * 1 * 128 * 2
    assert f"{p.k_size_bytes / GIB:.2f}" == "8.23" == f"{e['k_size_gb']:.2f}"
    assert "K size: 8.23 GB, V size: 8.23 GB" in p.log_line()


def test_sglang_worked_example_llama8b():
    # docs/engine-kv-sizing.md §2.1: free 79.0 GB before, 62.5 after, 0.9 -> 447,283 tokens;
    # K = V = 27.30 GB.
    p = sglang.profile(dense(), sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9)
    assert p.cell_size_bytes == 8 * (128 + 128) * 32 * 2 == 131072
    # rest = 62.5 - 79.0 x (1 - 0.9) = 54.6 GiB; int(54.6 x 2^30) // 131,072
    assert p.max_total_num_tokens == int((62.5 - 79.0 * 0.1) * GIB) // 131072 == 447283
    # K buffer: 32 layers x (N + 1 page) x 8 heads x 128 x 2 B
    assert p.k_size_bytes == 32 * (447283 + 1) * 8 * 128 * 2
    assert f"{p.k_size_bytes / GIB:.2f}" == "27.30"


def test_sglang_page_size_rounds_down_and_mla_cell():
    p = sglang.profile(dense(), sglang.SglangConfig(page_size=64), gib(79.0), gib(62.5), 0.9)
    assert p.max_total_num_tokens == 447283 // 64 * 64
    m = sglang.profile(mla(), sglang.SglangConfig(tp=8), gib(79.0), gib(62.5), 0.9)
    assert m.cell_size_bytes == 61 * 576 * 2  # no x2, not divided by TP
    assert m.v_size_bytes == 0 and "KV size" in m.log_line()


def test_sglang_page_padding_and_heads_floor():
    # §2.3: every buffer holds N + page_size rows: 32 layers x (N + 64) x 8 heads x 128 x 2 B
    p = sglang.profile(dense(), sglang.SglangConfig(page_size=64), gib(79.0), gib(62.5), 0.9)
    tokens = 447283 // 64 * 64
    assert p.k_size_bytes == p.v_size_bytes == 32 * (tokens + 64) * 8 * 128 * 2
    # §2.1: KV heads per rank max(1, 8 // 16) = 1 at TP 16, not half a head
    p16 = sglang.profile(dense(heads=64), sglang.SglangConfig(tp=16), gib(79.0), gib(62.5), 0.9)
    assert p16.cell_size_bytes == 1 * (128 + 128) * 32 * 2


def test_sglang_hybrid_swa_and_mamba():
    pair = (SlidingWindow(8, 64, window=128), FullAttention(8, 64))
    gpt_oss = with_family_facts(ModelSpec("gpt-oss-120b", pair * 18, family="gpt_oss",
                                          num_attention_heads=64))
    p = sglang.profile(gpt_oss, sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9)
    # cell = 36,864 + 0.8 x 36,864 = 66,355.2 B/token (docs/engine-kv-sizing.md §2.4)
    full_tokens = int(int((62.5 - 79.0 * 0.1) * GIB) // 66355.2)
    assert p.max_total_num_tokens == full_tokens
    assert p.swa_max_total_num_tokens == int(full_tokens * 0.8)
    # Gemma-style models are not in SGLang's hybrid-SWA list: sliding layers get full KV
    gemma = with_family_facts(ModelSpec("gemma", pair * 18, family="gemma2",
                                        num_attention_heads=64))
    assert sglang.profile(gemma, sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9) \
        .swa_max_total_num_tokens is None
    # Qwen3-Next GDN state with SGLang's float32 SSM state: 2,146,304 B per layer per slot
    gdn = hybrid().layers[0]
    assert sglang.mamba_state_bytes(gdn, 1, 4) == 3 * 8192 * 2 + 32 * 128 * 128 * 4
    h = sglang.profile(hybrid(), sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9)
    assert h.mamba_state_bytes_per_request == 36 * 2146304 == 77266944
    # §2.4 _handle_max_mamba_cache: budget = rest x r / (1 + r), r = 0.9;
    # max_mamba_cache_size = (budget - per_req) // per_req; the pool holds that + 1 slots
    rest = gib(62.5) - gib(79.0) * 0.1
    slots = int(rest * 0.9 / 1.9 - 77266944) // 77266944
    assert h.max_mamba_cache_size == slots == 358
    # the KV tokens come from what the Mamba pool leaves: 12 attention layers x 2 x 2 x 256 x 2
    assert h.max_total_num_tokens == (int(rest) - (slots + 1) * 77266944) // (12 * 2 * 2 * 256 * 2)


def test_sglang_refuses_a_budget_without_one_mamba_slot():
    """SGLang 0.5.23 `KVCacheConfigurator._handle_max_mamba_cache` raises "Not enough GPU
    memory for hybrid (mamba/linear-attention) state cache" when max_mamba_cache_size <= 0;
    kvplan planned 0 slots and 59,376 tokens. Figures from SGLang 0.5.23 itself
    (`bash tests/oracle_sglang/run.sh --model nemotron-h-56b`: its ServerArgs, ModelConfig,
    `_handle_max_mamba_cache` and `config_from_budget` on the model's config.json): at
    3 GiB + 123,456,789 B it refuses ("max_mamba_cache_size=0 ... mamba_cache_per_req=870.33
    MB"); at 21 GiB, page 16, bf16 it gives 10 state slots and 305,408 tokens."""
    from kvplan.api import deploy
    from kvplan.core.errors import NoKVMemoryError

    spec = resolve("nemotron-h-56b")
    with pytest.raises(NoKVMemoryError, match="state pool gets no request slot"):
        _ = deploy(spec, gpu="h100", engine="sglang", kv_memory=3 * GIB + 123_456_789,
                   block_size=16).capacity
    p = deploy(spec, gpu="h100", engine="sglang", kv_memory=21 * GIB,
               block_size=16).capacity.engine_profile
    assert (p.max_mamba_cache_size, p.max_total_num_tokens) == (10, 305_408)
