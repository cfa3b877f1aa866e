"""Hostile and careless input, the last cases of issue 25: `explain -` with standard input
closed, binary or too large; a zero, unreadable or refused KV figure in a start-up log (a
difference, never "ok"); an unbalanced quote in a container's `command:`/`args:` string.
Each ends in one message with exit 2, or (a KV line that does not agree) exit 1."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hostile import invoke, one_message
from paths import FIXTURES, ROOT

LOG = (FIXTURES / "logs" / "vllm-v1-llama-3.1-8b.log").read_text()
# Llama-3.1-8B, vLLM V1, 50.00 GiB logged: 32 layers x 8 KV heads x head_dim 128, K and V,
# 2 bytes (bf16) = 131,072 bytes a token; 50 GiB / 131,072 = 409,600 tokens (25,600 blocks
# of 16), the figure kvplan recomputes for the log's "GPU KV cache size" line.
TOKENS_AT_50_GIB = 50 * 2**30 // (32 * 8 * 128 * 2 * 2)
def _closed_stdin(*args: str) -> subprocess.CompletedProcess[str]:
    """kvplan started with file descriptor 0 closed (`kvplan ... 0<&-`): sys.stdin is None."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    env.pop("KVPLAN_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True,
                          text=True, env=env, timeout=120, stdin=None,
                          preexec_fn=lambda: os.close(0))


# --- `explain -`: standard input read with a file's limits ---------------------------------

def test_explain_dash_with_stdin_closed_is_one_message():
    res = _closed_stdin("explain", "-")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.stderr.splitlines()[0] == \
        "kvplan: error: the log on standard input (-): standard input is closed", res.stderr


def test_lengths_at_dash_with_stdin_closed_is_one_message():
    res = _closed_stdin("size", "llama-3.1-8b", "--lengths", "@-")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    assert "--lengths @-: standard input is closed" in res.stderr


def test_explain_dash_with_binary_input_names_the_byte():
    res = invoke("explain", "-", input=b"INFO vllm \xff\xfe\x00 not text")
    one_message(res, "standard input is not UTF-8 text")
    assert "at byte 10" in res.stderr


def test_explain_dash_reads_no_more_than_the_log_limit(monkeypatch):
    from kvplan.sources import startlog

    monkeypatch.setattr(startlog, "MAX_LOG_BYTES", 2**20)
    res = invoke("explain", "-", input=LOG + "x" * 2**20)
    one_message(res, "standard input is larger than 1 MiB")


def test_explain_dash_reads_a_log_as_a_file_would_be_read():
    res = invoke("explain", "-", "-f", "json", input="\ufeff" + LOG)
    assert res.exit_code == 0, res.output
    assert f'"kvplan": {TOKENS_AT_50_GIB}' in res.stdout


# --- a zero, unreadable or refused KV figure: a difference, never "ok" -----------------------

def _explain(text: str):
    from kvplan.planning.explain import explain

    return explain(text, model="llama-3.1-8b")


def test_a_logged_zero_tokens_is_a_difference():
    result = _explain(LOG.replace("409,584 tokens", "0 tokens"))
    row = next(r for r in result.rows if r.quantity == "kv_cache_tokens")
    assert (row.logged, row.kvplan, row.status) == (0, TOKENS_AT_50_GIB, "DIFF")
    assert not result.ok


@pytest.mark.parametrize("figure", [",,,", "1" * 400 + ".00"])
def test_a_kv_figure_kvplan_cannot_read_is_a_difference_not_an_omission(figure):
    # a token count of only separators, a concurrency beyond a float (10^399): the line is
    # there, its figure is not a number; "ok" by leaving it out would hide it
    if "." in figure:
        text = LOG.replace("12.50x", figure + "x")
        quantity = "max_concurrency"
    else:
        text = LOG.replace("409,584", figure)
        quantity = "kv_cache_tokens"
    result = _explain(text)
    row = next(r for r in result.rows if r.quantity == quantity)
    assert row.status == "DIFF" and row.logged is None, row
    assert not result.ok
    assert any(n.startswith(f"{quantity}: the log prints this line") for n in result.notes)
    path_res = invoke("explain", "-", input=text)
    assert path_res.exit_code == 1, path_res.output


@pytest.mark.parametrize("old,new,quantity", [
    ("409,584 tokens", "0.0 tokens", "kv_cache_tokens"),  # a count printed as a float
    ("409,584 tokens", " tokens", "kv_cache_tokens"),  # no figure at all
    ("409,584 tokens", "-5 tokens", "kv_cache_tokens"),
    ("12.50x", "1e3x", "max_concurrency"),
    ("Available KV cache memory: 50.00 GiB", "Available KV cache memory: 5e1 GiB",
     "logged KV budget")])
