"""A `kvplan` command for each kvplan figure of docs/engine-accuracy.md sections 1, 5 and 7.

Those sections' tables are computed by their test modules through kvplan's Python API
(tests/engines/<engine>/ modules, test_checkpoint_weights.py, test_engine_buffers.py). Here each
figure gets the command line a reader can run to see it: the test runs every command, reads the
figure from its `--format json` output and holds it to the figure the table prints, and the
document holds the printed lists (`python tests/engines/test_accuracy_commands.py` prints them).
A figure no command gives is listed with what the command line cannot say."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

import pytest
from accuracy_doc import ACCURACY_DOC, assert_in_accuracy_doc
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app

M = "tests/fixtures/engines/models/"  # the fixture models (config.json shapes), repository root


@dataclass(frozen=True)
class Figure:
    """One kvplan figure of a table: its row and quantity as the table names them, the figure
    as it prints it, the command (kvplan's arguments; None: none gives it) and where the figure
    is in the command's JSON (`engine.num_blocks`, `budget.weights_bytes.0`, or
    `tables.<table>.<row name>`) with how the table prints it."""

    section: str
    row: str
    quantity: str
    shown: str
    args: tuple[str, ...] | None
    path: str = ""
    unit: str = "int"  # int | 2f | gib | mib | mib0 | text
    why: str = ""  # for a figure without a command: what the command line cannot say


def _f(section: str, row: str, quantity: str, shown: str, args: str | None, path: str = "",
       unit: str = "int", why: str = "") -> Figure:
    return Figure(section, row, quantity, shown, tuple(shlex.split(args)) if args else None,
                  path, unit, why)


# --- section 1: the engine maths, given the budget the log printed ---------------------------
_I10517 = (f"plan {M}llama-3.1-8b.yaml --engine vllm --engine-version 0.6.4 --max-model-len "
           "29000 --kv-memory 2.89GiB --host-memory 4GiB")
_I19996 = (f"plan {M}llama-3.1-8b.yaml --engine vllm --engine-version 0.9.1 --max-model-len "
           "131072 --kv-memory 51.63GiB --draft-layers 1")
# each stage's worker logs its own budget (12.13 and 11.33 GiB); the first stage's holds the
# fewest blocks (50,473 against 50,770), which vLLM takes for every stage
_PR20665 = (f"plan {M}deepseek-v2-lite.yaml --gpu l4 --count 4 --tp 2 --pp 2 --engine-version "
            "0.10.0 --max-model-len 1024 --kv-memory 12.13GiB")
_I1739 = (f"plan {M}qwen3-14b.yaml --engine vllm --engine-version 0.11.0 --max-model-len 32768 "
          "--kv-memory 6.51GiB")
_RTX4080 = (f"plan {M}qwen2.5-7b.yaml --engine vllm --engine-version 0.26.0 --max-model-len "
            "32768 --kv-memory 8.0GiB")
_SPARK = (f"plan {M}mistral-7b-v0.2.yaml --engine vllm --engine-version 0.11.0 --max-model-len "
          "32768 --kv-memory 102.56GiB")
# no budget printed: 20,186 blocks of 16 tokens x 32 layers x 2 x 32 heads x 128 x 2 B (8 MiB)
# fed back as the budget that holds exactly them
_ROCM = (f"plan {M}llama-2-7b.yaml --engine vllm --engine-version 0.6.0 --max-model-len 4096 "
         "--kv-memory 161488MiB --host-memory 4GiB")
_RTX5090 = (f"plan {M}qwen3-4b-2507.yaml --engine vllm --engine-version 0.20.0 --max-model-len "
            "131072 --kv-memory 18.96GiB")
# SGLang's pool: free after the load - free before x (1 - 0.85) = 6.09 - 21.63 x 0.15 GiB
_QWQ = f"plan {M}qwq-32b.yaml --engine sglang --tp 4 --count 4 --kv-memory 3055332360B"
# the logged token count fed back: 367,404 x 94 layers x 1 KV head x 128 x 2 x 2 B
_Q235 = "plan qwen3-235b-a22b --engine sglang --tp 4 --count 4 --kv-memory 17682419712B"
_L32 = f"plan {M}llama-3.2-3b.yaml --engine llamacpp --max-model-len 4096"
# TensorRT-LLM's pool: int(17.83 GiB x 0.9) bytes
_TRT = f"plan {M}llama-3.1-8b.yaml --engine trtllm --kv-dtype fp8 --kv-memory 17230335048B"
_HOST = "tables.KV offload to host memory (per GPU).num_cpu_blocks"

SECTION_1 = [
    _f("1", "vllm-i10517 (RTX 3090, V0)", "GPU blocks", "1,479", _I10517, "engine.num_blocks"),
    _f("1", "vllm-i10517 (RTX 3090, V0)", "tokens", "23,664", _I10517, "engine.kv_cache_tokens"),
    _f("1", "vllm-i10517 (RTX 3090, V0)", "concurrency", "0.82", _I10517,
       "engine.max_concurrency", "2f"),
    _f("1", "vllm-i10517 (RTX 3090, V0)", "CPU blocks (4 GiB swap)", "2,048", _I10517, _HOST,
       "text"),
    _f("1", "vllm-i19996 (H100, EAGLE)", "tokens", "410,128", _I19996, "engine.kv_cache_tokens"),
    _f("1", "vllm-i19996 (H100, EAGLE)", "concurrency", "3.13", _I19996,
       "engine.max_concurrency", "2f"),
    _f("1", "vllm-pr20665 (4x L4, TP2 PP2, MLA)", "tokens", "807,568", _PR20665,
       "engine.kv_cache_tokens"),
    _f("1", "vllm-pr20665 (4x L4, TP2 PP2, MLA)", "concurrency", "788.64", _PR20665,
       "engine.max_concurrency", "2f"),
    _f("1", "lmcache-i1739 (Qwen3-14B)", "tokens", "42,656", _I1739, "engine.kv_cache_tokens"),
    _f("1", "lmcache-i1739 (Qwen3-14B)", "concurrency", "1.30", _I1739,
       "engine.max_concurrency", "2f"),
    _f("1", "vllm-doc RTX 4080 (0.26, AWQ)", "tokens", "149,792", _RTX4080,
       "engine.kv_cache_tokens"),
    _f("1", "vllm-doc RTX 4080 (0.26, AWQ)", "concurrency", "4.57", _RTX4080,
       "engine.max_concurrency", "2f"),
    _f("1", "vllm-doc DGX Spark (0.11, GPTQ)", "GPU blocks", "52,510", _SPARK, "engine.num_blocks"),
    _f("1", "vllm-doc DGX Spark (0.11, GPTQ)", "tokens", "840,160", _SPARK,
       "engine.kv_cache_tokens"),
    _f("1", "vllm-doc DGX Spark (0.11, GPTQ)", "concurrency", "25.64", _SPARK,
       "engine.max_concurrency", "2f"),
    _f("1", "vllm-doc ROCm Llama-2-7B", "concurrency (block count fed back)", "78.85", _ROCM,
       "engine.max_concurrency", "2f"),
    _f("1", "vllm-doc ROCm Llama-2-7B", "CPU blocks", "512", _ROCM, _HOST, "text"),
    _f("1", "vllm-doc RTX 5090 Qwen3-4B", "tokens", "138,048", _RTX5090, "engine.kv_cache_tokens"),
    _f("1", "vllm-doc RTX 5090 Qwen3-4B", "concurrency", "1.05", _RTX5090,
       "engine.max_concurrency", "2f"),
    _f("1", "sglang QwQ-32B TP4", "max_total_num_tokens", "46,620", _QWQ,
       "engine.max_total_num_tokens"),
    _f("1", "sglang QwQ-32B TP4", "K size GB", "1.42", _QWQ, "engine.k_size_bytes", "gib"),
    _f("1", "sglang Qwen3-235B-FP8 TP4", "K size GB (token count fed back)", "8.23", _Q235,
       "engine.k_size_bytes", "gib"),
    _f("1", "llama.cpp Llama-3.2-3B f16", "K MiB", "224.00", _L32, "engine.k_bytes", "mib"),
    _f("1", "llama.cpp Llama-3.2-3B f16", "total MiB", "448.00", _L32, "engine.total_bytes",
       "mib"),
    _f("1", "llama.cpp Llama-3.2-3B q8_0 K", "K MiB", "119.00", f"{_L32} -ctk q8_0",
       "engine.k_bytes", "mib"),
    _f("1", "llama.cpp Llama-3.2-3B q8_0 K", "total MiB", "343.00", f"{_L32} -ctk q8_0",
       "engine.total_bytes", "mib"),
    _f("1", "ollama qwen3:8b, ctx 40,960", "total MiB", "5,760",
       f"plan {M}qwen3-8b.yaml --engine llamacpp --max-model-len 40960", "engine.total_bytes",
       "mib0"),
    _f("1", "TRT-LLM RTX 5090, fp8 KV", "blocks", "8,217", _TRT, "engine.num_blocks"),
    _f("1", "TRT-LLM RTX 5090, fp8 KV", "tokens", "262,944", _TRT, "engine.kv_cache_tokens"),
    _f("1", "TRT-LLM RTX 5090, fp8 KV", "allocated GiB", "16.05", _TRT, "engine.allocated_bytes",
       "gib"),
]

# --- section 5: the weights loaded, from config.json alone ----------------------------------
_W = "budget.weights_bytes.0"
# the weights the budget takes off (SGLang's; and vLLM's where the plan says it would not start)
_WS = "budget_terms.weights_bytes"
_OTHER_ALLOCATOR = ("`kvplan plan` subtracts the weights as CUDA's caching allocator holds them "
                    "(vLLM's memory_allocated); this figure is the tensors and rotary caches "
                    "that another device's loader counts, which no flag selects")
SECTION_5 = [
    _f("5", "vllm-i10517 (engine-logs.yaml)", "weights GiB", "14.99",
       f"plan {M}llama-3.1-8b.yaml --gpu 'RTX 3090' --engine-version 0.6.4", _W, "gib"),
    _f("5", "vllm-doc-qwen25-7b-awq-rtx4080 (engine-logs.yaml)", "weights GiB", "5.20",
       f"plan {M}qwen2.5-7b.yaml --gpu-memory 15.99GiB --engine-version 0.26.0 "
       "--weights-dtype awq", _W, "gib"),
    _f("5", "vllm-doc-mistral7b-gptq-dgx-spark (engine-logs.yaml)", "weights GiB", "3.89",
       f"plan {M}mistral-7b-v0.2.yaml --gpu-memory 119.70GiB --engine-version 0.11.0 "
       "--weights-dtype gptq", _W, "gib"),
    _f("5", "sglang-doc-qwq-32b-tp4 (engine-logs.yaml)", "weights GiB per rank", "15.50",
       f"plan {M}qwq-32b.yaml --engine sglang --gpu-memory 24GiB --count 4 --tp 4", _WS, "gib"),
    _f("5", "vllm-doc-qwen3-4b-2507-rtx5090 (engine-logs.yaml)", "weights GiB", "7.49",
       f"plan {M}qwen3-4b-2507.yaml --gpu 'RTX 5090' --engine-version 0.20.0", _W, "gib"),
    _f("5", "myoceane.fr vLLM on A100 (gpt-oss-20b)", "weights GiB", "13.70",
       "plan gpt-oss-20b --gpu a100-80gb --engine-version 0.19.0", _W, "gib"),
    _f("5", "vllm-project/vllm#23278", "weights GiB", "65.95",
       "plan gpt-oss-120b --gpu h100 --engine-version 0.10.1", _WS, "gib"),
    _f("5", "vllm-project/vllm#33155", "weights GiB", "64.27",
       "plan gpt-oss-120b --gpu h100 --engine-version 0.14.1", _WS, "gib"),
    _f("5", "https://github.com/vllm-project/vllm/issues/18446", "weights GiB per rank", "54.92",
       "plan qwen3-235b-a22b --gpu h100 --count 8 --engine-version 0.8.5", _W, "gib"),
    _f("5", "https://github.com/vllm-project/vllm/pull/6234", "weights GiB", "12.55",
       "plan llama-2-7b --gpu a100-80gb --engine-version 0.5.2", _W, "gib"),
    _f("5", "https://github.com/kyuz0/amd-strix-halo-vllm-toolboxes/pull/5", "weights GiB",
       "7.50", None, why=_OTHER_ALLOCATOR + " (ROCm on an integrated GPU)"),
    _f("5", "https://github.com/HabanaAI/vllm-fork/issues/809", "weights GiB per rank", "79.31",
       None, why=_OTHER_ALLOCATOR + " (the HPU fork's loader)"),
    _f("5", "https://github.com/xorbitsai/inference/issues/3481", "weights GiB", "27.53",
       "plan qwen3-14b --engine sglang --gpu h100", _WS, "gib"),
]

# --- section 7: what SGLang, TensorRT-LLM and llama.cpp set aside ----------------------------
_OLD_MASK = ("builds before llama.cpp PR #23764 (2026-05-27) cast the flash-attention mask "
             "from f32 on the host; `kvplan plan` models the current build, and no flag "
             "names a build")
_FREE = ("`kvplan plan --engine sglang` prints the pool it derives from this reading (the "
         "max_total_num_tokens row), not the reading itself")


def _llamacpp(row: str, model: str, ctx: int, fa: str, gpu: str, host: str, extra: str = "",
              old_mask: bool = False) -> list[Figure]:
    args = f"plan {model} --engine llamacpp --max-model-len {ctx} -ub 512 -fa {fa}{extra}"
    quantity = f"n_ctx {ctx:,}, -ub 512, -fa {fa}: GPU compute MiB"
    return [_f("7", row, quantity, gpu, args, "engine.compute_buffer_bytes", "mib"),
            _f("7", row, "host compute MiB", host, None if old_mask else args,
               "engine.host_compute_buffer_bytes", "mib", _OLD_MASK if old_mask else "")]


_SG_0401 = "plan llama-3.1-8b --engine sglang --gpu h100 --engine-version 0.4.1"
_SG_0523 = "plan qwen3-30b-a3b --engine sglang --gpu h100 --engine-version 0.5.23 " \
           "--weights-dtype fp8"
_T5090 = f"plan {M}llama-3.1-8b.yaml --engine trtllm --gpu 'RTX 5090' --kv-dtype fp8 " \
         "--weights-dtype fp8"
_TMEM = "plan llama-2-7b --engine trtllm --gpu h100 --kv-dtype fp8 --weights-dtype fp8 " \
        "--block-size 64"
_TBENCH = f"{_TMEM} --gpu-memory-utilization 0.99"
_T2268 = f"plan {M}qwen1.5-7b.yaml --engine trtllm --gpu a100-40gb --block-size 64"
_TSPARK = "plan gpt-oss-120b --engine trtllm --gpu-memory 119.70GiB --engine-version 1.1.0rc3"
_TOTAL, _AVAIL = "budget.total_memory_bytes", "engine.free_bytes"
_UNIFIED = ("the log's non-torch memory (the DGX Spark's unified memory counts the host's own "
            "use there), which no flag gives")
SECTION_7 = [
    *_llamacpp("llamacpp-kaggle-llama31-8b-t4-c8192-nofa", "llama-3.1-8b", 8192, "off",
               "560.00", "24.00", " -np 4 --kv-unified"),
    *_llamacpp("llamacpp-pyllama-llama3-8b-c512-nofa", "llama-3-8b", 512, "off", "258.50",
               "9.00"),
    *_llamacpp("llamacpp-vulkan-llama2-7b-a770-c4096-nofa", "llama-2-7b", 4096, "off", "296.00",
               "16.00"),
    *_llamacpp("llamacpp-perplexity-llama3-8b-c1024-nofa", "llama-3-8b", 1024, "off", "258.50",
               "10.00", " -np 2 --kv-unified"),
    *_llamacpp("llamacpp-ollama-qwen25-7b-c4096-fa", "qwen2.5-7b", 4096, "auto", "304.00",
               "15.00", old_mask=True),
    *_llamacpp("llamacpp-vulkan-qwen25-coder-7b-c16384", "qwen2.5-7b", 16384, "auto", "304.00",
               "39.00", old_mask=True),
    *_llamacpp("llamacpp-glm4-32b-c32768-fa", f"{M}glm-4-32b-0414.yaml", 32768, "on", "308.00",
               "76.00", old_mask=True),
    *_llamacpp("llamacpp-ollama-qwen3-8b-metal-c32768-nofa", "qwen3-8b", 32768, "off",
               "2,144.00", "72.00", " -np 4 --kv-unified"),
    *_llamacpp("llamacpp-server-qwen3-30b-a3b-c65536-fa", "qwen3-30b-a3b", 65536, "auto",
               "300.75", "132.00", old_mask=True),
    _f("7", "sglang-docs-llama31-8b-h100-2025-01", "free before load GB", "78.69", None,
       why=_FREE),
    _f("7", "sglang-docs-llama31-8b-h100-2025-01", "free after load GB", "63.67", None,
       why=_FREE),
    _f("7", "sglang-docs-llama31-8b-h100-2025-01", "max_total_num_tokens", "444,212", _SG_0401,
       "engine.max_total_num_tokens"),
    _f("7", "sglang-h100-qwen3-30b-a3b-fp8-2026-08", "free before load GB", "78.69", None,
       why=_FREE),
    _f("7", "sglang-h100-qwen3-30b-a3b-fp8-2026-08", "free after load GB", "49.54", None,
       why=_FREE),
    _f("7", "sglang-h100-qwen3-30b-a3b-fp8-2026-08", "max_total_num_tokens", "394,101",
       _SG_0523, "engine.max_total_num_tokens"),
    _f("7", "trtllm-doc-llama31-8b-fp8-rtx5090", "total GiB", "31.84", _T5090, _TOTAL, "gib"),
    _f("7", "trtllm-doc-llama31-8b-fp8-rtx5090", "available GiB", "22.19", _T5090, _AVAIL,
       "gib"),
    _f("7", "trtllm-doc-llama31-8b-fp8-rtx5090", "tokens", "327,168", _T5090,
       "engine.kv_cache_tokens"),
    _f("7", "trtllm-memory-doc-llama2-7b-fp8-h100", "total GiB", "79.19", _TMEM, _TOTAL, "gib"),
    _f("7", "trtllm-memory-doc-llama2-7b-fp8-h100", "engine MiB (weights)", "6,677", _TMEM,
       "budget.weights_bytes.0", "mib0"),
    _f("7", "trtllm-memory-doc-llama2-7b-fp8-h100", "execution context MiB (activations)", "708",
       _TMEM, "budget.activation_bytes.0", "mib0"),
    _f("7", "trtllm-memory-doc-llama2-7b-fp8-h100", "available GiB", "71.63", _TMEM, _AVAIL,
       "gib"),
    _f("7", "trtllm-memory-doc-llama2-7b-fp8-h100", "tokens", "264,064", _TMEM,
       "engine.kv_cache_tokens"),
    _f("7", "trtllm-bench-doc-llama2-7b-fp8-h100-bs4096", "total GiB", "79.19", _TBENCH, _TOTAL,
       "gib"),
    _f("7", "trtllm-bench-doc-llama2-7b-fp8-h100-bs4096", "engine MiB (weights)", "6,677",
       _TBENCH, "budget.weights_bytes.0", "mib0"),
    _f("7", "trtllm-bench-doc-llama2-7b-fp8-h100-bs4096", "execution context MiB (activations)",
       "708", _TBENCH, "budget.activation_bytes.0", "mib0"),
    _f("7", "trtllm-bench-doc-llama2-7b-fp8-h100-bs4096", "available GiB", "71.63", _TBENCH,
       _AVAIL, "gib"),
    _f("7", "trtllm-issue2268-qwen15-7b-a100-40gb", "total GiB", "39.59", _T2268, _TOTAL, "gib"),
    _f("7", "trtllm-issue2268-qwen15-7b-a100-40gb", "available GiB", "24.16", _T2268, _AVAIL,
       "gib"),
    _f("7", "trtllm-issue2268-qwen15-7b-a100-40gb", "blocks", "696", _T2268, "engine.num_blocks"),
    _f("7", "trtllm-pytorch-gpt-oss-120b-dgx-spark", "total GiB", "119.70", _TSPARK, _TOTAL,
       "gib"),
    _f("7", "trtllm-pytorch-gpt-oss-120b-dgx-spark", "weights GiB (inside torch)", "60.77",
       _TSPARK, "budget.weights_bytes.0", "gib"),
    _f("7", "trtllm-pytorch-gpt-oss-120b-dgx-spark", "activations GiB (inside torch)", "0.66",
       _TSPARK, "budget.activation_bytes.0", "gib"),
    _f("7", "trtllm-pytorch-gpt-oss-120b-dgx-spark", "available GiB (x fraction; non-torch as "
       "logged: unified memory)", "8.60", None, why=_UNIFIED),
    _f("7", "trtllm-pytorch-gpt-oss-120b-dgx-spark", "tokens", "125,216", None, why=_UNIFIED),
]

FIGURES = SECTION_1 + SECTION_5 + SECTION_7
SECTIONS = {"1": ("## 1. ", "## 2. "), "5": ("## 5. ", "## 6. "), "7": ("## 7. ", "### 7.1 ")}
runner = CliRunner()


@cache
def _json(args: tuple[str, ...]) -> dict[str, Any]:
    full = [str(ROOT / a) if a.startswith(M) else a for a in args]
    result = runner.invoke(app, [*full, "--format", "json"])
    assert result.exit_code in (0, 1), result.output  # 1: the request does not fit; still printed
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def _value(doc: dict[str, Any], path: str) -> Any:
    if path.startswith("tables."):
        table, _, name = path.removeprefix("tables.").rpartition(".")
        return next(r["value"] for r in doc["tables"][table] if r["name"] == name)
    value: Any = doc
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def shown(figure: Figure) -> str:
    """The command's figure as the table prints it."""
    assert figure.args is not None
    value = _value(_json(figure.args), figure.path)
    return {"int": lambda v: f"{v:,}", "2f": lambda v: f"{v:.2f}",
            "gib": lambda v: f"{v / 2**30:.2f}", "mib": lambda v: f"{v / 2**20:,.2f}",
            "mib0": lambda v: f"{v / 2**20:,.0f}", "text": str}[figure.unit](value)


