"""Property-based fuzzing of everything kvplan reads (issue 11): real configs, library specs,
raw YAML text, plan files, workload strings and command-line flags. Each case ends in a
result or in one KvplanError (exit 2 at the CLI) - never another exception, a traceback or
unbounded memory (each case runs under an address-space cap).

Two sizes of the same tests: a few dozen cases each in the default run (fast), and the
`slow` variants (CI's slow step: `pytest -m slow`) with more than 10,000 cases in all. Every
slow variant checks that it really ran its share.
"""

from __future__ import annotations

import contextlib
import copy
import os
import resource
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostile import change_field
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT
from test_hfconfig_fuzz import check as check_config
from test_hfconfig_fuzz import mutated_configs
from typer.testing import CliRunner

from kvplan.core.dtypes import BF16
from kvplan.core.errors import KvplanError
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.sources.reader import parse_yaml

LIBRARY = {p.name: p.read_text() for p in sorted((ROOT / "model_configs").glob("*.yaml"))}
SPECS = {name: parse_yaml(text, name) for name, text in LIBRARY.items()}
PLAN_TEXT = (ROOT / "docs" / "capacity.example.yaml").read_text()
PLAN = parse_yaml(PLAN_TEXT, "capacity.example.yaml")
EXTRA_MEMORY = 1 << 30  # no single case may grow the process by more than this
runner = CliRunner()


