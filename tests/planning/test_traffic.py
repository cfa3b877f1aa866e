"""kvplan plan --rate: replicas from a request rate, a mix and latency targets. Every expected
figure is worked by hand in the test from the model's shapes, the H100 datasheet and Little's
law; kvplan's engine pool size (tested against real engine logs elsewhere) is read as input."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()

# Llama-3.1-70B (config.json): 80 layers, 64 query heads and 8 KV heads of 128, vocab 128,256,
# hidden 8,192, untied embeddings, bf16; 70,553,706,496 parameters
PARAMS = 70_553_706_496
TABLE = 128_256 * 8_192
TOKEN_BYTES = 80 * 2 * 8 * 128 * 2  # 327,680 B per token, all four ranks together
H100_BW = 3_350_000_000_000  # H100 SXM datasheet: 3.35 TB/s
H100_BF16 = 989_400 * 10**12 // 1000  # whitepaper: 989.4 dense BF16 TFLOP/s


def _run(*args: str) -> dict:
    result = runner.invoke(app, ["plan", *args, "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _frac(text: str) -> Fraction:
    return Fraction(text)


def test_worked_example_llama_70b_on_4_h100():
    # the example docs/whatif.md works by hand: 20 requests/s of 2,048 + 256 tokens, TTFT 1 s,
    # ITL 40 ms, replicas of TP 4 on H100 SXM under vLLM
    t = _run("llama-3.1-70b", "--gpu", "h100", "-n", "4", "--rate", "20", "--requests",
             "2k+256", "--ttft", "1s", "--itl", "40ms")
    # Little's law: W = 1 + 256 x 0.040 = 11.24 s; L = 20 x 11.24 = 224.8 requests
    assert _frac(t["time_in_system_s"]) == Fraction(1) + 256 * Fraction(40, 1000)
    assert _frac(t["in_flight"]) == Fraction(2248, 10)
    assert _frac(t["in_flight_prefill"]) == 20 * 1
    assert _frac(t["in_flight_decode"]) == 20 * 256 * Fraction(40, 1000)  # 204.8
    # memory: each request holds cdiv(2,304, 16) = 144 blocks of the replica's pool
    blocks = t["capacity_units_per_replica"]
    assert _frac(t["units_per_request"]) == 144
    assert _frac(t["memory_share"]) == Fraction(2248, 10) * 144 / blocks
    assert t["replicas_by_memory"] == math.ceil(Fraction(2248, 10) * 144 / blocks)
    assert t["kv_bytes_in_flight"] == round(Fraction(2248, 10) * 2304 * TOKEN_BYTES)
    # decode: the batch sees 2,048 + 256 / 2 = 2,176 tokens on average; each GPU reads its
    # quarter of the weights less the input table it only looks up, and its quarter of the cache
    ctx = 2048 + 128
    assert t["decode_context_tokens"] == ctx
    # (within 0.2%: each GPU also holds replicated norms and the rotary cache, as loaded)
    weights = t["decode"]["weights_read_bytes_per_gpu"]
    assert weights == pytest.approx((PARAMS - TABLE) * 2 / 4, rel=2e-3)
    per_request = ctx * TOKEN_BYTES // 4

    def step(batch: int) -> Fraction:
        return Fraction(weights + batch * per_request, H100_BW)

    # B*: the largest batch whose step meets 40 ms, and that fits the pool at 2,176 tokens
    # (cdiv(2,176, 16) = 136 blocks each)
    fits = blocks // 136
    by_itl = (Fraction(40, 1000) * H100_BW - weights) // per_request
    batch = min(fits, int(by_itl))
    assert t["decode_batch"] == batch
    share = 20 * 256 * step(batch) / batch
    assert float(_frac(t["decode_share"])) == pytest.approx(float(share), rel=1e-9)
    # prefill FLOPs of 2,048 tokens: 2 x (params - both tables) per token + the head once,
    # + attention 80 layers x 2 x 64 heads x (128 + 128) x (1 + ... + 2,048)
    flops = (2 * (PARAMS - 2 * TABLE) * 2048 + 2 * TABLE
             + 80 * 2 * 64 * 256 * (2048 * 2049 // 2))
    assert t["prefill_flops_per_request"] == flops
    replica = 4 * H100_BF16 * Fraction(1, 2)
    prefill = Fraction(20 * flops) / replica
    assert _frac(t["prefill_share"]) == prefill
    decode_flops = 2 * PARAMS * 256
    assert t["decode_flops_per_request"] == decode_flops
    assert t["replicas_by_compute"] == math.ceil(Fraction(20 * (flops + decode_flops)) / replica)
    # aggregated: a replica's time goes to prefill or decode: max(memory, ceil(sum of shares))
    assert t["aggregated_replicas"] == max(t["replicas_by_memory"],
                                           math.ceil(prefill + share)) == 4
    assert t["aggregated_binding"] == "compute"
    # split: prefill pool by its FLOPs, decode pool by the decoding requests' blocks
    assert t["prefill_replicas"] == math.ceil(prefill) == 3
    assert t["decode_replicas"] == max(math.ceil(Fraction(2048, 10) * 144 / blocks),
                                       math.ceil(share)) == 1
    assert t["aggregated_gpus"] == 16 and t["split_gpus"] == 16


def test_floors_stand_in_for_missing_targets_and_impossible_targets_are_named():
    t = _run("llama-3.1-8b", "--gpu", "h100", "--rate", "2/s", "--requests", "1k+128")
    assert not t["ttft_target"] and not t["itl_target"]
    assert float(_frac(t["ttft_s"])) == pytest.approx(t["prefill_floor_s"])
    assert float(_frac(t["itl_s"])) == pytest.approx(t["decode"]["ms_per_token"] / 1000)
    # an ITL below one request's decode step: bf16 Llama-3.1-8B reads ~15 GB a step, ~4.5 ms
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--rate", "2",
                                 "--requests", "1k+128", "--itl", "1ms"])
    assert result.exit_code == 1  # a stated target not met, as plan's other targets
    assert "not reachable" in result.output and "ITL 1.00 ms" in result.output


def test_a_mix_weights_lengths_by_requests_and_decode_time():
    # 3 requests of 1k + 100 for each of 8k + 500: mean prompt (3 x 1,024 + 8,192) / 4,
    # mean output 200; the decode context weights each shape by its output tokens
    t = _run("llama-3.1-8b", "--gpu", "h100", "--rate", "1", "--requests",
             "3x(1k+100),1x(8k+500)")
    assert _frac(t["mean_prompt_tokens"]) == Fraction(3 * 1024 + 8192, 4)
    assert _frac(t["mean_output_tokens"]) == Fraction(3 * 100 + 500, 4)
    ctx = Fraction(3 * 100 * (1024 + 50) + 500 * (8192 + 250), 3 * 100 + 500)
    assert t["decode_context_tokens"] == round(ctx)


def test_front_door_traffic():
    import kvplan

    d = kvplan.deploy("llama-3.1-70b", gpu="h100", count=4)
    t = d.traffic("1200/min", "2k+256", ttft="1s", itl=0.04)
    assert t.rate_per_s == 20 and t.aggregated_replicas == 4


@pytest.mark.parametrize("args", [
    ["--rate", "5"],  # no --requests
    ["--rate", "x", "--requests", "1k+128"],
    ["--rate", "-1", "--requests", "1k+128"],
    ["--rate", "5", "--requests", "1k+128", "--ttft", "soon"],
    ["--rate", "5", "--requests", "1k+128", "--efficiency", "2"],
    ["--rate", "5", "--requests", "1k+128", "--context", "8k"],
    ["--ttft", "1s"],  # a target without a rate
    ["--rate", "5", "--requests", "1k+0"],  # nothing generated
])
def test_bad_traffic_input_is_one_message_exit_2(args):
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_docs_work_the_example_by_hand():

    page = (ROOT / "docs" / "whatif.md").read_text()
    t = _run("llama-3.1-70b", "--gpu", "h100", "-n", "4", "--rate", "20", "--requests",
             "2k+256", "--ttft", "1s", "--itl", "40ms")
    weights = t["decode"]["weights_read_bytes_per_gpu"]
    # the page's arithmetic, step by step, as the test above derives it
    assert "rate x W = 20 x 11.24 = **224.8**" in page
    assert "20 x 256 x 0.040 = 204.8" in page
    assert "cdiv(2,304, 16) = 144 blocks" in page
    assert "2,176 x 327,680 B\n   / 4 = 178,257,920 B" in page
    assert 2176 * TOKEN_BYTES // 4 == 178_257_920
    by_itl = (Fraction(40, 1000) * H100_BW - weights) // (2176 * TOKEN_BYTES // 4)
    assert f"it meets 40 ms up to B = {by_itl}" in page
    assert f"so B* = {t['decode_batch']}" in page
    flops = (2 * (PARAMS - 2 * TABLE) * 2048 + 2 * TABLE
             + 80 * 2 * 64 * 256 * (2048 * 2049 // 2))
    assert f"{flops:,} FLOPs" in page
    assert f"**{float(Fraction(20 * flops) / (2 * H100_BF16)):.2f}** replicas' worth" in page
    assert "**4 replicas (16 GPUs)**" in page and "**3** prefill replicas" in page
    # the published benchmark it is set beside: its link and figures
    assert "https://gist.github.com/surajssd/eef8ebf83cadd690f6fb4ee87b30fe1a" in page
    assert "2.4957 requests/s" in page and "69.5 ms" in page and "A100 80GB PCIe" in page
    # mean lengths from the benchmark's throughputs: 532.931 / 2.4957 output tokens and
    # (1,065.25 - 532.931) / 2.4957 prompt tokens per request
    assert round(532.931 / 2.4957, 1) == 213.5 and round((1065.25 - 532.931) / 2.4957, 1) == 213.3


def test_find_gpus_picks_the_layout_needing_the_fewest_gpus():
    t = _run("llama-3.1-70b", "--gpu", "h100", "--rate", "20", "--requests", "2k+256",
             "--ttft", "1s", "--itl", "40ms", "--find-gpus")
    by_layout = {(o["tp"], o["pp"]): o for o in t["layouts"]}
    # one H100 cannot hold 141 GB of bf16 weights
    assert by_layout[(1, 1)]["total_gpus"] is None and by_layout[(1, 1)]["error"]
    # TP 1 x PP 2: a token passes both stages, each reading half of 141 GB of weights at
    # 3.35 TB/s (21 ms each): 42 ms a step at batch 1, over the 40 ms target
    assert "ITL" in by_layout[(1, 2)]["error"]
    assert 2 * (PARAMS * 2 // 2) / H100_BW > 0.040
    # the choice: the fewest GPUs in all among the layouts that can meet the targets
    usable = [o for o in t["layouts"] if o["total_gpus"] is not None and not o["error"]]
    fewest = min(o["total_gpus"] for o in usable)
    assert t["aggregated_gpus"] == fewest == 16  # TP 4 x 4 replicas (the worked example)
    assert t["deployment"].startswith("TP 4 x PP 1")


def test_a_ttft_target_below_the_longest_prompts_prefill_is_named():
    # Llama-3.1-8B, a 32k prompt: 2 x 8.03e9 x 32,768 linear FLOPs alone, at 50% of 989.4
    # TFLOP/s, take over a second; a 1 s TTFT cannot be met for it on one H100
    assert 2 * 8_030_261_248 * 32768 / (989.4e12 / 2) > 1.0
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--rate", "1",
                                 "--requests", "9x(1k+128),1x(32k+128)", "--ttft", "1s"])
    assert result.exit_code == 1, result.output
    assert "not reachable" in result.output and "32,768-token prompt" in result.output