def command_list(section: str) -> str:
    """The list printed under the section's table."""
    tables = "tables" if section in ("5", "7") else "table"
    lines = [f"The command behind each kvplan figure of the {tables}"
             " above (from the repository root; `python tests/engines/test_accuracy_commands.py`"
             " prints these lists, and a test runs each command and holds its `--format json`"
             " figure to the table's):", ""]
    for f in (f for f in FIGURES if f.section == section):
        head = f"- {f.row}, {f.quantity}: {f.shown}"
        lines.append(f"{head}: `kvplan {shlex.join(f.args)}` ({f.path})" if f.args else
                     f"{head}: no command ({f.why})")
    return "\n".join(lines) + "\n"


def _section(section: str) -> str:
    text = ACCURACY_DOC.read_text(encoding="utf-8")
    start, end = SECTIONS[section]
    return text[text.index(start):text.index(end)]


@pytest.mark.parametrize("figure", [f for f in FIGURES if f.args],
                         ids=lambda f: f"s{f.section}-{f.row}-{f.quantity}")
def test_the_command_gives_the_tables_figure(figure):
    assert shown(figure) == figure.shown


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"s{f.section}-{f.row}-{f.quantity}")
def test_the_figure_is_the_one_the_table_prints(figure):
    table = _section(figure.section).split("The command behind each kvplan figure")[0]
    rows = [line for line in table.splitlines() if line.startswith("|")]
    # the figure is in a row that names it, or in a row under one with a blank label
    block, inside = [], False
    for line in rows:
        inside = line.startswith(f"| {figure.row} |") or (inside and line.startswith("|  |"))
        block += [line] if inside else []
    assert block, figure.row
    assert any(f" {figure.shown} |" in r or f" {figure.shown} /" in r for r in block), \
        (figure.row, figure.shown)


def test_most_figures_have_a_command():
    # 12 of the 87: SGLang's free-memory readings (4), llama.cpp host buffers of builds before
    # 2026-05-27 (4), the DGX Spark's TensorRT-LLM budget from its logged non-torch memory (2),
    # the weights other devices' loaders count (2); a new figure without a command fails here
    without = [f for f in FIGURES if f.args is None]
    assert all(f.why for f in without)
    assert len(FIGURES) - len(without) >= 75 and len(without) <= 12, [f.row for f in without]


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_the_document_holds_the_commands(section):
    assert_in_accuracy_doc(command_list(section), __file__)


if __name__ == "__main__":
    for name in sorted(SECTIONS):
        print(f"--- section {name}\n\n{command_list(name)}")
