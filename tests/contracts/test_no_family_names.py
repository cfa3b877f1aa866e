"""A model's family name is read only in kvplan/sources/ (issue 20, item 6): the readers turn it
into facts on the spec (`ModelSpec.layout`, `ModelSpec.traits`, kvplan.sources.families), and
the weights inventory and the engines read those facts.

An AST scan of every module outside kvplan/sources/ looks for a comparison (`==`, `!=`, `in`,
`not in`) of an expression that reads `family` or `model_type` (an attribute, a name, or a call
on one such as `(spec.family or "").lower()`) with a string literal, a literal collection of
strings, or a module-level name bound to one (`SWA_FAMILIES = frozenset({...})`), and a
family-keyed lookup (`{"jamba": ...}.get(self.family)`, `TABLE[spec.family]`). The scan is
shown to fail on planted examples first.

Then the facts alone give the numbers a family gave: specs built with no family name but with
the layout or trait set get the weights and engine results derived by hand here.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from factories import mla
from paths import ROOT

from kvplan.core.layers import FullAttention, SlidingWindow
from kvplan.core.spec import GENERIC_LAYOUT, EngineTraits, ModelSpec, TensorLayout
from kvplan.core.weights import inventory, supported
from kvplan.engines import sglang, tgi, vllm
from kvplan.engines.llamacpp import engine as llamacpp
from kvplan.sources.families import with_family_facts

PACKAGE = ROOT / "kvplan"
FAMILY_WORDS = ("family", "model_type", "fam")
GIB = 2**30


def _reads_family(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in FAMILY_WORDS:
            return True
        if isinstance(sub, ast.Name) and sub.id in FAMILY_WORDS:
            return True
    return False


def _strings(node: ast.AST, tables: dict[str, bool]) -> bool:
    """Whether `node` is a string literal, a literal collection of strings (frozenset({...})
    included) or a module-level name bound to one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_strings(e, tables) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys) and all(k is not None and _strings(k, tables) for k in node.keys)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("frozenset", "set", "tuple") and len(node.args) == 1:
        return _strings(node.args[0], tables)
    if isinstance(node, ast.Name):
        return tables.get(node.id, False)
    return False


def family_tests(source: str, filename: str = "<planted>") -> list[str]:
    """Where `source` compares a family name with a string or looks one up by it."""
    tree = ast.parse(source, filename)
    tables: dict[str, bool] = {}
    for stmt in tree.body:  # module-level NAME = <strings>
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    tables[t.id] = _strings(stmt.value, tables)
    found: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            sides = [node.left, *node.comparators]
            if any(_reads_family(s) for s in sides) and any(
                    _strings(s, tables) for s in sides if not _reads_family(s)):
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args and _reads_family(node.args[0]) \
                and _strings(node.func.value, tables):
            found.append(node.lineno)
        elif isinstance(node, ast.Subscript) and _reads_family(node.slice) \
                and _strings(node.value, tables):
            found.append(node.lineno)
    return [f"{filename}:{line}" for line in sorted(set(found))]


def test_the_scan_finds_planted_family_tests():
    planted = '''
SWA_FAMILIES = frozenset({"gemma2", "gpt_oss"})
NAMES = ("qwen2", "chatglm")
PREFIX = {"jamba": "mamba"}
def rules(spec, self, cfg, fam):
    if spec.family == "falcon":
        return 1
    if (spec.family or "").lower().replace("-", "_") in SWA_FAMILIES:
        return 2
    if cfg.model_type in ("whisper", "mllama"):
        return 3
    if fam not in NAMES:
        return 4
    prefix = PREFIX.get(self.family, "mixer")
    return {"jamba": 5}[spec.family]
'''
    assert [f.split(":")[1] for f in family_tests(planted)] == [
        "6", "8", "10", "12", "14", "15"]
    # what is allowed: showing the family, a message that names it, a test of being set,
    # and a comparison of facts
    allowed = '''
def show(spec):
    print(f"family {spec.family or '-'}")
    if spec.family is None:
        return "the {spec.family} family"
    if spec.layout.norms == "sandwich" or spec.traits.sglang_hybrid_swa:
        return 1
    return spec.family
'''
    assert family_tests(allowed) == []


