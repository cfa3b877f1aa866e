"""Cost that grows with the question, not the input: workloads reduced once to their distinct
shapes and summed in closed form, and `plan --find-gpus` answering "nothing fits" as such.

Timings are in benchmarks/ (find_gpus.py); these tests pin results and call counts."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import paths
import pytest
from factories import dense
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.planning import plan
from kvplan.sources.workload import Workload, parse_workload

GIB = 2**30
FIXTURES = paths.FIXTURES / "engines" / "models"
LLAMA8B = str(FIXTURES / "llama-3.1-8b.yaml")
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "120"})


def llama70b_on_h100() -> plan.Deployment:
    spec = replace(dense(layers=80, heads=64), name="llama-3.1-70b", num_params=70553706496)
    return plan.Deployment(spec, gpu_name="H100 SXM", gpu_memory_bytes=85028896768,
                           max_model_len=131072)


def _write_jsonl(path: Path, shapes: list[tuple[int, int]]) -> Path:
    path.write_text("".join(json.dumps({"prompt_tokens": p, "output_tokens": o}) + "\n"
                            for p, o in shapes))
    return path


# --- the file is its histogram -------------------------------------------------------------

def test_file_of_72_requests_is_the_72_request_mix(tmp_path):
    shapes = [(2048, 512)] * 64 + [(32768, 1024)] * 8
    random.Random(7).shuffle(shapes)
    from_file = parse_workload(str(_write_jsonl(tmp_path / "w.jsonl", shapes)))
    mix = parse_workload("64x(2k+512),8x(32k+1k)")
    assert sorted(from_file.shapes) == sorted(mix.shapes) == [
        ((2048, 512, 1), 64), ((32768, 1024, 1), 8)]
    dep = llama70b_on_h100()
    a = plan.fewest_gpus(dep, plan.Target(workload=from_file))
    b = plan.fewest_gpus(dep, plan.Target(workload=mix))
    assert a.best is not None and a.best == b.best and a.options == b.options


def test_100k_requests_answer_as_the_mix_with_the_same_histogram(tmp_path):
    # 100,000 requests drawn from 72 shapes: the same answer as the mix that states the
    # same 72 counts, whatever order the lines come in
    rng = random.Random(13)
    kinds = [(1024 * (1 + i % 24), 128 * (1 + i // 24)) for i in range(72)]
    shapes = [rng.choice(kinds) for _ in range(100_000)]
    from_file = parse_workload(str(_write_jsonl(tmp_path / "big.jsonl", shapes)))
    counts = {k: shapes.count(k) for k in kinds}
    mix = parse_workload(",".join(f"{c}x({p}+{o})" for (p, o), c in counts.items() if c))
    assert from_file.num_requests == 100_000 and len(from_file.shapes) == 72
    assert sorted(from_file.shapes) == sorted(mix.shapes)
    dep = llama70b_on_h100()
    a = plan.fewest_gpus(dep, plan.Target(workload=from_file))
    b = plan.fewest_gpus(dep, plan.Target(workload=mix))
    assert a.options == b.options and a.best == b.best


def test_identical_lines_are_parsed_once(tmp_path, monkeypatch):
    calls = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda s, *a, **k: calls.append(s) or real(s, **k))
    path = _write_jsonl(tmp_path / "w.jsonl", [(100, 10)] * 5000 + [(200, 20)] * 5000)
    w = parse_workload(str(path))
    assert w.shapes == (((100, 10, 1), 5000), ((200, 20, 1), 5000))
    assert len(calls) == 1 and calls[0].count("{") == 2  # two distinct lines, one parse


def test_a_plain_file_is_decoded_without_a_parse_per_line(tmp_path, monkeypatch):
    calls = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda s, *a, **k: calls.append(s) or real(s, **k))
    # distinct lines (a file of few shapes is read as its distinct lines, the test above)
    shapes = [(100 + i, 10 + i % 7) for i in range(10_000)]
    path = _write_jsonl(tmp_path / "w.jsonl", shapes)
    w = parse_workload(str(path))
    assert w.shapes == tuple(((p, o, 1), 1) for p, o in shapes)
    assert len(calls) == 1 and calls[0].count("{") == 1  # only the first line, for its keys


# --- closed form over the histogram, computed once -----------------------------------------

def _per_request_reference(constraint: plan.Constraint, w: Workload) -> tuple[int, int]:
    """The rule written out one request at a time: each sequence holds its blocks; a
    request's n samples share the prompt's whole blocks; all requests share the common
    prefix's whole blocks."""
    def blocks(need: plan.Need, tokens: int) -> int:
        if need.kind == "fixed":
            return need.fixed * need.weight
        held = min(tokens, need.cap) if need.kind == "window" else tokens
        return (cdiv(held, need.block_size) + need.extra_blocks) * need.weight

    def shared(need: plan.Need, tokens: int) -> int:
        return tokens // need.block_size * need.weight if need.shareable else 0

    needed = saved = 0
    requests = 0
    for g in w.groups:
        for _ in range(g.count):
            requests += 1
            for need in constraint.needs:
                needed += g.n * blocks(need, g.tokens)
                needed -= (g.n - 1) * shared(need, g.prompt_tokens)
                saved += (g.n - 1) * shared(need, g.prompt_tokens)
    if w.shared_prefix_tokens and requests > 1:
        per = sum(shared(need, w.shared_prefix_tokens) for need in constraint.needs)
        needed -= (requests - 1) * per
        saved += (requests - 1) * per
    return needed, saved


