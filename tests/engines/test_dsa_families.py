"""DeepSeek sparse attention (DSA) beyond DeepSeek-V3.2: GLM-5's real config.json
(tests/fixtures/hf-configs/zai-org--GLM-5.json, model_type glm_moe_dsa,
GlmMoeDsaForCausalLM) sized as vLLM 0.33 and SGLang allocate it, the bytes derived by hand
from the engines' source.

vLLM 0.33: every class whose config has `index_topk` runs the sparse MLA backend
(model_executor/models/deepseek_v2.py `is_v32 = hasattr(config, "index_topk")`, the
vllm/models/deepseek_v32 package serving GlmMoeDsaForCausalLM); its fp8 cache is the
fp8_ds_mla record, per token and layer 512 fp8 latent values + 4 fp32 scales (one per 128)
+ 64 bf16 rope values = 512 + 16 + 128 = 656 B, and the indexer keeps its own cache of
index_head_dim fp8 values + one fp32 scale per 128 = 128 + 4 = 132 B.
SGLang (configs/model_config.py is_deepseek_dsa, GlmMoeDsaForCausalLM listed): the DSA token
pool holds the same 656 B record and the indexer's k buffer the same 132 B.
"""

from __future__ import annotations

import json
from dataclasses import replace

import paths

from kvplan.core import weights
from kvplan.engines import vllm
from kvplan.engines.sglang import pools
from kvplan.engines.sglang.memory import rules_for
from kvplan.sources.families import with_family_facts
from kvplan.sources.hfconfig import load_config_file

GLM5 = paths.FIXTURES / "hf-configs" / "zai-org--GLM-5.json"
LAYERS = 78  # num_hidden_layers (the MTP layer is the drafter's, not the target's pool)
FP8_DS_MLA_RECORD = 512 + 512 // 128 * 4 + 64 * 2  # 656
INDEXER_KEY = 128 + 128 // 128 * 4  # index_head_dim 128: 132
DENSE_FP8_LATENT = 512 + 64  # a plain MLA cache at fp8: 576


def test_glm5_is_sparse_mla_from_its_indexer_keys():
    spec = load_config_file(GLM5)
    assert spec.traits.sparse_mla
    # the same model under a family name kvplan does not list is still sparse: the engines
    # decide by the config's index_topk, which the reader turned into indexer layers
    renamed = with_family_facts(replace(spec, family="some_future_dsa"))
    assert renamed.traits.sparse_mla


def test_glm5_vllm_pages():
    spec = load_config_file(GLM5)
    config = vllm.VllmConfig(max_model_len=8192, kv_cache_dtype="fp8")
    (stage,) = vllm.layout(spec, config)
    assert stage.per_token_bytes == LAYERS * (FP8_DS_MLA_RECORD + INDEXER_KEY) == 61464
    # auto keeps the model dtype: 0.33 maps only quantized dtypes to fp8_ds_mla, and the
    # auto -> fp8_ds_mla hook is DeepseekV32ForCausalLM's (0.11.0), not GLM-5's
    (auto,) = vllm.layout(spec, vllm.VllmConfig(max_model_len=8192))
    assert auto.per_token_bytes == LAYERS * ((512 + 64) * 2 + INDEXER_KEY)
    # the sparse MLA kernel's 64-token block, over the latent and the indexer-key layers
    assert [(g.block_size, g.page_bytes) for g in stage.groups] == \
        [(64, 64 * LAYERS * (FP8_DS_MLA_RECORD + INDEXER_KEY))]


def test_glm5_sglang_pool_matches_the_logged_record():
    # tests/fixtures/logs/sglang/sglang-glm5-fp8-mi355x-tp8-0.5.8.post1.log: "KV Cache is
    # allocated. #tokens: 3262823, KV size: 186.77 GB" over 78 layers is 788 B a layer
    logged = 186.77 * 2**30 / 3262823 / LAYERS
    assert round(logged) == FP8_DS_MLA_RECORD + INDEXER_KEY == 788
    assert abs(logged - 788) < 0.01 * 2**30 / 3262823 / LAYERS  # within the printed 0.01 GB
    spec = load_config_file(GLM5)
    config = pools.SglangConfig(tp=8, kv_cache_dtype="fp8_e4m3")
    gib = 2**30
    prof = pools.profile(spec, config, 200 * gib, 100 * gib, 0.5)
    assert prof.cell_size_bytes == LAYERS * 788 != LAYERS * (DENSE_FP8_LATENT + INDEXER_KEY)
    assert prof.k_size_bytes == (prof.max_total_num_tokens + 1) * LAYERS * 788


