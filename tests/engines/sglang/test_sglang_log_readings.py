"""SGLang's pool from the free memory its start-up log prints (SglangEngine.
capacity_from_readings, through `kvplan explain`), on the real logs of tests/fixtures/logs/sglang/.

SGLang sizes its pool as `rest = avail_after_load - avail_before_load x (1 - mem_fraction_static)`
(GB = 2^30, the least over the ranks), then `int(rest x 2^30 // cell)` tokens
(model_executor/model_runner.py profile_max_num_token; 0.5.23 KVCacheConfigurator.
_profile_available_bytes). Each test writes the readings, the fraction and the cell as the log
and the model's config.json give them, computes the tokens by that rule by hand, and holds
kvplan to it exactly and the logged #tokens to it within the readings' printed precision: two
decimals of GB, half a unit (0.005 GB) either way on each reading, so
`(0.005 + 0.005 x (1 - f)) x 2^30 / cell` tokens, plus one for the floor.
"""

from __future__ import annotations

import math

import pytest
from paths import FIXTURES, ROOT

from kvplan.planning.explain import explain

LOGS = FIXTURES / "logs" / "sglang"
GIB = 2**30
HALF_UNIT_GB = 0.005  # the readings print two decimals of GB


def _cell(kv_heads_per_rank: int, head_dim: int, layers: int, dtype_bytes: int) -> int:
    """Bytes of one token on one GPU over its layers: K and V of every KV head."""
    return kv_heads_per_rank * head_dim * 2 * layers * dtype_bytes


def _tolerance(fraction: float, cell: int) -> int:
    return math.ceil(HALF_UNIT_GB * (1 + (1 - fraction)) * GIB / cell) + 1


