"""Sweeps: every row equals what `size` computes for the same inputs; ranges; formats."""

import csv
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import parse_format
from kvplan.core.errors import BadInputError
from kvplan.core.sizing import size
from kvplan.planning.sweep import COLUMNS, parse_token_range, sweep
from kvplan.sources.library import load_named

runner = CliRunner()
MODELS = ["llama-3.1-8b", "gemma-2-9b", "deepseek-v3", "qwen3-next-80b-a3b", "gpt-oss-20b",
          "llama-4-scout", "jamba-1.5-mini"]


def test_token_ranges():
    assert parse_token_range("1k..8k") == [1024, 2048, 4096, 8192]
    assert parse_token_range("1k..4k:1k") == [1024, 2048, 3072, 4096]
    assert parse_token_range("100,2k,100") == [100, 2048]
    for bad in ("8k..1k", "", "1k..x"):
        with pytest.raises(BadInputError):
            parse_token_range(bad)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(["bf16", "fp8", "int4:g64", "int2:g32:kivi:r64",
                                                 "nvfp4"]),
       st.integers(min_value=1, max_value=300_000), st.integers(min_value=1, max_value=64),
       st.sampled_from([1, 2, 4, 8]))
def test_rows_equal_size(name, dtype, tokens, batch, tp):
    spec = load_named(name)
    fmt = parse_format(dtype, spec.dtype)
    try:
        expected = size(spec, fmt, tokens=tokens, batch=batch, tp=tp, max_len=tokens)
    except BadInputError:
        # a TP this model cannot take: the sweep must refuse it too
        with pytest.raises(BadInputError):
            list(sweep([spec], [fmt], [tp], [tokens], [batch]))
        return
    (row,) = list(sweep([spec], [fmt], [tp], [tokens], [batch]))
    got = dict(zip(COLUMNS, row, strict=True))
    assert got["per_token_bytes"] == expected.per_token_bytes
    assert got["request_bytes"] == expected.request_bytes
    assert got["batch_bytes"] == expected.batch_bytes
    assert got["per_gpu_batch_bytes"] == expected.per_gpu_batch_bytes


def test_bad_tp_is_refused():
    with pytest.raises(BadInputError):
        list(sweep([load_named("llama-3.1-8b")], [parse_format("bf16")], [3], [10], [1]))


def test_cli_csv_grid():
    res = runner.invoke(app, ["sweep", "llama-3.1-8b", "--tokens", "1k..4k", "--batch", "1,8",
                              "--kv-dtype", "bf16,fp8"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 3 * 2 * 2
    last = rows[-1]  # fp8, 4,096 tokens, batch 8: 32 layers x 2 x 8 heads x 128 x 1 byte
    assert (last["kv_dtype"], last["tokens"], last["batch"]) == ("fp8_e4m3", "4096", "8")
    assert int(last["batch_bytes"]) == 8 * 4096 * 32 * 2 * 8 * 128 * 1


def test_cli_json_and_markdown():
    res = runner.invoke(app, ["sweep", "gemma-2-9b", "-t", "8k", "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "kvplan.sweep/1" and doc["columns"] == list(COLUMNS)
    row = dict(zip(doc["columns"], doc["rows"][0], strict=True))
    assert row["request_bytes"] == 21 * 8192 * 8192 + 21 * 4096 * 8192  # Gemma-2-9B SWA
    assert row["per_token_bytes"] == 42 * 2 * 8 * 256 * 2  # 8,192 B per layer
    res = runner.invoke(app, ["sweep", "gemma-2-9b", "-t", "8k", "-f", "markdown"])
    assert "| gemma-2-9b | bf16 | 1 | 8,192 | 1 |" in res.stdout
    notes = [line for line in res.stdout.splitlines() if line.startswith("- ")]
    assert [n.split(":")[0] for n in notes] == ["- Inputs", "- Formula", "- Units"]


def test_cli_bad_input():
    res = runner.invoke(app, ["sweep", "llama-3.1-8b", "--batch", "0"])
    assert res.exit_code == 2 and "--batch" in res.stderr
    res = runner.invoke(app, ["sweep", "llama-3.1-8b", "-f", "table"])
    assert res.exit_code == 2