needs = st.one_of(
    st.builds(plan.Need, st.just("full"), st.sampled_from([1, 16, 32]),
              shareable=st.booleans(), weight=st.integers(1, 3)),
    st.builds(plan.Need, st.just("window"), st.sampled_from([1, 16]), cap=st.integers(1, 5000),
              extra_blocks=st.integers(0, 1), weight=st.integers(1, 3)),
    st.builds(plan.Need, st.just("fixed"), fixed=st.integers(1, 4), weight=st.integers(1, 9)),
)


@settings(max_examples=150, deadline=None)
@given(needs=st.lists(needs, min_size=1, max_size=3),
       groups=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 4000), st.integers(0, 900),
                                 st.integers(1, 3)), min_size=1, max_size=6),
       prefix=st.integers(0, 100))
def test_closed_form_equals_the_per_request_rule(needs, groups, prefix):
    shortest = min(p for _, p, _, _ in groups)
    w = Workload.of((plan.RequestGroup(*g) for g in groups), min(prefix, shortest))
    c = plan.Constraint("pool", "block", 10**9, tuple(needs))
    assert plan.workload_units(c, w) == _per_request_reference(c, w)


def test_workload_is_summed_once_not_per_layout(tmp_path, monkeypatch):
    rng = random.Random(3)
    shapes = [(rng.randint(100, 8000), rng.randint(10, 1000)) for _ in range(3000)]
    w = parse_workload(str(_write_jsonl(tmp_path / "r.jsonl", shapes)))
    lengths = {t for t, _ in w.sequences_by_tokens}
    calls = {"units": 0, "shared": 0}
    units, shared = plan.Need.units, plan.Need.shared_units

    def count_units(self, tokens):
        # the engines ask too (blocks at max_model_len for their start-up numbers): count
        # only the workload's lengths
        calls["units"] += tokens in lengths
        return units(self, tokens)

    def count_shared(self, tokens):
        calls["shared"] += 1
        return shared(self, tokens)

    monkeypatch.setattr(plan.Need, "units", count_units)
    monkeypatch.setattr(plan.Need, "shared_units", count_shared)
    result = plan.fewest_gpus(llama70b_on_h100(), plan.Target(workload=w))
    tried = [o for o in result.options if not o.error]
    assert len(tried) > 10  # many layouts, many pipeline stages (constraints)
    # every layout of a dense model asks for the same need (full attention, 16-token
    # blocks): one pass over the distinct lengths in all, not one per layout or stage
    assert calls["units"] == len(lengths)
    assert calls["shared"] == 0  # one sample per request, no common prefix


# --- "nothing fits" is an answer -------------------------------------------------------------

