"""kvplan whatif: cache policies, prefix reuse, prefill beside decode, offload tiers and the
disaggregated plan. Every expected number is written from the paper's or datasheet's
definition (or a hand formula) in the test, never copied from kvplan's output."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from factories import alternating, dense
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import parse_format
from kvplan.core.errors import BadInputError
from kvplan.core.sizing import request_bytes as exact_request_bytes
from kvplan.planning import compute, policies, whatif

BF16 = parse_format("bf16")
# Llama-3.1-8B shape: 32 layers x 8 KV heads x 128, bf16: K + V per token per layer
TOKEN_LAYER_BYTES = 2 * 8 * 128 * 2
LLAMA_TOKEN_BYTES = 32 * TOKEN_LAYER_BYTES  # 131,072 B/token (the shared README.md reference)
runner = CliRunner()


def _bytes(policy: str, prompt: int, output: int = 0, spec=None, fmt=BF16, block=None) -> int:
    spec = spec or dense()
    return policies.request_bytes(spec.layers, policies.parse_policy(policy), fmt, prompt,
                                  output, block_size=block)


# --- policies -------------------------------------------------------------------------------

def test_streaming_llm_keeps_sinks_plus_recent_window():
    # StreamingLLM: 4 attention sinks + 1,020 recent tokens = 1,024 per layer at 32k
    assert _bytes("sinks+window:4,1020", 32768) == 1024 * LLAMA_TOKEN_BYTES
    # a request shorter than S + W keeps everything
    assert _bytes("sinks+window:4,1020", 700) == 700 * LLAMA_TOKEN_BYTES


def test_h2o_budget_is_fixed_through_generation():
    assert _bytes("budget:2048", 30000, 2000) == 2048 * LLAMA_TOKEN_BYTES


def test_snapkv_compresses_the_prompt_and_appends_generated_tokens():
    # SnapKV: the 8k prompt is compressed to 1,024 (window included), 500 output tokens appended
    assert _bytes("snapkv:1024,window=32", 8192, 500) == (1024 + 500) * LLAMA_TOKEN_BYTES
    assert _bytes("snapkv:1024", 600, 10) == 610 * LLAMA_TOKEN_BYTES


def _pyramid_reference(n: int, beta: int, layers: int, prompt: int, window: int) -> list[int]:
    # KVCache-Factory pyramidkv/pyramidkv_utils.py, PyramidKVCluster.update_kv, transcribed:
    # the prompt tokens layer `layer_idx` keeps (its branches, in order)
    out = []
    for layer_idx in range(layers):
        min_num = (n - window) // beta
        max_num = (n - window) * 2 - min_num
        if max_num >= prompt - window:
            max_num = prompt - window
            min_num = (n - window) * 2 - max_num
        steps = (max_num - min_num) // (layers - 1)
        if prompt < n:
            out.append(prompt)  # "return key_states, value_states": nothing evicted
        elif prompt < (n - window) * 2:
            out.append(n)  # topk(max_capacity_prompt - window_size) + the window
        else:
            out.append(max_num - layer_idx * steps + window)  # topk(layer's) + the window
    return out


def test_pyramidkv_budgets_follow_the_reference_code():
    for prompt in (100, 512, 959, 960, 1000, 32768):
        assert list(policies.pyramid_budgets(512, 20, 32, prompt, 32)) == \
            _pyramid_reference(512, 20, 32, prompt, 32)
    budgets = _pyramid_reference(512, 20, 32, 32768, 32)
    assert budgets[0] > budgets[-1] and budgets[-1] >= 32 + (512 - 32) // 20
    assert _bytes("pyramid:512", 32768) == sum(budgets) * TOKEN_LAYER_BYTES
    # generated tokens are appended to each layer's compressed prompt, as in SnapKV
    assert _bytes("pyramid:512", 32768, 1024) == (sum(budgets) + 32 * 1024) * TOKEN_LAYER_BYTES


def test_pyramidkv_with_output_tokens_appends_them():
    # the case: Llama-3.1-8B, pyramid:512, a 512-token prompt and 1,024 output tokens.
    # prompt < 2(N - W): every layer keeps N = 512 prompt tokens, then appends the 1,024
    # generated ones: 32 layers x 1,536 tokens x 4,096 B = 201,326,592 B (not capped at 999)
    assert _bytes("pyramid:512", 512, 1024) == 32 * (512 + 1024) * 4096 == 201_326_592


def test_cross_layer_sharing_stores_every_kth_layer():
    assert _bytes("share:2", 4096) == 16 * 4096 * TOKEN_LAYER_BYTES  # CLA2: 32 -> 16 caches
    assert _bytes("share:3", 4096) == 11 * 4096 * TOKEN_LAYER_BYTES  # layers 0, 3, ..., 30
    assert _bytes("share:2&budget:2048", 32768) == 16 * 2048 * TOKEN_LAYER_BYTES


def test_cross_layer_sharing_stays_within_one_kind_of_layer():
    # Gemma-2-9B: 21 sliding (window 4,096) and 21 full layers, alternating, 8 KV heads x 256.
    # CLA pairs layers that keep the same tokens: sliding with sliding, full with full, so
    # ceil(21 / 2) = 11 of each kind keep a cache (pairing neighbours would keep 21 sliding
    # layers and no full layer at all)
    spec = alternating(pairs=21, kv_heads=8, head_dim=256, window=4096)
    per_layer_token = 2 * 8 * 256 * 2
    assert _bytes("share:2", 32768, spec=spec) == \
        11 * 4096 * per_layer_token + 11 * 32768 * per_layer_token


def test_turboquant_stores_b_bits_per_coordinate_and_two_norms():
    # TurboQuant (arXiv:2504.19874) Algorithm 2 at b = 3: (b - 1)-bit MSE codes + 1-bit QJL
    # signs per coordinate = 3 x 128 / 8 = 48 B per row, + the residual norm gamma and the
    # row's norm (fp16 each, kvplan's assumption): 52 B per K or V row of 128
    per_token = 32 * 2 * 8 * (3 * 128 // 8 + 2 * 2)
    assert _bytes("turboquant:3", 4096) == 4096 * per_token
    assert _bytes("budget:1024&turboquant:3", 4096) == 1024 * per_token
    assert _bytes("turboquant:3", 4096) * 4 < 4096 * LLAMA_TOKEN_BYTES  # more than 4x smaller


def test_kvtc_leaves_sinks_and_recent_tokens_uncompressed():
    # KVTC (arXiv:2511.01815): 4 sink + 128 recent tokens stay 16-bit, the rest at 1/R
    rest = (32768 - 4 - 128) * LLAMA_TOKEN_BYTES
    assert _bytes("kvtc:20", 32768) == 32 * (-(-(rest // 32) // 20)) + 132 * LLAMA_TOKEN_BYTES
    # each layer's compressed bytes rounded up to a whole byte
    assert _bytes("kvtc:20,sinks=0,window=0", 32768) == \
        32 * -(-(32768 * TOKEN_LAYER_BYTES) // 20)


def test_cachegen_divides_the_cache_by_its_ratio():
    # CacheGen (arXiv:2310.07240): a bitstream R times smaller than the cache it encodes;
    # with an fp8 base (1 byte per element) and R = 4: 32k x 65,536 B / 4
    fmt = parse_format("fp8")
    assert _bytes("cachegen:4", 32768, fmt=fmt) == 32768 * LLAMA_TOKEN_BYTES // 2 // 4
    assert _bytes("cachegen:3.5", 7, fmt=fmt) == 32 * -(-(7 * TOKEN_LAYER_BYTES // 2 * 2) // 7)


def test_budget_at_n_equals_the_exact_baseline_at_n_tokens_in_any_format():
    # law: keeping N tokens of a longer request costs what an N-token request costs, whatever
    # the KV format (KIVI's full-precision residual and group scales included)
    for name in ("bf16", "fp8", "int4:g64", "int2:g32:kivi:r128"):
        fmt = parse_format(name)
        spec = dense()
        assert _bytes("budget:3000", 20000, spec=spec, fmt=fmt) == \
            exact_request_bytes(spec.layers, 3000, fmt)


def test_policies_never_lengthen_a_sliding_window():
    spec = alternating(pairs=21, kv_heads=8, head_dim=256, window=4096)  # Gemma-2-9B shape
    per_layer_token = 2 * 8 * 256 * 2
    # budget 8k: sliding layers keep their 4,096-token window, full layers 8,192
    assert _bytes("budget:8192", 32768, spec=spec) == \
        21 * 4096 * per_layer_token + 21 * 8192 * per_layer_token
    # budget 1k: both kinds keep 1,024
    assert _bytes("budget:1024", 32768, spec=spec) == 42 * 1024 * per_layer_token


def test_paged_policy_rounds_kept_tokens_to_whole_blocks():
    assert _bytes("budget:1000", 32768, block=16) == 1008 * LLAMA_TOKEN_BYTES  # cdiv(1000,16)*16


def test_capacity_is_the_budget_over_paged_request_bytes():
    spec = dense()
    result = policies.evaluate(spec.layers, policies.parse_policy("sinks+window:4,1020"), BF16,
                               32768, 0, block_size=16, kv_budget_bytes=10 * 2**30)
    assert result.baseline_max_requests == 10 * 2**30 // (32768 * LLAMA_TOKEN_BYTES)  # 2
    assert result.max_requests == 10 * 2**30 // (1024 * LLAMA_TOKEN_BYTES)  # 80
    assert "StreamingLLM" in result.citation and "2309.17453" in result.citation


@pytest.mark.parametrize("text", ["", "bogus:1", "budget", "budget:0", "budget:1,2",
                                  "sinks+window:4", "snapkv:10,window=20", "share:2&share:3",
                                  "budget:10&pyramid:10", "pyramid:512,gamma=2", "budget:&",
                                  "pyramid:32", "turboquant:1", "turboquant:3&kvtc:20",
                                  "kvtc:0.5", "cachegen:x", "cachegen:4,sinks=2"])
def test_bad_policies_are_refused_with_the_text(text):
    with pytest.raises(BadInputError):
        policies.parse_policy(text)


# --- prefix reuse ----------------------------------------------------------------------------

def test_prefix_reuse_shares_only_whole_blocks():
    out = _json("llama-3.1-8b", "--kv-memory", "10GiB", "--prompt", "2048", "--output", "512",
                "--shared-prefix", "1000")
    r = out["prefix"]
    # prompt 2,048 + output 512 in 16-token blocks: 160 blocks; a 1,000-token prefix fills 62
    # whole blocks (its last 8 tokens share a block with the request's own tokens)
    assert (r["blocks_per_request"], r["shared_blocks"], r["blocks_per_hit_request"]) == \
        (160, 62, 98)
    blocks = r["capacity_units"]  # 10 GiB // (16 x 131,072 B), less vLLM's null block
    assert blocks == 10 * 2**30 // (16 * LLAMA_TOKEN_BYTES) - 1
    assert r["max_requests_without_reuse"] == blocks // 160
    assert r["max_requests_with_reuse"] == (blocks - 62) // 98
    half = _json("llama-3.1-8b", "--kv-memory", "10GiB", "--prompt", "2048", "--output", "512",
                 "--shared-prefix", "1000", "--hit-rate", "0.5")["prefix"]
    assert half["max_requests_with_reuse"] == int((blocks - 62) / Fraction(98 + 160, 2))


def test_prefix_reuse_on_a_hybrid_model_shares_per_kv_cache_group():
    # Gemma-2-9B on vLLM: a full-attention group and a sliding-window group (4,096) draw from
    # one pool of 16-token blocks. A 1,280-token request holds 80 blocks in the full group and
    # 80 + 1 in the sliding group (SlidingWindowSpec: one block more); the 512-token prefix is
    # 32 whole blocks, still inside the window, so both groups hold it once
    out = _json("gemma-2-9b", "--gpu", "h100", "--prompt", "1k", "--output", "256",
                "--shared-prefix", "512")
    r = out["prefix"]
    assert {n["kind"]: (n["units_per_request"], n["shared_units"]) for n in r["needs"]} == \
        {"full": (80, 32), "window": (81, 32)}
    assert r["blocks_per_request"] == 161 and r["shared_blocks"] == 64
    assert r["max_requests_with_reuse"] == (r["capacity_units"] - 64) // (161 - 64)


def test_prefix_reuse_past_the_window_shares_only_full_attention_blocks():
    # gpt-oss-20b alternates 128-token sliding windows with full attention. At 64k tokens a
    # sliding group holds only its window (vLLM frees the blocks that fall out of it), so the
    # 1,024-token prefix at the start is shared by the full-attention group alone
    out = _json("gpt-oss-20b", "--gpu", "h100", "--prompt", "64k", "--output", "256",
                "--shared-prefix", "1k")
    r = out["prefix"]
    needs = {n["kind"]: n for n in r["needs"]}
    assert needs["window"]["shared_units"] == 0
    assert needs["full"]["shared_units"] == 1024 // out["block_size"]
    assert needs["full"]["units_per_request"] == -(-(65536 + 256) // out["block_size"])


def test_multi_turn_prefill_computes_what_the_cache_lacks():
    # 3 turns of 1,000 tokens in and 200 out, 16-token blocks: turn t's prompt is
    # (t - 1) x 1,200 + 1,000 tokens; the history's whole blocks are cached
    out = _json("llama-3.1-8b", "--gpu", "h100", "--prompt", "1000", "--output", "200",
                "--turns", "3")
    turns = out["multi_turn"]["turns"]
    for t, row in enumerate(turns, start=1):
        history = (t - 1) * 1200
        assert row["prompt_tokens"] == history + 1000
        assert row["cached_tokens"] == history // 16 * 16
        assert row["computed_tokens"] == history + 1000 - history // 16 * 16
        assert row["request_bytes"] == (history + 1200) * LLAMA_TOKEN_BYTES  # exact bytes
    assert out["multi_turn"]["computed_tokens"] == sum(r["computed_tokens"] for r in turns)
    assert out["multi_turn"]["computed_without_reuse_tokens"] == 1000 + 2200 + 3400
    # turn 1 has nothing cached; later turns prefill less than the whole prompt
    assert turns[0]["prefill_s"] == turns[0]["prefill_without_reuse_s"]
    assert turns[2]["prefill_s"] < turns[2]["prefill_without_reuse_s"] / 2


# --- prefill beside decode -------------------------------------------------------------------

def test_keys_attended_closed_forms_match_a_loop():
    sliding = alternating(pairs=1, window=100).layers[0]
    chunked = policies.ChunkedLocal(8, 128, chunk=64)
    for n in (1, 50, 100, 101, 1000):
        assert compute.keys_attended(sliding, n) == sum(min(i, 100) for i in range(1, n + 1))
        assert compute.keys_attended(chunked, n) == sum((i - 1) % 64 + 1 for i in range(1, n + 1))
        assert compute.keys_attended(dense().layers[0], n) == sum(range(1, n + 1))


def test_prefill_flops_and_time_on_h100():
    spec = dense()
    params = 8_030_261_248  # Llama-3.1-8B
    split = compute.ParamSplit(params)
    f = compute.prefill_flops(spec, 1000, split)
    assert f.linear_flops == 2 * params * 1000  # Kaplan et al.: 2N per token
    # 32 layers x 2 x 32 query heads x (128 + 128) x sum_{i<=1000} i
    assert f.attention_flops == 32 * 2 * 32 * 256 * (1000 * 1001 // 2)
    p = compute.prefill(spec, split, 1000, 989_400 * 10**9, "bf16", "given", Fraction(1, 2), 1)
    # H100 SXM whitepaper: 989.4 dense BF16 TFLOP/s, at 50%
    assert p.seconds == pytest.approx(f.total_flops / (989.4e12 * 0.5))
    assert p.gpu_seconds == pytest.approx(f.total_flops / (989.4e12 * 0.5))
    two = compute.prefill(spec, split, 1000, 989_400 * 10**9, "bf16", "given", Fraction(1, 2), 2)
    assert two.seconds == pytest.approx(p.seconds / 2) and two.gpu_seconds == p.gpu_seconds


def test_moe_decode_reads_only_touched_experts():
    # 8 experts, 2 per token, 80 of 100 parameters in routed experts (10 each)
    split = compute.ParamSplit(100, 80, 8, 2)
    assert split.active_params == 20 + 80 * 2 // 8  # 40
    assert split.experts_touched(1) == 2  # one token: its own k experts
    assert split.experts_touched(2) == 8 * (1 - Fraction(6, 8) ** 2)  # 3.5
    assert split.read_fraction(1) == Fraction(20 + 10 * 2, 100)
    assert split.read_fraction(10**6) == pytest.approx(1.0)  # a large batch touches them all


def test_catalog_carries_dense_flops_with_sources():
    from kvplan.sources.gpus import find_gpu

    h100 = find_gpu("h100")
    assert h100.dense_flops_per_s["bf16"] == 989_400 * 10**9  # whitepaper, dense
    assert h100.dense_flops_per_s["fp8"] == 1_978_900 * 10**9  # whitepaper: 1,978.9 TFLOP/s
    assert "whitepaper" in h100.sources["dense_flops_per_s"]
    assert find_gpu("a100-80gb").dense_flops_per_s == {"bf16": 312 * 10**12}


# --- offload and disaggregated serving --------------------------------------------------------

def test_offload_tier_capacity_and_reload_time():
    tier = whatif.parse_tier("host:512GiB@50GB/s")
    assert (tier.capacity_bytes, tier.bandwidth_bytes_per_s) == (512 * 2**30, 50 * 10**9)
    request = 8192 * LLAMA_TOKEN_BYTES  # 1 GiB
    (r,) = whatif.offload_tiers([tier], request, 8192)
    assert r.requests == 512 and r.tokens == 512 * 8192
    assert r.reload_s == pytest.approx(2**30 / 50e9)


@pytest.mark.parametrize("text", ["host:1GB", "host:1GB@10", "host@1GB/s", "h:0GB@1GB/s",
                                  "h:1GB@xGB/s"])
def test_bad_tiers_are_refused(text):
    with pytest.raises(BadInputError):
        whatif.parse_tier(text)


def test_links_are_line_rates():
    assert whatif.parse_link("ib-ndr")[1] == 400 * 10**9 // 8  # NDR: 400 Gb/s
    assert whatif.parse_link("eth-100")[1] == 100 * 10**9 // 8
    assert whatif.parse_link("pcie5")[1] == 32 * 10**9 * 16 * 128 // 130 // 8
    assert whatif.parse_link("25GB/s")[1] == 25 * 10**9
    with pytest.raises(BadInputError):
        whatif.parse_link("warp-drive")


def _json(*args: str) -> dict:
    result = runner.invoke(app, ["whatif", *args, "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_disaggregated_transfer_of_llama_70b_over_ndr():
    out = _json("llama-3.1-70b", "--gpu", "h100", "-n", "4", "--prompt", "4k", "--output",
                "512", "--link", "ib-ndr")
    d = out["disaggregated"]
    per_token = 80 * 2 * 8 * 128 * 2  # Llama-3.1-70B bf16: 327,680 B/token, one copy
    assert d["transfer_bytes"] == 4096 * per_token
    # vLLM's NIXL connector: decode rank i reads its 2 of the 8 KV heads from prefill rank i,
    # each over its own NIC (one 400 Gb/s NDR port per H100): a quarter of the cache per link,
    # 4,096 x 327,680 / 4 / 50e9 = 6.71 ms (not 26.8 ms through one link)
    assert d["per_decode_rank_bytes"] == 4096 * per_token // 4
    assert d["wire_bytes"] == 4096 * per_token  # heads split, nothing replicated
    assert d["transfer_s"] == pytest.approx(4096 * per_token / 4 / 50e9)
    assert d["prefill_gpus_per_decode_gpu"] == pytest.approx(
        d["prefill_gpu_s"] / d["decode_gpu_s"])
    # decode GPU-seconds per request: output tokens x step / batch x the instance's 4 GPUs
    p = out["prefill"]
    assert d["decode_gpu_s"] == pytest.approx(512 * p["decode_step_s"] / p["decode_batch"] * 4)


def test_disaggregated_mla_pulls_a_full_latent_copy_per_decode_rank():
    # DeepSeek-V3's MLA cache is one latent per token (kv_lora_rank 512 + rope 64, bf16), the
    # same on every TP rank (vLLM replicates it): each of 8 decode ranks pulls the whole copy
    out = _json("deepseek-v3", "--gpu", "h200", "-n", "8", "--prompt", "4k", "--output", "256",
                "--link", "ib-ndr")
    d = out["disaggregated"]
    copy = 61 * 4096 * (512 + 64) * 2  # 61 layers; 4,096 is a whole number of blocks
    assert d["transfer_bytes"] == copy
    assert d["per_decode_rank_bytes"] == copy
    assert d["wire_bytes"] == 8 * copy
    assert d["transfer_s"] == pytest.approx(copy / 50e9)  # rank i from rank i, one NIC each


def test_disaggregated_pools_with_different_kv_dtypes_are_refused():
    # vLLM nixl_connector.py NixlConnectorWorker._validate_remote_agent_handshake asserts the
    # remote block length equals the local one "and same dtype": bf16 prefill + fp8 decode fails
    result = runner.invoke(app, ["whatif", "llama-3.1-70b", "--gpu", "h100", "-n", "4",
                                 "--prompt", "4k", "--output", "1k", "--link", "ib-ndr",
                                 "--decode-gpu", "h200", "--decode-kv-dtype", "fp8"])
    assert result.exit_code == 2, result.output
    assert "same dtype" in result.output and "Traceback" not in result.output
    both = _json("llama-3.1-70b", "--gpu", "h100", "-n", "4", "--prompt", "4k", "--output",
                 "1k", "--kv-dtype", "fp8", "--link", "ib-ndr", "--decode-gpu", "h200")
    # fp8 on both sides: 1 byte per element, half of bf16's 327,680 B/token
    assert both["disaggregated"]["transfer_bytes"] == 4096 * 80 * 2 * 8 * 128


def test_cli_policies_rows_and_capacity_with_a_measured_budget():
    out = _json("llama-3.1-8b", "--kv-memory", "10GiB", "--tokens", "32k",
                "-p", "sinks+window:4,1020", "-p", "share:2")
    rows = {p["policy"]: p for p in out["policies"]}
    assert rows["none"]["request_bytes"] == 32768 * LLAMA_TOKEN_BYTES
    assert rows["sinks+window:4,1020"]["max_requests"] == 10 * 2**30 // (1024 * 131072)
    assert rows["share:2"]["request_bytes"] == 16 * 32768 * TOKEN_LAYER_BYTES


@pytest.mark.parametrize("args", [["-p", "bogus"], ["--tier", "host:1GB"], ["--link", "warp"],
                                  ["--hit-rate", "x", "--shared-prefix", "1k"],
                                  ["--hit-rate", "5", "--shared-prefix", "1k"],
                                  ["--hit-rate", "-10%", "--shared-prefix", "1k"],
                                  ["--hit-rate", "0.5"],
                                  ["--tokens", "1k", "--prompt", "1k"],
                                  ["--decode-gpu", "h100"], ["--turns", "0"],
                                  ["-p", "turboquant:3&cachegen:4"]])
def test_cli_bad_input_is_one_message_exit_2(args):
    result = runner.invoke(app, ["whatif", "llama-3.1-8b", "--gpu", "h100", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


# --- real models: published active counts and the decode floor --------------------------------

def test_moe_active_parameters_match_published_figures():
    from kvplan.sources.library import resolve

    # Mistral AI, "Mixtral of experts" (2023-12-11): 46.7B total, 12.9B active per token
    mixtral = compute.param_split(resolve("mixtral-8x7b"))
    assert mixtral.active_params == pytest.approx(12.9e9, rel=0.005)
    # OpenAI gpt-oss model card (2025): 116.83B total, 5.13B active, the input embedding
    # table (201,088 x 2,880) not counted
    oss = compute.param_split(resolve("gpt-oss-120b"))
    assert oss.active_params - 201_088 * 2_880 == pytest.approx(5.13e9, rel=0.01)


def test_prefill_counts_the_head_once_and_no_embedding_lookup():
    from kvplan.sources.library import resolve

    spec = resolve("llama-3.1-70b")
    table = 128_256 * 8_192  # untied: input embeddings and lm_head, each vocab x hidden
    f = compute.prefill_flops(spec, 1000, compute.param_split(spec))
    assert f.linear_flops == 2 * (70_553_706_496 - 2 * table) * 1000 + 2 * table


def test_decode_floor_skips_the_embedding_table_and_unrouted_experts():
    from kvplan.planning import plan
    from kvplan.sources.gpus import find_gpu
    from kvplan.sources.library import resolve

    dep = plan.Deployment(spec=resolve("llama-3.1-70b"), tp=4).with_gpu(find_gpu("h100"))
    cap = plan.capacity(dep)
    d = plan.decode_floor(cap, 1, 1024)
    # bf16 weights, less the untied input table (128,256 x 8,192 params) it only looks up
    table = 128_256 * 8_192
    assert d.weights_read_bytes_per_gpu == int(cap.weights_per_gpu_bytes
                                          * Fraction(70_553_706_496 - table, 70_553_706_496))
    moe = plan.Deployment(spec=resolve("mixtral-8x7b"), tp=2).with_gpu(find_gpu("h100"))
    mcap = plan.capacity(moe)
    one = plan.decode_floor(mcap, 1, 1024).weights_read_bytes_per_gpu
    # batch 1 reads 2 of 8 experts per layer: a quarter of the routed experts
    split = compute.param_split(moe.spec)
    dense = split.total_params - split.routed_expert_params - split.table_params
    expected = Fraction(dense + split.routed_expert_params // 4, split.total_params)
    assert one == int(mcap.weights_per_gpu_bytes * expected)


def test_given_active_params_split_the_experts_a_token_skips():
    from kvplan.sources.library import resolve

    spec = resolve("mixtral-8x7b")
    split = compute.param_split(spec, active_params=12_900_000_000)
    # routed = (total - active) x E / (E - k), E = 8, k = 2
    assert split.routed_expert_params == (spec.num_params - 12_900_000_000) * 8 // 6
    assert split.active_params == pytest.approx(12.9e9, abs=2)


def test_whatif_docs_page_has_not_drifted():
    import importlib.util

    path = ROOT / "scripts" / "whatif_docs.py"
    spec = importlib.util.spec_from_file_location("whatif_docs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.PAGE.read_text() == module.render(), "run: python scripts/whatif_docs.py"


def test_a_kv_format_the_engine_lacks_is_a_what_if_row():
    out = _json("llama-3.1-8b", "--kv-memory", "10GiB", "--tokens", "8k", "--kv-dtype",
                "int4:g64", "-p", "budget:1024")
    rows = out["policies"]
    assert [r["kv_dtype"] for r in rows] == ["bf16", "int4:g64", "int4:g64"]
    assert rows[0]["request_bytes"] == 8192 * LLAMA_TOKEN_BYTES
    # int4 in groups of 64, asymmetric (a bf16 scale and zero point per group):
    # 32 layers x (K, V) x 8 heads x (128 / 2 + 2 groups x (2 + 2)) bytes per token
    assert rows[2]["request_bytes"] == 1024 * 32 * 2 * 8 * (128 // 2 + 2 * (2 + 2))


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_compare_shows_policies_side_by_side_in_every_format(fmt):
    args = ["compare", "llama-3.1-8b", "--kv-memory", "10GiB", "--max-model-len", "32k",
            "--context", "32k", "-p", "sinks+window:4,1020", "-p", "share:2", "-f", fmt]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in ("none", "sinks+window:4,1020", "share:2"):
        assert name in result.stdout
    if fmt == "json":
        rows = {r["policy"]: r for r in json.loads(result.stdout)["rows"]}
        assert rows["sinks+window:4,1020"]["policy_request_bytes"] == 1024 * LLAMA_TOKEN_BYTES
        assert rows["sinks+window:4,1020"]["policy_max_requests"] == \
            10 * 2**30 // (1024 * LLAMA_TOKEN_BYTES)
        assert rows["share:2"]["policy_request_bytes"] == 16 * 32768 * TOKEN_LAYER_BYTES


def test_compare_without_policy_keeps_its_columns():
    # max_model_len 32k: 10 GiB holds one request of it (vLLM starts; exit 0)
    result = runner.invoke(app, ["compare", "llama-3.1-8b", "--kv-memory", "10GiB",
                                 "--max-model-len", "32k", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert "policy" not in result.stdout.splitlines()[0]


@pytest.mark.parametrize("model,total,active", [
    ("deepseek-v3", 671e9, 37e9),  # DeepSeek-V3 technical report: 671B total, 37B activated
    ("kimi-k2", 1.0e12, 32e9),  # Kimi K2 model card: 1T total, 32B activated
    ("qwen3-235b-a22b", 235e9, 22e9),  # Qwen3 model card: 235B total, 22B activated
])
def test_active_parameters_from_the_inventory_match_the_model_cards(model, total, active):
    from kvplan.sources.library import resolve

    split = compute.param_split(resolve(model))
    assert split.total_params == pytest.approx(total, rel=0.03)  # MTP layers not counted
    assert split.active_params == pytest.approx(active, rel=0.03)


def test_pipeline_stages_are_compared_by_bytes_not_by_layer_count():
    # 4 small recurrent layers then 4 full-attention layers, PP 2: both stages have 4 layers;
    # capacity per GPU is bound by the attention stage, whose bytes are far larger
    from factories import FullAttention, ModelSpec, RecurrentState, StateTensor

    state = RecurrentState("mamba2", (StateTensor("conv", (3, 64), 2),))
    spec = ModelSpec("hybrid-pp", (state,) * 4 + (FullAttention(8, 128),) * 4)
    from kvplan.core.sizing import stage_layers

    r = policies.evaluate_stages(stage_layers(spec.layers, 2), policies.parse_policy("budget:1024"),
                                 BF16, 32768, block_size=16)
    # 4 layers x 1,024 kept tokens x (K + V) x 8 heads x 128 x 2 bytes
    assert r.request_bytes == 4 * 1024 * 2 * 8 * 128 * 2


# --- one decode-step model and one prefill model for plan and whatif ------------------------

def _plan_floor(*args: str) -> dict:
    result = runner.invoke(app, ["plan", *args, "-f", "json"])
    assert result.exit_code == 0, result.output
    (rows,) = [v for k, v in json.loads(result.stdout)["tables"].items()
               if k.startswith("Decode floor")]
    return {r["name"]: int(r["value"].replace(",", "")) for r in rows
            if r["name"].endswith("_per_gpu")}


def test_mixtral_batch_1_decode_step_is_the_same_in_plan_and_whatif():
    # Mixtral-8x7B config.json: hidden 4,096, intermediate 14,336, 32 layers, 32 query and 8
    # KV heads of 128, 8 experts (2 per token), vocab 32,000, untied embeddings, bf16
    h, inter, layers, vocab = 4096, 14336, 32, 32000
    attention = 2 * h * h + 2 * h * 8 * 128  # q, o; k, v
    experts = 8 * 3 * h * inter  # w1, w2, w3 per expert
    per_layer = attention + 8 * h + 2 * h + experts  # + router, two norms
    total = layers * per_layer + h + 2 * vocab * h
    assert total == 46_702_792_704  # "46.7B total" (Mixtral of experts, 2023)
    # batch 1 reads 2 of 8 experts per layer and never the input table (it is looked up)
    read_params = total - vocab * h - layers * experts * 6 // 8
    weights_bytes = 2 * read_params
    kv_bytes = layers * 2 * 8 * 128 * 2 * 1024
    out = _json("mixtral-8x7b", "--gpu", "h200", "--tokens", "1k", "--prefill",
                "--decode-batch", "1")
    p = out["prefill"]
    # within 0.01%: the engine's loaded weights also hold buffers (the rotary cos/sin cache)
    # that the step is charged for in the same proportion
    assert p["weights_read_bytes"] == pytest.approx(weights_bytes, rel=1e-4)
    assert p["kv_read_bytes"] == kv_bytes
    # H200: 4.8 TB/s (datasheet); the doubled reduction read 2/8 of 2/8 of the experts
    assert p["decode_step_s"] == pytest.approx((weights_bytes + kv_bytes) / 4.8e12, rel=1e-4)
    plan = _plan_floor("mixtral-8x7b", "--gpu", "h200", "--context", "1k", "--concurrency", "1")
    assert plan == {"weights_read_bytes_per_gpu": p["weights_read_bytes"],
                    "kv_bytes_per_gpu": kv_bytes}


def test_deepseek_v3_batch_1_decode_step_is_the_same_in_plan_and_whatif():
    out = _json("deepseek-v3", "--gpu", "h200", "-n", "8", "--tokens", "1k", "--prefill",
                "--decode-batch", "1")
    p = out["prefill"]
    plan = _plan_floor("deepseek-v3", "--gpu", "h200", "-n", "8", "--context", "1k",
                       "--concurrency", "1")
    assert plan == {"weights_read_bytes_per_gpu": p["weights_read_bytes"],
                    "kv_bytes_per_gpu": p["kv_read_bytes"]}
    # one token reads the ~37B activated parameters (technical report) over 8 GPUs: FP8, 1
    # byte each, except the bf16 output head (129,280 x 7,168, 2 bytes each); the input table
    # of the same size is looked up, not read. Block scales and bf16 norms/router: within 2%
    table = 129_280 * 7_168
    expected = ((37e9 - 2 * table) * 1 + table * 2) / 8
    assert p["weights_read_bytes"] == pytest.approx(expected, rel=0.02)
    # MLA latent (512 + 64) x bf16, 61 layers, replicated on every rank
    assert p["kv_read_bytes"] == 61 * 1024 * (512 + 64) * 2


def test_prefill_on_an_fp8_checkpoint_uses_the_fp8_peak():
    from kvplan.sources.gpus import find_gpu

    out = _json("deepseek-v3", "--gpu", "h200", "-n", "8", "--tokens", "1k", "--prefill")
    p = out["prefill"]
    # DeepSeek-V3 ships FP8 (block-wise) weights; vLLM runs them as FP8 GEMMs on Hopper:
    # H200 datasheet 3,958 FP8 TFLOPS with sparsity = 1,979 dense
    assert p["compute_dtype"] == "fp8" and p["peak_flops_per_s"] == 1_979 * 10**12
    assert p["ttft_s"] == pytest.approx(p["flops"]["total_flops"] / (8 * 1.979e15 * 0.5))
    bf16 = _json("deepseek-v3", "--gpu", "h200", "-n", "8", "--tokens", "1k", "--prefill",
                 "--compute-dtype", "bf16")["prefill"]
    assert bf16["ttft_s"] == pytest.approx(2 * p["ttft_s"], rel=0.001)
    # a bf16 checkpoint keeps the bf16 peak; an A100 (no FP8 tensor cores) runs FP8 weights
    # weight-only, at the bf16 rate
    assert _json("llama-3.1-8b", "--gpu", "h100", "--tokens", "1k",
                 "--prefill")["prefill"]["peak_flops_per_s"] == 989_400 * 10**9
    assert find_gpu("a100-80gb").dense_flops_per_s == {"bf16": 312 * 10**12}


def test_kivi_keeps_l_mod_r_keys_in_full_precision():
    # KIVI (Liu et al., ICML 2024, arXiv:2402.02750) Algorithm 1: KeyQuant splits l key tokens
    # into r = l mod R full-precision tokens and l - r quantized per channel in groups of G;
    # values keep the last R tokens. Llama-3.1-8B head: 8 KV heads x 128, G = 32, R = 128, 2-bit
    fmt = parse_format("int2:g32:kivi:r128")
    heads, dim, n = 8, 128, 1000
    r = n % 128  # 104 keys in bf16 (the old rule kept 128 + (872 mod 32) = 136)
    keys = ((n - r) * heads * dim * 2 // 8  # 2-bit codes
            + heads * dim * ((n - r) // 32) * (2 + 2)  # fp16 scale + zero per channel, group
            + r * heads * dim * 2)  # bf16 residual
    values = (n - 128) * heads * (dim * 2 // 8 + dim // 32 * (2 + 2)) + 128 * heads * dim * 2
    assert fmt.tensor_bytes(n, heads, dim, "key") == keys
    assert fmt.tensor_bytes(n, heads, dim, "value") == values
    with pytest.raises(BadInputError, match="multiple of the group size"):
        parse_format("int2:g32:kivi:r100")
