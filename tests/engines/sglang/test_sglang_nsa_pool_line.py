"""The NSA pool's "KV size" line by release (sglang#11309), and the page SGLang forces on it.

From SGLang's source (the 0.5.3 and 0.5.3.post1 wheels): 0.5.3's NSATokenToKVPool logs
MLATokenToKVPool.get_kv_size_bytes, the latent records alone; 0.5.3.post1's adds its
index_k_with_scale_buffer. Both allocate `size + page_size` rows a buffer, and server_args.py
sets page_size 64 for DeepSeek NSA. DeepSeek-V3.2 at fp8 (forced on Blackwell): 61 layers of
656 B of latent record (512 fp8 + 16 B of scales + 64 x 2 B of rope) and 128 + 4 B of indexer
keys.
"""

from __future__ import annotations

from pathlib import Path

from kvplan.planning.deployment import deployment
from kvplan.planning.plan import capacity

ROOT = Path(__file__).resolve().parents[3]
V32 = str(ROOT / "tests" / "fixtures" / "hf-configs" / "deepseek-ai--DeepSeek-V3.2.json")
LAYERS, LATENT, INDEXER, PAGE = 61, 656, 132, 64


def _tokens(kv_bytes: int, version: str | None) -> int:
    dep = deployment(V32, gpu="b200", count=8, tp=8, dp=8, engine="sglang",
                     engine_version=version, dp_attention=True, kv_memory=kv_bytes)
    return capacity(dep).engine_profile.max_total_num_tokens


def _gb(printed: float) -> int:
    return int(printed * 2**30)  # SGLang's "GB" divides by 2^30


def test_before_the_pr_the_line_counts_the_latent_records_alone():
    # the PR's "With main" line: #tokens: 1462784, KV size: 54.52 GB; its last digit is
    # 0.005 GiB, 134 rows of 61 x 656 B, and the line holds one padding page more
    logged, slack = 1_462_784, 134 + PAGE
    assert abs(_tokens(_gb(54.52), "0.5.3") - logged) <= slack
    # read as the whole pool (the PR's release on), the same bytes hold a sixth fewer tokens
    assert _tokens(_gb(54.52), "0.5.4") < logged * LATENT // (LATENT + INDEXER) + slack


def test_with_the_pr_the_line_counts_the_indexer_keys():
    # "With this PR": #tokens: 975424, KV size: 43.67 GB (111 rows of 61 x 788 B a digit)
    logged, slack = 975_424, 111 + PAGE
    assert abs(_tokens(_gb(43.67), "0.5.4") - logged) <= slack
    assert abs(_tokens(_gb(43.67), None) - logged) <= slack