def test_find_gpus_when_nothing_fits_answers_exit_1(tmp_path):
    # 20,000 requests of 4,000 tokens at 128 KiB per token: 9.8 TiB of KV, more than 64
    # GPUs of 24 GiB hold, so no layout meets it
    path = _write_jsonl(tmp_path / "w.jsonl", [(3000, 1000)] * 20000)
    res = invoke("plan", LLAMA8B, "--gpu-memory", "24GiB", "--requests", str(path),
                 "--find-gpus", "-f", "json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["answer"]["fewest_gpus"] is None and doc["answer"]["fits"] is False
    assert doc["target_met"] is False
    # the figures shown are the largest layout tried: 64 GPUs (TP 32 x PP 2: 32 heads)
    assert doc["deployment"]["num_gpus"] == 64
    assert "no layout of up to 64 GPUs" in res.stderr


def test_find_gpus_when_no_layout_can_start_exit_1():
    res = invoke("plan", LLAMA8B, "--gpu-memory", "100MiB", "--context", "1k",
                 "--find-gpus")
    assert res.exit_code == 1
    assert "no layout of up to 64 GPUs meets" in res.stderr


# --- the fast reader agrees with the slow one ------------------------------------------------

def test_lines_that_only_parse_together_are_refused(tmp_path):
    # joined into one JSON array these two lines would be one object; each alone is not JSON
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": 10, "output": [1\n2]}\n')
    with pytest.raises(BadInputError, match="line 1: not valid JSON"):
        parse_workload(str(path))
    split = tmp_path / "s.jsonl"
    split.write_text('{"prompt": 10, "output": 1}, {"prompt": 20, "output": 2}\n')
    with pytest.raises(BadInputError, match="line 1: not valid JSON"):
        parse_workload(str(split))


def test_mixed_names_and_text_values_read_row_by_row(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt_tokens": 100, "output_tokens": 10}\n'
                    '{"input": "100", "max_tokens": 10.0}\n'
                    '{"prompt_tokens": null, "prompt": 100, "output": 10, "n": 2}\n')
    assert sorted(parse_workload(str(path)).shapes) == [((100, 10, 1), 2), ((100, 10, 2), 1)]
    csv = tmp_path / "w.csv"
    csv.write_text("prompt,output,n\n100,10,1\n\n100,10,\n7,1,3\n")
    assert sorted(parse_workload(str(csv)).shapes) == [((7, 1, 3), 1), ((100, 10, 1), 2)]
    bad = tmp_path / "bad.csv"
    bad.write_text("prompt,output\n100,10\n\n100,x\n")
    with pytest.raises(BadInputError, match="line 4: output must be a whole number"):
        parse_workload(str(bad))
    quoted = tmp_path / "q.csv"
    quoted.write_text('prompt,output\n"100",10\n"200","20"\n')
    assert sorted(parse_workload(str(quoted)).shapes) == [((100, 10, 1), 1), ((200, 20, 1), 1)]


def test_same_shape_twice_in_a_mix_is_one_shape():
    w = parse_workload("8x(2k+512),8x(2k+512),(1k+1)")
    assert w.shapes == (((2048, 512, 1), 16), ((1024, 1, 1), 1))
    assert w.num_requests == 17


# --- size: a batch is a multiplier ---------------------------------------------------------

def _size_per_request(spec, fmt, lengths, tp, pp, block, max_len):
    """`kvplan size`'s figures summed one request at a time (the rule before batches were
    multiplied): exact, paged (whole blocks per layer; state layers one state) and
    contiguous (every request at max_len), the largest pipeline stage each."""
    from kvplan.core.sizing import pp_stages

    stages = [spec.layers[a:b] for a, b in pp_stages(spec.num_layers, pp)]

    def per_stage(stage, slots_of):
        total = 0
        for n in lengths:
            for layer in stage:
                slots = slots_of(layer, n)
                total += (layer.bytes_for_tokens(slots, fmt, tp) if slots
                          else layer.request_bytes(n, fmt, tp))
        return total

    exact = [sum(layer.request_bytes(n, fmt, tp) for n in lengths for layer in stage)
             for stage in stages]
    return {
        "batch_bytes": sum(layer.request_bytes(n, fmt) for n in lengths for layer in spec.layers),
        "per_gpu_batch_bytes": max(exact), "all_gpus_batch_bytes": sum(exact) * tp,
        "paged_batch_bytes": max(per_stage(s, lambda ly, n: ly.paged_tokens(n, block))
                                 for s in stages),
        "contiguous_batch_bytes": max(per_stage(s, lambda ly, n: ly.contiguous_tokens(
            max(max_len, n))) for s in stages),
    }


def _model_of(kinds: list[str]):
    from factories import (
        MLA,
        ChunkedLocal,
        FullAttention,
        ModelSpec,
        RecurrentState,
        SlidingWindow,
        StateTensor,
    )

    make = {"full": FullAttention(8, 128), "sliding": SlidingWindow(8, 128, window=4096),
            "chunked": ChunkedLocal(8, 64, chunk=8192), "mla": MLA(512, 64),
            "state": RecurrentState("mamba2", (StateTensor("ssm", (8, 64, 16), 4, tp_axis=0),))}
    return ModelSpec("gen", tuple(make[k] for k in kinds), num_attention_heads=64)


@settings(max_examples=60, deadline=None)
@given(spec=st.lists(st.sampled_from(["full", "sliding", "chunked", "mla", "state"]),
                     min_size=1, max_size=6),
       lengths=st.lists(st.integers(1, 40_000), min_size=1, max_size=12),
       tp=st.sampled_from([1, 2, 8]), pp=st.sampled_from([1, 2]),
       block=st.sampled_from([1, 16, 256]))
def test_size_by_multiplying_equals_request_by_request(spec, lengths, tp, pp, block):
    from kvplan.core.dtypes import BF16
    from kvplan.core.sizing import size

    model = _model_of(spec)
    pp = min(pp, model.num_layers)
    max_len = max(lengths)
    listed = size(model, BF16, lengths=lengths, tp=tp, pp=pp, block_size=block,
                  max_len=max_len)
    want = _size_per_request(model, BF16, lengths, tp, pp, block, max_len)
    assert {k: getattr(listed, k) for k in want} == want
    assert listed.lengths == tuple(lengths) and listed.batch == len(lengths)
    # B requests of N tokens, given as a count, as a list, or as a mapping: one answer
    n, b = lengths[0], len(lengths)
    counted = size(model, BF16, tokens=n, batch=b, tp=tp, pp=pp, block_size=block,
                   max_len=max_len)
    assert counted == size(model, BF16, lengths=[n] * b, tp=tp, pp=pp, block_size=block,
                           max_len=max_len)
    assert counted == size(model, BF16, lengths={n: b}, tp=tp, pp=pp, block_size=block,
                           max_len=max_len)


def test_a_million_requests_are_one_length_times_a_million(monkeypatch):
    from kvplan.core.dtypes import BF16
    from kvplan.core.layers import FullAttention
    from kvplan.core.sizing import size

    calls = []
    real = FullAttention.request_bytes
    monkeypatch.setattr(FullAttention, "request_bytes",
                        lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    r = size(dense(layers=32), BF16, tokens=8192, batch=10**6)
    assert r.batch_bytes == 10**6 * 32 * 2 * 8 * 128 * 2 * 8192
    assert r.length_runs == ((8192, 10**6),) and r.batch == 10**6
    assert len(calls) < 32 * 10  # a few passes over the 32 layers, none per request


def test_size_json_states_a_batch_as_a_count_not_a_list():
    # kvplan.size/2: a batch of a million equal requests is one [length, count] pair (the
    # /1 schema listed every request's length: 12 MB of JSON at --batch 1000000)
    res = invoke("size", "llama-3.1-8b", "--tokens", "8k", "--batch", "1000000", "-f", "json")
    doc = json.loads(res.stdout)
    assert doc["inputs"]["length_counts"] == [[8192, 10**6]] and len(res.stdout) < 5000
    assert doc["batch_bytes"] == 10**6 * 32 * 2 * 8 * 128 * 2 * 8192  # Llama-3.1-8B, bf16
    mixed = json.loads(invoke("size", "llama-3.1-8b", "--lengths", "1k,2k,1k,1k", "-f",
                              "json").stdout)
    assert mixed["inputs"]["length_counts"] == [[1024, 1], [2048, 1], [1024, 2]]  # in order
    assert mixed["inputs"]["batch"] == 4


def test_weight_inventory_is_built_once_per_tp_not_per_layout(monkeypatch):
    from kvplan.core import weights
    from kvplan.sources.gpus import find_gpu
    from kvplan.sources.library import resolve

    built = []
    real = weights._inventory
    monkeypatch.setattr(weights, "_inventory", lambda *a: built.append(a[2]) or real(*a))
    monkeypatch.setattr(weights, "_INVENTORIES", {})
    dep = plan.Deployment(resolve("llama-3.1-70b")).with_gpu(find_gpu("h100"))
    result = plan.fewest_gpus(dep, plan.Target(context_tokens=131072, concurrency=10**6))
    assert result.best is None and len(result.options) == 28  # every layout up to 64 GPUs
    # 28 layouts, seven tensor-parallel degrees (1..64): one inventory each
    assert sorted(built) == sorted({o.tp for o in result.options}) == [1, 2, 4, 8, 16, 32, 64]


# --- the library: names and aliases from an index, one file parsed -------------------------

def test_library_index_agrees_with_parsing_every_spec():
    from kvplan.sources.library import _normalise, library_index, load_library

    parsed: dict[str, set[str]] = {}
    for spec in load_library():
        for alias in (spec.name, *spec.aliases):
            parsed.setdefault(_normalise(alias), set()).add(spec.name)
    index = library_index()
    assert {k: {p.stem for p in v} for k, v in index.aliases.items()} == parsed
    assert sorted(index.names) == sorted(s.name for s in load_library())


def test_a_name_or_alias_parses_one_spec_and_a_miss_parses_none(monkeypatch):
    import kvplan.sources.yamlspec as yamlspec
    from kvplan.core.errors import UnknownModelError
    from kvplan.sources import library
    from kvplan.sources.library import resolve

    monkeypatch.setattr(library, "_INDEX", {})  # no index (and no alias found) from before
    parsed = []
    real = yamlspec.load_yaml_file
    monkeypatch.setattr(yamlspec, "load_yaml_file", lambda p: parsed.append(p) or real(p))
    assert resolve("llama-3.1-8b").name == "llama-3.1-8b"
    assert resolve("meta-llama/Llama-3.1-8B-Instruct").name == "llama-3.1-8b"
    assert len(parsed) == 2
    # the same alias again, in any case: found once per process (explain and --from-command
    # resolve a Hub name twice), parsed once
    assert resolve("Meta-Llama/Llama-3.1-8B-INSTRUCT").name == "llama-3.1-8b"
    assert len(parsed) == 2
    with pytest.raises(UnknownModelError, match="did you mean: llama-3.1-8b"):
        resolve("llama-3.1-8")
    assert len(parsed) == 2  # the suggestion came from the index, no spec was parsed


def test_a_library_file_written_by_hand_is_parsed_for_its_aliases(tmp_path, monkeypatch):
    from kvplan.sources.library import resolve

    (tmp_path / "mine.yaml").write_text(
        "schema: kvplan.model/1\nname: mine\naliases:\n  - acme/mine-7b\n  - 'mine, v2'\n"
        "layers:\n  - {kind: full, count: 2, num_kv_heads: 2, head_dim: 64}\n")
    monkeypatch.setenv("KVPLAN_MODEL_PATH", str(tmp_path))
    assert resolve("mine, v2").name == "mine"
    assert resolve("acme/mine-7b").name == "mine"


def test_the_library_index_is_read_once_until_a_file_changes(tmp_path, monkeypatch):
    # explain and --from-command resolve a Hub name twice (the log's or command's model,
    # then the deployment's); the index of every library file was read each time
    import os

    from kvplan.sources import library

    spec = "schema: kvplan.model/1\nname: mine\naliases: [acme/mine-7b]\n" \
        "layers:\n  - {kind: full, count: 2, num_kv_heads: 2, head_dim: 64}\n"
    (tmp_path / "mine.yaml").write_text(spec)
    monkeypatch.setenv("KVPLAN_MODEL_PATH", str(tmp_path))
    built = []
    real = library.LibraryIndex
    monkeypatch.setattr(library, "LibraryIndex", lambda *a: built.append(1) or real(*a))
    assert library.resolve("acme/mine-7b").name == "mine"
    assert library.resolve("acme/mine-7b").name == "mine"
    assert len(built) == 1
    # the file changes (a new alias, a later modification time): read again, and found
    (tmp_path / "mine.yaml").write_text(spec.replace("acme/mine-7b", "acme/mine-8b"))
    stamp = (tmp_path / "mine.yaml").stat().st_mtime_ns + 10**9
    os.utime(tmp_path / "mine.yaml", ns=(stamp, stamp))
    assert library.resolve("acme/mine-8b").name == "mine"
    assert len(built) == 2


# --- start-up: each command imports what it uses -------------------------------------------

def test_size_imports_neither_the_planner_nor_other_commands():
    from probes import probe

    result = probe(["size", "llama-3.1-8b", "--tokens", "8k"],
                   ("kvplan.cli.plan", "kvplan.planning.plan", "kvplan.cli.validate",
                    "kvplan.cli.sweep", "rich._emoji_codes", "csv", "json"))
    assert result.ran and result.loaded == []


def test_plan_without_requests_does_not_read_workloads():
    from probes import probe

    result = probe(["plan", "llama-3.1-8b", "--gpu", "h100", "--context", "8k"],
                   ("kvplan.planning.plan", "kvplan.sources.workload", "kvplan.cli.model",
                    "kvplan.cli.compare",  # compare's options are not built for plan
                    # vLLM's flag table and log lines (read by --from-command and explain),
                    # DeepSeek-V4's cache stages, llama.cpp's engine: not this plan's
                    "kvplan.engines.vllm.text", "kvplan.core.launch",
                    "kvplan.engines.vllm.deepseek_v4", "kvplan.engines.llamacpp.engine"))
    assert result.ran and result.loaded == ["kvplan.planning.plan"]


@pytest.mark.parametrize("argv", [
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--context", "8k"],
    ["explain", "tests/fixtures/logs/vllm-v1-llama-3.1-8b.log"],
    ["plan", "--from-command", "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size"
     " 2", "--gpu", "h100"],
], ids=["plan", "explain", "from-command"])
def test_library_models_and_catalog_gpus_are_read_without_pyyaml(argv):
    # importing PyYAML is a fifth of a plan's start-up: kvplan's own files are in the plain
    # subset kvplan.sources.plainyaml reads (tests/sources/test_plainyaml.py)
    from probes import probe

    result = probe(argv, ("yaml",))
    assert result.ran and result.loaded == [], result.stderr


def test_size_and_plan_signatures_are_not_strings_typer_must_compile():
    # typer reads a command's signature four times at start-up; string annotations (from
    # `from __future__ import annotations`) are compiled at each read: ~3 ms for plan
    from importlib import import_module

    from kvplan.cli import compare as compare_cli
    from kvplan.cli import explain as explain_cli
    from kvplan.cli import gpus as gpus_cli
    from kvplan.cli import model as model_cli
    from kvplan.cli import options as options_cli
    from kvplan.cli import plan as plan_cli
    from kvplan.cli import whatif as whatif_cli

    app_cli = import_module("kvplan.cli.app")  # `kvplan.cli.app` as an attribute is the app

    # the app's version option and the option callbacks typer reads as well
    for command in (model_cli.size, plan_cli.plan, compare_cli.compare, explain_cli.explain,
                    whatif_cli.whatif, gpus_cli.gpus, app_cli._version_option,
                    app_cli._print_version, options_cli._one_of(("a", "b"))):
        hints = command.__annotations__
        assert hints and not [k for k, v in hints.items() if isinstance(v, str)], command