def _hand(before_gb: float, after_gb: float, fraction: float, cell: int) -> int:
    # the readings as kvplan holds them (whole bytes), the rule as SGLang computes it
    before, after = round(before_gb * GIB), round(after_gb * GIB)
    return int((after / GIB - before / GIB * (1 - fraction)) * GIB // cell)


def _row(name: str, **given):
    result = explain((LOGS / f"{name}.log").read_text(encoding="utf-8"), **given)
    rows = [r for r in result.rows if r.basis == "from settings"
            and r.quantity == "max_total_num_tokens"]
    return (rows[0] if rows else None), result


# (log, explain's arguments, avail before, avail after, mem_fraction_static, cell, #tokens):
# the readings, fraction and token count as the log prints them (TP 2: the least of the two
# ranks' readings, TP0's 18.73 / 17.22 against TP1's 19.15 / 17.64); the cells from each
# model's config.json
CASES = [
    # SGLang 0.4.1 docs run on an H100: Llama 3.1 8B, 8 KV heads, 128, 32 layers, bf16
    ("sglang-docs-llama31-8b-h100-2025-01",
     {"model": str(ROOT / "tests/fixtures/engines/models/llama-3.1-8b.yaml")},
     78.81, 63.72, 0.88, _cell(8, 128, 32, 2), 444500),
    # 0.4.6.post2 under WSL: Qwen3-0.6B, 8 KV heads, 128, 28 layers, bf16
    ("sglang-qwen3-0.6b-wsl-0.4.6",
     {"model": str(ROOT / "tests/fixtures/engines/models/qwen3-0.6b.yaml")},
     3.23, 2.03, 0.88, _cell(8, 128, 28, 2), 15387),
    # 2026-03, TP 2, fp16: Qwen3-14B, 8 KV heads over 2 ranks, 128, 40 layers
    ("sglang-tianyang-qwen3-14b-tp2-fp16-cpuoffload", {},
     18.73, 17.22, 0.65, _cell(4, 128, 40, 2), 139814),
    # 2026-02, mem_fraction_static 0.2: Llama 3.2 3B, 8 KV heads, 128, 28 layers, bf16
    ("sglang-udbhav-llama32-3b-mf02-hicache", {},
     44.11, 37.97, 0.2, _cell(8, 128, 28, 2), 25169),
]


@pytest.mark.parametrize(("name", "given", "before", "after", "fraction", "cell", "logged"),
                         CASES, ids=[c[0] for c in CASES])
def test_tokens_from_the_logged_readings(name, given, before, after, fraction, cell, logged):
    row, _ = _row(name, **given)
    assert row is not None
    hand = _hand(before, after, fraction, cell)
    assert row.logged == logged
    assert row.kvplan == hand
    assert abs(logged - hand) <= _tolerance(fraction, cell)
    assert "the logged figure is within it" in row.note


def test_the_readings_are_gib_and_the_least_over_the_ranks():
    from kvplan.planning.explain import reading_formats
    from kvplan.sources.startlog import read_log

    text = (LOGS / "sglang-tianyang-qwen3-14b-tp2-fp16-cpuoffload.log").read_text(
        encoding="utf-8")
    facts = read_log(text, reading_formats())
    # GB is 2^30 bytes: get_available_gpu_memory returns free bytes / (1 << 30)
    # (srt/utils/common.py); TP0's readings are the lower of the two ranks'
    assert facts.terms["free_before_load_bytes"] == round(18.73 * 2**30)
    assert facts.terms["free_after_load_bytes"] == round(17.22 * 2**30)
    assert "TP0" in facts.lines["free_after_load_bytes"]
    # a higher rank's lower reading is the one SGLang takes (an all_reduce MIN)
    two = ("[TP0] Load weight begin. avail mem=20.00 GB\n"
           "[TP1] Load weight begin. avail mem=19.50 GB\n"
           "[TP0] KV Cache is allocated. #tokens: 1000, K size: 0.10 GB, V size: 0.10 GB\n")
    facts = read_log(two, reading_formats())
    assert facts.terms["free_before_load_bytes"] == round(19.5 * 2**30)
    assert facts.lines["free_before_load_bytes"].startswith("[TP1]")


def test_the_h100_log_with_the_default_fraction():
    # 2026-08 on an H100 (its source names NVIDIA_H100_80GB_HBM3), no mem_fraction_static
    # printed: 0.5.23's default from the GPU's memory. Qwen3-30B-A3B, 4 KV heads, 128, 48
    # layers, bf16 KV. The logged 392,920 tokens are rest = 35.97 GB, which no three-decimal
    # fraction gives from 78.48 / 49.33 within their precision; the default is held to 5%.
    row, result = _row("sglang-h100-qwen3-30b-a3b-fp8-2026-08", model="qwen3-30b-a3b",
                       gpu="H100")
    assert row is not None and row.logged == 392920
    # 0.5.23's default on an H100 (81,089 MB), by hand: (MB - (512 + 8,192 x 1.5 + 128 +
    # 2 x 256 + 58 x 8)) / MB to three decimals (tests/engines/sglang/test_sglang_memory.py)
    fraction = 0.829
    assert f"mem_fraction_static {fraction}" in row.note
    assert row.kvplan == _hand(78.48, 49.33, fraction, _cell(4, 128, 48, 2))
    assert abs(row.kvplan - 392920) / 392920 < 0.05
    assert "gpu_memory_utilization" in result.unprinted


def test_a_missing_reading_is_named_by_its_line():
    # the 2025-07 log starts at "Load weight end": the reading before the load is missing
    row, result = _row("sglang-llama31-8b-24gb-2025-07", model="llama-3.1-8b")
    assert row is None
    assert any("'Load weight begin'" in n and "free_before_load_bytes" in n
               for n in result.notes)


def test_no_fraction_and_no_gpu_is_said():
    # the 2025-03 QwQ log prints both readings but neither mem_fraction_static nor its GPU
    row, result = _row("sglang-doc-qwq-32b-tp4-24gb",
                       model=str(ROOT / "tests/fixtures/engines/models/qwq-32b.yaml"))
    assert row is None
    assert any("no budget from the logged free memory" in n and "no mem_fraction_static" in n
               for n in result.notes)


def test_the_fraction_by_release_without_a_gpu():
    # with its release given (0.4.3, March 2025), the same log takes the per-TP default of the
    # classic releases: TP 4 -> 0.85 (server_args.py), no GPU needed. QwQ-32B: 8 KV heads over
    # 4 ranks, 128, 64 layers, bf16
    row, result = _row("sglang-doc-qwq-32b-tp4-24gb", engine_version="0.4.3",
                       model=str(ROOT / "tests/fixtures/engines/models/qwq-32b.yaml"))
    assert row is not None and row.logged == 46611
    cell = _cell(2, 128, 64, 2)
    assert row.kvplan == _hand(21.63, 6.09, 0.85, cell)
    assert abs(46611 - row.kvplan) <= _tolerance(0.85, cell)
    assert result.unprinted == ("gpu_memory_utilization",)
