"""What llama.cpp, SGLang and TensorRT-LLM set aside besides the KV cache, predicted from the
GPU and the settings alone, against real start-up logs (tests/fixtures/engines/buffer-logs.yaml,
each entry citing its source): the table of all three engines. The tests of each engine are in
its folder (llamacpp/test_llamacpp_buffers.py, sglang/test_sglang_memory.py,
trtllm/test_trtllm_memory.py); the predictions they share are tests/buffer_cases.py.

docs/engine-accuracy.md section 7 holds the table `accuracy_table()` prints; a test keeps
them equal. Regenerate it with `python tests/engines/test_engine_buffers.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

from accuracy_doc import assert_in_accuracy_doc
from buffer_cases import GIB, MIB, entries, error, llamacpp_buffers, sglang_predict, trtllm_predict


def accuracy_table() -> str:
    rows = ["| log | engine | setting | logged | kvplan | error | counted |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |"]

    def add(e: dict[str, Any], what: str, logged: float, got: float, fmt: str) -> None:
        rows.append(f"| {e['id']} | {e['engine']} | {what} | {logged:{fmt}} | {got:{fmt}} | "
                    f"{error(got, logged):+.2%} | {'yes' if e['counted'] else 'no'} |")

    for e in entries("llamacpp"):
        s, c = e["settings"], llamacpp_buffers(e)
        what = (f"n_ctx {s['n_ctx']:,}, -ub {s['n_ubatch']}, -fa {s['flash_attn']}: GPU compute "
                f"MiB ({c.phase})")
        add(e, what, e["reported"]["cuda_compute_mib"], c.gpu_mib, ",.2f")
        add(e, "host compute MiB", e["reported"]["host_compute_mib"], c.host_mib, ",.2f")
    for e in entries("sglang"):
        mem, tokens = sglang_predict(e)
        r = e["reported"]
        add(e, f"{e['gpu']}, mem_fraction_static {mem.mem_fraction_static}: free before load GB",
            r["avail_before_load_gb"], mem.free_before_load_bytes / GIB, ".2f")
        add(e, "free after load GB", r["avail_after_load_gb"], mem.free_after_load_bytes / GIB,
            ".2f")
        add(e, "max_total_num_tokens", r["max_total_num_tokens"], tokens, ",.0f")
    for e in entries("trtllm"):
        mem, prof = trtllm_predict(e)
        r, st = e["reported"], e["settings"]
        flow = "PyTorch backend" if st["backend"] == "pytorch" else "TRT engine"
        add(e, f"{e['gpu']}, {flow}, fraction {st['free_gpu_memory_fraction']}: total GiB",
            r["total_gib"], mem.total_bytes / GIB, ".2f")
        if "weights_gib" in r:
            add(e, "weights GiB (inside torch)", r["weights_gib"], mem.weights_bytes / GIB, ".2f")
            add(e, "activations GiB (inside torch)", r["activation_gib"],
                mem.activation_bytes / GIB, ".2f")
        if "engine_mib" in r:
            add(e, "engine MiB (weights)", r["engine_mib"], mem.weights_bytes / MIB, ",.0f")
            add(e, "execution context MiB (activations)", r["execution_context_mib"],
                mem.activation_bytes / MIB, ",.0f")
        if st["backend"] == "pytorch":
            add(e, "available GiB (x fraction; non-torch as logged: unified memory)",
                r["available_gib"], prof.kv_cache_bytes / GIB, ".2f")
        else:
            add(e, "available GiB", r["available_gib"], mem.free_bytes / GIB, ".2f")
        if "tokens" in r:
            add(e, "tokens", r["tokens"], prof.kv_cache_tokens, ",.0f")
        elif "blocks" in r:
            add(e, "blocks", r["blocks"], prof.num_blocks, ",.0f")
    return "\n".join(rows) + "\n"


def test_accuracy_doc_is_current():
    assert_in_accuracy_doc(accuracy_table(), __file__)


if __name__ == "__main__":
    print(accuracy_table(), end="")