def test_no_family_name_is_tested_outside_the_sources():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "sources") in path.parents:
            continue
        found += family_tests(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert found == [], ("read a fact of the spec (ModelSpec.layout / traits, set in "
                         "kvplan.sources.families) instead")


# --- the facts alone give what the family gave ---------------------------------------------

def _gpt2_small(**kw) -> ModelSpec:
    """GPT-2 small as its config.json gives it: 12 layers of 12 heads of 64, n_embd 768,
    n_positions 1,024, vocabulary 50,257, a 4 x 768 MLP, tied embeddings; no family named."""
    return ModelSpec(name="gpt2-facts", layers=(FullAttention(12, 64),) * 12,
                     num_attention_heads=12, hidden_size=768, vocab_size=50257,
                     intermediate_size=3072, tie_word_embeddings=True,
                     max_context_tokens=1024, **kw)


def test_a_layout_without_a_family_gives_gpt2_small_its_published_parameter_count():
    layout = TensorLayout(known=True, norm_bias=True, learned_positions=True, fused_qkv=True,
                          gated_mlp=False, mlp_bias=True, mlp_names=("c_fc", "c_proj"))
    spec = _gpt2_small(layout=layout)
    assert spec.family is None and supported(spec) is None
    h, inner, vocab, positions = 768, 3072, 50257, 1024
    per_layer = (2 * 2 * h  # ln_1, ln_2: weight and bias
                 + 3 * h * h + 3 * h  # c_attn
                 + h * h + h  # attn.c_proj
                 + inner * h + inner  # c_fc
                 + h * inner + h)  # mlp.c_proj
    total = vocab * h + positions * h + 12 * per_layer + 2 * h  # + ln_f; lm_head tied
    # Hugging Face's GPT2LMHeadModel("gpt2").num_parameters(): 124,439,808
    assert total == 124_439_808
    inv = inventory(spec)
    assert inv.total_params == total and inv.total_bytes == 2 * total
    # the family name gives the same tensors, through the reader's facts
    named = with_family_facts(_gpt2_small(family="gpt2"))
    assert named.layout == layout and inventory(named).tensors == inv.tensors
    # and without the facts the generic decoder is laid out instead (gated MLP, no biases)
    generic = inventory(_gpt2_small())
    assert supported(_gpt2_small()) is not None
    assert generic.total_params == (vocab * h + 12 * (2 * h + 4 * h * h + 3 * inner * h)
                                    + h)


def test_qwen2_attention_bias_covers_q_k_v_only_by_the_layout():
    """Qwen2Attention: q/k/v with biases, o_proj without (o_proj_bias False)."""
    base = dict(name="t", layers=(FullAttention(2, 64),) * 2, num_attention_heads=4,
                hidden_size=256, vocab_size=1000, intermediate_size=512,
                tie_word_embeddings=True, attention_bias=True)
    facts = ModelSpec(**base, layout=TensorLayout(known=True, o_proj_bias=False))
    # per layer: q 256x256 + 256, k / v 128x256 + 128 each, o 256x256 (no bias), a gated MLP
    # 3 x 512x256, two norms of 256
    layer = 256 * 256 + 256 + 2 * (128 * 256 + 128) + 256 * 256 + 3 * 512 * 256 + 2 * 256
    assert inventory(facts).total_params == 1000 * 256 + 2 * layer + 256
    named = with_family_facts(ModelSpec(**base, family="qwen2"))
    assert inventory(named).tensors == inventory(facts).tensors
    # the generic decoder adds o_proj's bias
    plain = ModelSpec(**base, layout=replace(GENERIC_LAYOUT, known=True))
    assert inventory(plain).total_params == inventory(facts).total_params + 2 * 256


def test_engine_traits_without_a_family_give_the_engines_rules():
    pair = (SlidingWindow(8, 64, window=128), FullAttention(8, 64))
    spec = ModelSpec("swa", pair * 18, num_attention_heads=64)
    hybrid = ModelSpec("swa", pair * 18, num_attention_heads=64,
                       traits=EngineTraits(sglang_hybrid_swa=True, llamacpp_swa=True))
    # SGLang's hybrid SWA pool: full layers 18 x 8 x 64 x 2 (K, V) x 2 B = 36,864 B/token,
    # the sliding pool swa_full_tokens_ratio 0.8 of the full pool's tokens
    p = sglang.profile(hybrid, sglang.SglangConfig(), 79 * GIB, 62 * GIB + GIB // 2, 0.9)
    full_tokens = int(int((62.5 - 79.0 * 0.1) * GIB) // (36864 + 0.8 * 36864))
    assert p.max_total_num_tokens == full_tokens
    assert p.swa_max_total_num_tokens == int(full_tokens * 0.8)
    assert sglang.profile(spec, sglang.SglangConfig(), 79 * GIB, 62 * GIB + GIB // 2, 0.9) \
        .swa_max_total_num_tokens is None
    assert llamacpp.keeps_windows(hybrid) and not llamacpp.keeps_windows(spec)
    # gpt_oss as a reader sees it: the same traits
    named = with_family_facts(ModelSpec("swa", pair * 18, num_attention_heads=64,
                                        family="gpt_oss"))
    assert named.traits == EngineTraits(sglang_hybrid_swa=True, llamacpp_swa=True,
                                        vllm_pp_every_stage_ends=True)
    # TGI: head dim 64 is one flashinfer serves, unless the launcher forces the fallback
    # (flashdecoding on compute capability 8 and up)
    assert tgi.attention_backend(spec, 9) == "flashinfer"
    forced = ModelSpec("t", (FullAttention(8, 64),), traits=EngineTraits(
        tgi_fallback_attention=True))
    assert tgi.attention_backend(forced, 9) == "flashdecoding"
    assert tgi.attention_backend(forced, 7) == "paged"


def test_sparse_mla_without_a_family_is_deepseek_v32s_cache_on_vllm():
    spec = replace(mla(), traits=EngineTraits(sparse_mla=True, vllm_auto_fp8_ds_mla=True))
    assert spec.family is None
    # auto -> fp8_ds_mla (0.11.0): 512 fp8 latent + 512 / 128 x 4 B scales + 64 x 2 B rope =
    # 656 B a layer, plus the indexer's 128 fp8 keys + one fp32 scale = 132 B, on 61 layers
    (stage,) = vllm.layout(spec, vllm.VllmConfig(max_model_len=8192, version=(0, 11, 0)))
    assert stage.per_token_bytes == 61 * (512 + 512 // 128 * 4 + 64 * 2 + 128 + 4) == 48068
    (plain,) = vllm.layout(mla(), vllm.VllmConfig(max_model_len=8192))
    assert plain.per_token_bytes == 61 * (512 + 64) * 2