@contextlib.contextmanager
def memory_cap(extra: int = EXTRA_MEMORY) -> Iterator[None]:
    """Lower this process's address-space limit to its current size + `extra` for the body:
    an unbounded allocation fails as a MemoryError (a test failure) instead of swapping."""
    if not sys.platform.startswith("linux"):
        yield
        return
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + extra if hard == resource.RLIM_INFINITY else min(hard, size + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _fuzz(body: Callable[[Any], None], strategy: st.SearchStrategy[Any], default: int,
          slow: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """(a default-run test, a slow test) running `body` on `strategy`'s cases."""
    count = [0]

    def run(case: Any) -> None:
        count[0] += 1
        with memory_cap():
            body(case)

    def make(n: int) -> Callable[[], None]:
        inner = settings(max_examples=n, deadline=None, database=None,
                         suppress_health_check=list(HealthCheck))(given(strategy)(run))

        def test() -> None:
            count[0] = 0
            inner()
            assert count[0] >= n * 9 // 10, f"ran {count[0]} of {n} cases"

        return test

    return make(default), pytest.mark.slow(make(slow))


# --- values a hostile file may hold -------------------------------------------------------

NUMBERS = st.one_of(
    st.sampled_from([0, -1, 1, 7, 16, 10**9, 10**20, 2**53 + 1, 2**64, 1.5, 1e20, -0.0]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
WORDS = st.sampled_from(["full", "sliding", "chunked", "mla", "cross", "state", "none", "bf16",
                         "fp8", "auto", "vllm", "sglang", "llamacpp", "h100", "", "8k", "32k",
                         "1e20", "0", "-1", "24GiB", "8x(1k+1k)", "x" * 200])
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, WORDS, st.text(max_size=8))
VALUES = st.recursive(LEAVES, lambda c: st.one_of(
    st.lists(c, max_size=4), st.dictionaries(st.text(max_size=6), c, max_size=3)),
    max_leaves=10)


def _nodes(node: Any) -> list[Any]:
    out, stack = [], [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)):
            out.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return out


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    """A copy of `base` with 1-4 fields dropped, replaced, nulled or wrapped."""
    raw = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        target = draw(st.sampled_from(_nodes(raw)))
        if isinstance(target, list):
            if target:
                i = draw(st.integers(min_value=0, max_value=len(target) - 1))
                target[i] = draw(st.one_of(VALUES, st.just(copy.deepcopy(target[i]))))
            continue
        keys = sorted(map(str, target)) or ["x"]
        key = draw(st.sampled_from(keys))
        op = draw(st.sampled_from(["drop", "set", "number", "null", "wrap"]))
        if not change_field(draw, target, key, op, VALUES, NUMBERS):
            target[key] = [target.get(key)]  # wrap
    return raw


# --- 1. real config.json files (the mutations of test_hfconfig_fuzz) ----------------------

test_configs, test_configs_slow = _fuzz(check_config, mutated_configs(), 20, 4000)


# --- 2. library specs, as data and as text --------------------------------------------------

def _spec_case(raw: Any) -> None:
    from kvplan.sources.yamlspec import spec_from_dict

    try:
        spec = spec_from_dict(raw, "fuzz.yaml")
    except KvplanError:
        return
    layers = tuple(set(spec.layers))
    assert per_token_bytes(layers, BF16) >= 0
    assert request_bytes(layers, 1000, BF16) >= 0


specs = st.sampled_from(sorted(SPECS)).flatmap(lambda name: mutated(SPECS[name]))
test_specs, test_specs_slow = _fuzz(_spec_case, specs, 20, 3000)

YAML_TOKENS = st.sampled_from([
    "&a ", "*a ", "&b ", "*b ", "[", "]", "{", "}", ", ", ": ", "- ", "\n", "  ", "<<: ",
    "count: ", "repeat: ", "layers: ", "kind: full", "num_kv_heads: 8", "head_dim: 128",
    "1e20", "1.0e+20", ".nan", ".inf", "1000000000", "true", "null", "~", "'", '"', "!!binary ",
    "!!python/object:os.system ", "? ", "|\n", "#", "%YAML 1.1\n", "---\n", "...\n", "\t",
    "\\x00", "name: x\n", "schema: kvplan.model/1\n", "9" * 5000,
])


@st.composite
def yaml_texts(draw: st.DrawFn) -> str:
    if draw(st.booleans()):  # a real spec with junk spliced in
        text = LIBRARY[draw(st.sampled_from(sorted(LIBRARY)))]
        at = draw(st.integers(min_value=0, max_value=len(text)))
        junk = "".join(draw(st.lists(YAML_TOKENS, max_size=6)))
        return text[:at] + junk + text[at:]
    text = "".join(draw(st.lists(YAML_TOKENS, max_size=40)))
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        text += "[" * draw(st.sampled_from([65, 1000, 100_000]))
    return text


def _yaml_case(text: str) -> None:
    try:
        raw = parse_yaml(text, "fuzz.yaml")
    except KvplanError:
        return
    _spec_case(raw)


test_yaml_text, test_yaml_text_slow = _fuzz(_yaml_case, yaml_texts(), 30, 2000)


# --- 3. workload strings ----------------------------------------------------------------------

WORKLOAD_TOKENS = st.sampled_from(["64", "x", "X", "*", "(", ")", "+", ",", "2k", "512", "1m",
                                   "0", "-1", "1e20", "9" * 40, "k", " ", ".5", "8,192", ""])
workloads = st.one_of(st.lists(WORKLOAD_TOKENS, max_size=16).map("".join),
                      st.text(max_size=30))


def _workload_case(text: str) -> None:
    from kvplan.sources.workload import parse_workload

    try:
        w = parse_workload(text)
    except KvplanError:
        return
    assert w.num_requests >= 1 and w.longest >= 1


test_workloads, test_workloads_slow = _fuzz(_workload_case, workloads, 30, 1500)


# --- 4. capacity plan files -------------------------------------------------------------------

@st.composite
def plan_texts(draw: st.DrawFn) -> str:
    raw = draw(mutated(PLAN))
    try:
        return yaml.safe_dump(raw, sort_keys=False)
    except yaml.YAMLError:
        return PLAN_TEXT


def _plan_case(text: str) -> None:
    import tempfile

    from kvplan.planning.check import check_plan, load_plan

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.yaml"
        path.write_text(text)
        try:
            result = check_plan(load_plan(path))
        except KvplanError:
            return
    assert result.results


test_plans, test_plans_slow = _fuzz(_plan_case, plan_texts(), 5, 500)


# --- 5. command-line flags --------------------------------------------------------------------

FLAG_VALUES = st.one_of(WORDS, st.sampled_from(["0", "1", "7", "16", "-3", "1e20",
                                                "100000000000000000000", "nan", "inf", "",
                                                "2k,,4k", "0.5", "1.5", "99.0", "h10O"]))
COMMANDS = {
    "size": ["--tokens", "--batch", "--lengths", "--kv-dtype", "--tp", "--pp", "--block-size",
             "--max-len", "--format", "--units"],
    "plan": ["--gpu", "--count", "--tp", "--context", "--concurrency", "--requests",
             "--engine", "--engine-version", "--block-size", "--max-num-seqs",
             "--gpu-memory-utilization", "--kv-memory", "--gpu-memory", "--max-model-len",
             "--kv-dtype", "-np", "-ctk", "--format"],
    "models": ["--kind", "--kv-dtype", "--format"],
    "gpus": ["--format", "--units"],
}


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    args = [command]
    if command in ("size", "plan"):
        args.append(draw(st.sampled_from(["llama-3.1-8b", "tests/fixtures/tiny.yaml",
                                          "nonexistent", "qwen3-8b", "deepseek-v3"])))
    for flag in draw(st.lists(st.sampled_from(COMMANDS[command]), max_size=4, unique=True)):
        args += [flag, draw(FLAG_VALUES)]
    if command == "plan" and "--gpu" not in args and draw(st.booleans()):
        args += ["--gpu", "h100"]
    return args


def _cli_case(args: list[str]) -> None:
    res = runner.invoke(_app(), args, env={"COLUMNS": "80"})
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.output)
    if res.exception is not None:  # typer.Exit / click's usage errors are SystemExit
        assert isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert "Traceback" not in res.output, args


def _app() -> Any:
    from kvplan.cli import app

    return app


test_cli, test_cli_slow = _fuzz(_cli_case, command_lines(), 8, 500)



def test_a_spec_with_a_key_that_is_not_text_is_refused_cleanly():
    # found by test_yaml_text_slow: `&a : |` parses to a mapping with a null key; the
    # unknown-field check sorted keys of mixed types and raised TypeError
    from kvplan.core.errors import SpecError
    from kvplan.sources.yamlspec import spec_from_dict

    with pytest.raises(SpecError, match="None.*is not a known field"):
        spec_from_dict({None: "kind: full", "name": "x",
                        "layers": [{"kind": "full", "num_kv_heads": 1, "head_dim": 8}]},
                       "fuzz.yaml")
