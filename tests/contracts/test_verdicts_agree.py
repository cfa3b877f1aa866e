"""`plan`, `check` and the front door give one verdict (issue 20).

Every library model on every registered engine, in deployments whose verdict follows from
facts written here, not from kvplan's output:
- fits: one request of C tokens on one GPU with room for the weights twice over at 4 bytes a
  parameter (no checkpoint is wider) and 64 GiB more;
- does not fit: on that GPU, N requests of C tokens where N x C tokens of the model's growing
  layers, at one byte an element (no KV format is smaller than fp8 here), need four times the
  GPU's memory;
- refuses (memory): weights of at least half a byte a parameter (4-bit; no checkpoint in the
  library is smaller) on a GPU of a quarter byte a parameter;
- refuses (context): max_model_len beyond the model's maximum, on the engines whose source
  refuses it (vLLM `_get_and_verify_max_len`, SGLang `ModelConfig._derive_context_length`,
  each unless an environment variable allows it).
Each goes through `kvplan plan -f json` (flags), `kvplan check` (a plan file written here) and
`kvplan.deploy(...).verdict(...)`, and all three must agree on fits / engine starts and on the
exit code (0 fits, 1 does not fit or does not start, 2 kvplan cannot plan it: then the same
error in all three, one where kvplan says it does not model the layout). The whole library
is slow (-m slow); the default run takes three models.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.core.layers import MLA, ChunkedLocal, FullAttention, SlidingWindow
from kvplan.engines.registry import names as engine_names
from kvplan.sources.library import load_library

runner = CliRunner()
GIB = 2**30
SPECS = {s.name: s for s in load_library()}
ENGINES = engine_names()
# engines whose own source refuses a max_model_len beyond the model's maximum context
REFUSE_LONGER = {"vllm", "sglang"}
# three layouts for the default run (dense GQA, MLA, attention + recurrent state); the rest
# of the library, sliding windows included, under -m slow
QUICK = ("llama-3.1-8b", "deepseek-v2-lite", "qwen3-next-80b-a3b")


def _context(spec) -> int:
    return min(spec.max_context_tokens or 4096, 4096)


def _growing_bytes_per_request(spec, tokens: int) -> int:
    """A lower bound of one request's cache: one byte per element of the layers that grow
    with the request (K and V rows; MLA's latent; windows up to their size)."""
    total = 0
    for layer in spec.layers:
        if isinstance(layer, FullAttention):
            total += tokens * 2 * layer.num_kv_heads * layer.head_dim
        elif isinstance(layer, (SlidingWindow, ChunkedLocal)):
            held = min(tokens, getattr(layer, "window", None) or getattr(layer, "chunk", 0))
            total += held * 2 * layer.num_kv_heads * layer.head_dim
        elif isinstance(layer, MLA):
            total += tokens * (layer.kv_lora_rank + layer.qk_rope_head_dim)
    return total


def cases(spec) -> list[tuple[str, dict, int, int]]:
    """(expected verdict, deployment settings, context, concurrency) for one model."""
    ctx = _context(spec)
    out: list[tuple[str, dict, int, int]] = []
    if spec.num_params:
        roomy = math.ceil((spec.num_params * 4 * 2 + 64 * GIB) / GIB)
        base = {"gpu_memory": f"{roomy}GiB", "max_model_len": ctx}
        out.append(("fits", base, ctx, 1))
        per_request = _growing_bytes_per_request(spec, ctx)
        many = math.ceil(4 * roomy * GIB / per_request) if per_request else 10**6
        out.append(("does not fit", base, ctx, max(2, many)))
        small = max(1, spec.num_params // 4 // 2**20)
        out.append(("refuses", {"gpu_memory": f"{small}MiB", "max_model_len": ctx}, ctx, 1))
        if spec.max_context_tokens:
            longer = {**base, "max_model_len": 2 * spec.max_context_tokens}
            out.append(("refuses if the engine does", longer, ctx, 1))
    else:  # no parameter count: nothing independent to size the GPU by; agreement only
        out.append(("", {"gpu_memory": "80GiB", "max_model_len": ctx}, ctx, 1))
    return out


# --- the three paths -----------------------------------------------------------------------

def _flags(settings: dict) -> list[str]:
    return ["--gpu-memory", settings["gpu_memory"], "--max-model-len",
            str(settings["max_model_len"])]


def via_plan(model: str, engine: str, settings: dict, ctx: int, n: int) -> tuple[str, int]:
    res = runner.invoke(app, ["plan", model, "--engine", engine, *_flags(settings),
                              "--context", str(ctx), "--concurrency", str(n), "-f", "json"])
    if res.exit_code == 2:
        return "error: " + res.stderr.strip().splitlines()[0], 2
    assert "Traceback" not in res.output, res.output
    doc = json.loads(res.stdout)  # one JSON document, whatever the verdict
    return _name(doc["fits"], doc["engine_starts"]), res.exit_code


def via_check(model: str, engine: str, settings: dict, ctx: int, n: int,
              tmp: Path) -> tuple[str, int]:
    plan = tmp / "plan.yaml"
    plan.write_text(
        "schema: kvplan.capacity/1\ndeployments:\n"
        f"  - name: d\n    model: {model}\n    gpu_memory: {settings['gpu_memory']}\n"
        f"    max_model_len: {settings['max_model_len']}\n    engine: {engine}\n"
        f"    requires:\n      min_concurrency: {{concurrency: {n}, context: {ctx}}}\n")
    res = runner.invoke(app, ["check", str(plan), "-f", "json"])
    if res.exit_code == 2:
        # the plan reader prefixes the file, line and field; the problem itself follows
        line = res.stderr.strip().splitlines()[0]
        return "error: kvplan: error: " + line.rsplit("': ", 1)[-1], 2
    doc = json.loads(res.stdout)
    starts = all(r["passed"] for r in doc["results"] if r["kind"] == "engine_starts")
    return _name(doc["passed"], starts), res.exit_code


def via_front_door(model: str, engine: str, settings: dict, ctx: int, n: int
                   ) -> tuple[str, int]:
    import kvplan

    try:
        v = kvplan.deploy(model, engine=engine, **settings).verdict(ctx, n)
    except KvplanError as exc:
        return f"error: kvplan: error: {exc.message}", exc.exit_code
    return _name(v.fits, v.engine_starts), 0 if v.fits else 1


def _name(fits: bool, starts: bool) -> str:
    return "fits" if fits else "does not fit" if starts else "refuses"


def _params(models):
    for model in models:
        for engine in ENGINES:
            for i, (expected, settings, ctx, n) in enumerate(cases(SPECS[model])):
                yield pytest.param(model, engine, expected, settings, ctx, n,
                                   id=f"{model}-{engine}-{expected or 'any'}-{i}")


def _agree(model, engine, expected, settings, ctx, n, tmp_path):
    plan = via_plan(model, engine, settings, ctx, n)
    check = via_check(model, engine, settings, ctx, n, tmp_path)
    door = via_front_door(model, engine, settings, ctx, n)
    assert plan == check == door, (plan, check, door)
    verdict, code = plan
    assert code == {"fits": 0, "does not fit": 1, "refuses": 1}.get(verdict, 2)
    if verdict.startswith("error"):
        # only where kvplan says by name that it does not model this layout on this engine
        assert "kvplan" in verdict.removeprefix("error: kvplan: error: "), verdict
        return
    if expected == "refuses if the engine does":
        expected = "refuses" if engine in REFUSE_LONGER else ""
    if expected:
        assert verdict == expected


@pytest.mark.parametrize(("model", "engine", "expected", "settings", "ctx", "n"),
                         list(_params(QUICK)))
def test_plan_check_and_front_door_agree(model, engine, expected, settings, ctx, n, tmp_path):
    _agree(model, engine, expected, settings, ctx, n, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "engine", "expected", "settings", "ctx", "n"),
                         list(_params(sorted(set(SPECS) - set(QUICK)))))
def test_every_library_model_agrees(model, engine, expected, settings, ctx, n, tmp_path):
    _agree(model, engine, expected, settings, ctx, n, tmp_path)


def test_the_two_disagreements_of_issue_20_are_gone(tmp_path):
    """Llama-3.1-8B under SGLang at max_model_len 1,000,000 (past its 131,072) and
    Llama-3.1-70B on two H100s (131 GiB of bf16 weights leave ~4 GiB a GPU; vLLM needs 8,192
    blocks of 2.5 MiB a GPU for one 131,072-token request: 20 GiB): both refuse to start, in
    plan and in check, exit 1."""
    sglang = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang",
                                 "--max-model-len", "1000000", "-f", "json"])
    assert sglang.exit_code == 1
    doc = json.loads(sglang.stdout)
    assert (doc["fits"], doc["engine_starts"]) == (False, False)
    assert "131,072" in doc["reason"] and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in \
        sglang.stderr and "VLLM" not in sglang.stderr
    two = runner.invoke(app, ["plan", "llama-3.1-70b", "--gpu", "h100", "--count", "2",
                              "-f", "json"])
    assert two.exit_code == 1
    doc = json.loads(two.stdout)
    assert (doc["fits"], doc["engine_starts"]) == (False, False)
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 B / TP 2 = 163,840 B a token a GPU
    per_token = 80 * 8 * 128 * 2 * 2 // 2
    assert doc["budget_terms"]["kv_cache_bytes"] < 131072 * per_token
    plan = tmp_path / "p.yaml"
    plan.write_text("schema: kvplan.capacity/1\ndeployments:\n"
                    "  - {name: a, model: llama-3.1-8b, gpu: h100, engine: sglang,\n"
                    "     max_model_len: 1000000, requires: {min_concurrency: "
                    "{concurrency: 1, context: 8k}}}\n"
                    "  - {name: b, model: llama-3.1-70b, gpu: h100, count: 2,\n"
                    "     requires: {min_concurrency: {concurrency: 1, context: 8k}}}\n")
    res = runner.invoke(app, ["check", str(plan), "-f", "json"])
    assert res.exit_code == 1, res.output
    rows = {r["deployment"]: r for r in json.loads(res.stdout)["results"]
            if r["kind"] == "engine_starts"}
    assert set(rows) == {"a", "b"} and not rows["a"]["passed"] and not rows["b"]["passed"]
    assert rows["a"]["measured"] == 131072  # the most SGLang admits: the model's maximum


def test_a_request_longer_than_max_model_len_is_bad_input_everywhere(tmp_path):
    """64k tokens asked of a deployment whose max_model_len is 32k: no setting of it could
    admit one, so plan, check and the front door all refuse the question (exit 2) with the
    same words, rather than one of them answering 'does not fit'."""
    import kvplan

    plan = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len",
                               "32k", "--context", "64k", "-f", "json"])
    file = tmp_path / "p.yaml"
    file.write_text("schema: kvplan.capacity/1\ndeployments:\n"
                    "  - {name: a, model: llama-3.1-8b, gpu: h100, max_model_len: 32k,\n"
                    "     requires: {min_concurrency: {concurrency: 1, context: 64k}}}\n")
    check = runner.invoke(app, ["check", str(file), "-f", "json"])
    with pytest.raises(KvplanError) as door:
        kvplan.deploy("llama-3.1-8b", gpu="h100", max_model_len="32k").verdict("64k")
    words = "65,536 tokens is longer than the deployment's max_model_len 32,768"
    assert plan.exit_code == check.exit_code == door.value.exit_code == 2
    assert words in plan.stderr and words in check.stderr and words in door.value.message