# the log's readings (the least over the ranks) and the fraction SGLang picked for a 288 GB
# MI355X at TP 8 (0.908; the log prints none)
BEFORE_GB, AFTER_GB, FRACTION = 283.48, 193.90, 0.908
LOGGED_TOKENS, LOGGED_KV_GB = 3262823, 186.77


def test_sglang_before_0_5_17_counts_the_dense_latent_but_allocates_the_record():
    # 0.5.8.post1 model_runner_kv_cache_mixin.py get_cell_size_per_token: (kv_lora_rank +
    # qk_rope_head_dim) x layers x 1 B (fp8) + the indexer's 132 B x layers; the NSA pool
    # then allocates the 656 B record (0.5.17's pool_configurator.py counts the record)
    assert not rules_for((0, 5, 16)).dsa_profile_record
    assert rules_for((0, 5, 17)).dsa_profile_record and rules_for(None).dsa_profile_record
    rest_gb = AFTER_GB - BEFORE_GB * (1 - FRACTION)
    counted_cell = LAYERS * (DENSE_FP8_LATENT + INDEXER_KEY)  # 55,224 B
    hand_tokens = int(rest_gb * 2**30 // counted_cell)
    # 163 tokens (9 MB) above the log: SGLang measures the free memory again when it sizes
    # the pool, after the printed 'Load weight end' reading; the 788 B a token the pool
    # record would give is 10.2% off instead
    assert abs(hand_tokens - LOGGED_TOKENS) / LOGGED_TOKENS < 1e-4
    assert abs(int(rest_gb * 2**30 // (LAYERS * 788)) - LOGGED_TOKENS) / LOGGED_TOKENS > 0.1
    spec = load_config_file(GLM5)
    gib = 2**30
    old = pools.SglangConfig(tp=8, kv_cache_dtype="fp8_e4m3", dsa_profile_record=False)
    prof = pools.profile(spec, old, round(BEFORE_GB * gib), round(AFTER_GB * gib), FRACTION)
    assert abs(prof.max_total_num_tokens - hand_tokens) <= 1
    # "KV size" is the pool as allocated: every row the 788 B record, one padding row more
    assert prof.k_size_bytes == (prof.max_total_num_tokens + 1) * LAYERS * 788
    assert round((LOGGED_TOKENS + 1) * LAYERS * 788 / gib, 2) == LOGGED_KV_GB
    assert abs(prof.k_size_bytes / gib - LOGGED_KV_GB) / LOGGED_KV_GB < 1e-4
    new = pools.SglangConfig(tp=8, kv_cache_dtype="fp8_e4m3")
    newer = pools.profile(spec, new, round(BEFORE_GB * gib), round(AFTER_GB * gib), FRACTION)
    assert abs(newer.max_total_num_tokens - rest_gb * gib // (LAYERS * 788)) <= 1


def test_glm5_parameters_match_the_published_count(tmp_path):
    # the GLM-5 technical report (arXiv:2602.15763, its architecture table): 744B total
    # parameters, the one MTP layer not counted (as DeepSeek-V3's 671B leaves out its MTP
    # module); "744B" is three figures, so within 0.5B
    raw = json.loads(GLM5.read_text(encoding="utf-8"))
    raw["num_nextn_predict_layers"] = 0
    config = tmp_path / "config.json"
    config.write_text(json.dumps(raw), encoding="utf-8")
    total = weights.inventory(load_config_file(config)).total_params
    assert abs(total - 744 * 10**9) <= 0.5 * 10**9
    # the MTP layer (one more decoder layer of 256 experts) is about 1.6% more
    with_mtp = weights.inventory(load_config_file(GLM5)).total_params
    assert 10 * 10**9 < with_mtp - total < 13 * 10**9