def test_a_kv_line_whose_figure_is_misprinted_is_named_not_skipped(old, new, quantity):
    # the line's pattern reads only the engine's own figures; a line that holds the line's
    # words around anything else was once skipped, and the log then read as "ok"
    text = LOG.replace(old, new)
    result = _explain(text)
    row = next(r for r in result.rows if r.quantity == quantity)
    assert row.status == "DIFF" and row.logged is None and new.strip() in row.line, row
    assert not result.ok
    res = invoke("explain", "-", "-m", "llama-3.1-8b", input=text)
    assert res.exit_code == 1, res.output
    assert "not a number kvplan can read" in res.output


@pytest.mark.parametrize("budget_line,why", [
    # 0.00 GiB is a budget below 0.005 GiB: the log's GPU KV cache size of the 50 GiB budget
    # is far outside what it holds, so a difference, not a refusal (the digit allows > 0)
    ("Available KV cache memory: 0.00 GiB", "below its printed precision"),
    ("Available KV cache memory: -2.14 GiB", "refused to start")])
def test_a_logged_budget_of_zero_or_less_is_never_ok(budget_line, why):
    res = invoke("explain", "-", "-m", "llama-3.1-8b",
                 input=LOG.replace("Available KV cache memory: 50.00 GiB", budget_line))
    assert res.exit_code == 1, res.output
    assert why in res.output
    assert "OK:" not in res.stdout


# --- an unbalanced quote in a container's command:/args: string ------------------------------

@pytest.mark.parametrize("key,text", [
    ("command", 'command: vllm serve "meta-llama/Llama-3.1-8B-Instruct\nargs: ["--tp", "2"]\n'),
    ("args", "command: [vllm, serve]\nargs: \"meta-llama/Llama-3.1-8B-Instruct --tp '2\"\n"),
    ("command", 'containers:\n- name: x\n  command: "vllm serve \'x"\n')])
def test_an_unbalanced_quote_in_a_container_string_names_the_field(key, text):
    res = invoke("plan", "--from-command", text)
    one_message(res, f"the container's `{key}:` string: No closing quotation")


# --- the guarded YAML reader: its limits cost one Python call a node -------------------------

def test_the_yaml_guard_adds_one_python_call_a_node():
    """A 10,000-requirement plan (1 MB) spends most of `check`'s time reading YAML: the
    guard's depth, alias and expanded-size accounting must cost one call a node (its own
    compose_node) over PyYAML's composer, not a sum over every node's children (1.86)."""
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    from kvplan.sources.reader import _guarded_loader

    try:
        from yaml._yaml import CParser as parser
    except ImportError:
        pytest.skip("PyYAML without libyaml")

    class Plain(Composer, parser, SafeConstructor, Resolver):  # PyYAML's composer, unguarded
        def __init__(self, stream: str) -> None:
            parser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    text = "\n".join(f"- {{name: d{i}, gpu: h100, requires: {{a: [1, 2, 3], b: &x{i} x}}, "
                     f"c: *x{i}}}" for i in range(200)) + "\n"

    def calls(loader) -> tuple[int, int]:
        seen = [0]

        def profile(frame, event, arg):
            if event == "call":
                seen[0] += 1

        sys.setprofile(profile)
        try:
            node = loader.get_single_node()
        finally:
            sys.setprofile(None)
            loader.dispose()
        nodes, stack = 0, [node]
        while stack:
            item = stack.pop()
            nodes += 1
            if isinstance(item.value, list):
                for child in item.value:
                    stack.extend(child if isinstance(child, tuple) else (child,))
        return seen[0], nodes

    guarded, nodes = calls(_guarded_loader(text, "plan.yaml"))
    plain, same = calls(Plain(text))
    assert nodes == same > 2000
    # one call a node, and a few to spare for whatever else the process profiles once (a
    # lazy import's first use); the sum over children cost 1.86 a node
    assert guarded - plain <= nodes * 11 // 10, (guarded, plain, nodes)


# --- explain's table in the units and separators of every other table -----------------------

def test_explain_prints_counts_with_separators_and_bytes_as_sizes():
    # the log's "GPU KV cache size: 409,584 tokens" and "Model loading took 14.9889 GiB":
    # round(14.9889 * 2^30) = 16,094,208,826 bytes, 14.989 GiB (16.094 GB); JSON and CSV keep
    # the numbers themselves
    weights_bytes = round(14.9889 * 2**30)
    res = invoke("explain", "-", input=LOG)
    assert res.exit_code == 0, res.output
    assert "409,584" in res.stdout and "14.989 GiB" in res.stdout, res.stdout
    assert "409584" not in res.stdout and str(weights_bytes) not in res.stdout
    res = invoke("explain", "-", "--units", "si", input=LOG)
    assert "16.094 GB" in res.stdout, res.stdout
    doc = invoke("explain", "-", "-f", "json", input=LOG).stdout
    assert '"logged": 409584' in doc and f'"logged": {weights_bytes}' in doc
    csv = invoke("explain", "-", "-f", "csv", input=LOG).stdout
    assert f"weights,from settings,{weights_bytes}," in csv, csv
