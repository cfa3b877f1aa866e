"""kvplan's llama.cpp engine against figures llama.cpp itself printed.

Each expected figure is from a real run of llama.cpp at commit 0c1e57098bba (the llama-cpp-python
0.3.36 sdist's vendored copy, built by tests/oracle_llamacpp/setup.sh) on the CPU:
`llama-completion -m M.gguf -c C -np N -fa on|off -ctk K -ctv V -ub 512 -ngl 0 -n 1 -lv 4`,
M one of the tiny GGUF models of tests/oracle_llamacpp/make_ggufs.py (4 query heads of 64, 2 KV
heads; gemma3: 6 layers, window 512, 5 sliding then 1 global; the others 4 layers). The lines
are `llama_kv_cache: size = X MiB (cells per stream, layers, seqs/streams), K (type): X MiB,
V (type): X MiB`, printed with two decimals.
"""

from __future__ import annotations

import pytest

from kvplan.core.errors import BadInputError
from kvplan.core.layers import FullAttention, SlidingWindow
from kvplan.core.spec import ModelSpec
from kvplan.engines.llamacpp import engine as ll
from kvplan.sources.families import with_family_facts

MIB = 2**20


def _spec(family: str, layers) -> ModelSpec:
    return with_family_facts(ModelSpec(
        name=f"tiny-{family}", family=family, layers=tuple(layers), num_attention_heads=4,
        hidden_size=256, vocab_size=300, intermediate_size=128, max_context_tokens=32768))


GEMMA3 = _spec("gemma3_text", [SlidingWindow(2, 64, window=512)] * 5 + [FullAttention(2, 64)])
# Mistral-7B-v0.1 as llama.cpp converts it (arch llama, sliding_window 256 in the header) and
# Phi-3 (sliding_window 2047): kvplan reads sliding layers from the config either way
LLAMA_SWA = _spec("llama", [SlidingWindow(2, 64, window=256)] * 4)
PHI3 = _spec("phi3", [SlidingWindow(2, 64, window=2047)] * 4)


def _mib(n: int) -> str:
    return f"{n / MIB:.2f}"


def test_each_sequence_gets_its_own_cache_without_kv_unified():
    # gemma3 -c 4096 -np 4 -fa on: "size = 2.00 MiB (1024 cells, 1 layers, 4/4 seqs),
    # K (f16): 1.00 MiB, V (f16): 1.00 MiB" and the SWA cache "size = 10.00 MiB (1024 cells,
    # 5 layers, 4/4 seqs), K (f16): 5.00 MiB, V (f16): 5.00 MiB"
    p = ll.profile(GEMMA3, ll.LlamacppConfig(ctx=4096, parallel=4))
    assert (p.cells // p.streams, p.num_layers - p.swa_layers, p.streams) == (1024, 1, 4)
    assert (_mib(p.k_bytes), _mib(p.v_bytes)) == ("1.00", "1.00")
    assert (p.swa_cells // p.streams, p.swa_layers) == (1024, 5)
    assert (_mib(p.swa_k_bytes), _mib(p.swa_v_bytes)) == ("5.00", "5.00")
    assert "(  1024 cells,   1 layers,  4/4 seqs)" in p.log_line()


def test_k_and_v_in_different_types():
    # gemma3 -c 4096 -np 4 -fa on -ctk q8_0 -ctv f16: K (q8_0): 0.53 MiB, V (f16): 1.00 MiB;
    # the SWA cache K (q8_0): 2.66 MiB, V (f16): 5.00 MiB
    p = ll.profile(GEMMA3, ll.LlamacppConfig(ctx=4096, parallel=4, cache_type_k="q8_0",
                                             cache_type_v="f16"))
    assert (_mib(p.k_bytes), _mib(p.v_bytes)) == ("0.53", "1.00")
    assert (_mib(p.swa_k_bytes), _mib(p.swa_v_bytes)) == ("2.66", "5.00")


@pytest.mark.parametrize("spec", [LLAMA_SWA, PHI3], ids=["llama-arch-with-window", "phi3"])
def test_only_swa_architectures_keep_a_window_cache(spec):
    # llama-swa / phi3 -c 1000 -np 1: one cache "size = 2.00 MiB (1024 cells, 4 layers, 1/1
    # seqs)", no SWA cache: LLM_ARCH_LLAMA ignores sliding_window, phi3.cpp disables SWA
    p = ll.profile(spec, ll.LlamacppConfig(ctx=1000))
    assert p.swa_cells == 0 and p.swa_layers == 0
    assert (p.cells, _mib(p.k_bytes + p.v_bytes)) == (1024, "2.00")


def test_quantized_v_without_flash_attention_is_refused():
    # gemma3 -c 4096 -fa off -ctv q4_0: llama.cpp exits 1, "quantized V cache requires
    # flash_attn to be enabled", before any cache line
    with pytest.raises(BadInputError, match="flash"):
        ll.profile(GEMMA3, ll.LlamacppConfig(ctx=4096, cache_type_v="q4_0", flash_attn=False))
    ll.profile(GEMMA3, ll.LlamacppConfig(ctx=4096, cache_type_v="q4_0", flash_attn=True))


def test_mistral_plan_keeps_full_attention():
    # Mistral-7B-v0.1 at -c 32768: llama.cpp keeps every one of its 32 layers at full length,
    # 32,768 cells x 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 4,096 MiB
    from kvplan.api import model

    p = ll.profile(model("mistral-7b-v0.1").spec, ll.LlamacppConfig(ctx=32768))
    assert p.swa_cells == 0
    assert p.k_bytes + p.v_bytes == 32768 * 32 * 8 * 128 * 2 * 2 == 4096 * MIB


def test_explain_reads_a_timestamped_kv_line_with_k_and_v_in_different_types():
    # llama-completion -lv 4 prefixes each line with a timestamp; this one is from llama
    # (the tiny model) at -c 4096 -np 4 -fa on -ctk q8_0 -ctv f16. The V figures sit more
    # than a hundred characters after the line's start.
    from kvplan.planning.explain import log_formats
    from kvplan.sources.startlog import read_log

    line = ("0.00.398.609 I llama_kv_cache: size =    6.12 MiB (  1024 cells,   4 layers,  4/4 "
            "seqs), K (q8_0):    2.12 MiB, V (f16):    4.00 MiB\n")
    facts = read_log("0.00.091.052 I llama_context: kv_unified            = false\n" + line,
                     log_formats(), "llamacpp")
    assert facts.kv["v_mib"] == 4.0 and facts.kv["k_mib"] == 2.12
    assert facts.settings["kv_dtype_v"] == "f16" and facts.settings["kv_unified"] == "false"
