"""`kvplan report`: the one-page sizing report and its chart; Markdown on every command."""

from __future__ import annotations

import math

import pytest
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.output import page as report
from kvplan.planning.plan import Deployment
from kvplan.sources.library import resolve

GIB = 2**30
MIB = 2**20
LLAMA_TOKEN_BF16 = 2 * 32 * 8 * 128 * 2  # K+V x layers x KV heads x head_dim x 2 bytes
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "120"})


def _table(md: str, title: str) -> list[str]:
    lines = md.splitlines()
    start = lines.index(f"**{title}**") + 2
    end = lines.index("", start)
    return lines[start:end]


def test_report_page_and_chart(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "sizing.md"
    res = invoke("report", "llama-3.1-8b", "--gpu", "h100", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert (tmp_path / "sizing.svg").read_bytes().startswith(b"<?xml")
    md = out.read_text()
    assert md.startswith("# KV-cache sizing: Llama 3.1 8B\n")
    assert "\n![KV cache per GPU against context length, with each GPU's KV budget]" \
           "(sizing.svg)\n\n" in md
    sizes = _table(md, "Per token and per request (whole model, one copy)")
    assert sizes[0] == ("| KV dtype | per token (B) | 1 request, 8k tokens | "
                        "1 request, 32k tokens | 1 request, 128k tokens |")
    # 131,072 B per token: 8k tokens = 1 GiB, 32k = 4 GiB, 128k = 16 GiB; fp8 half of that
    assert 8192 * LLAMA_TOKEN_BF16 == GIB
    assert sizes[2] == "| bf16 | 131,072 | 1.000 GiB | 4.000 GiB | 16.000 GiB |"
    assert sizes[3] == "| fp8_e4m3 | 65,536 | 512.000 MiB | 2.000 GiB | 8.000 GiB |"
    grid = _table(md, "KV cache of a batch, bf16 (context x batch; whole model)")
    assert grid[0] == "| context (tokens) | batch 1 | batch 8 | batch 32 |"
    assert 1024 * LLAMA_TOKEN_BF16 == 128 * MIB
    assert grid[2] == "| 1,024 | 128.000 MiB | 1.000 GiB | 4.000 GiB |"
    assert len(grid) == 2 + 8  # 1k, 2k, ..., 128k
    cap = _table(md, "Capacity on the chosen GPUs (vllm, max length 131,072)")
    assert [row.split(" | ")[2] for row in cap[2:]] == ["bf16", "fp8_e4m3"]
    for table in (sizes, grid, cap):  # pastes cleanly: every row has the header's cells
        assert all(row.startswith("| ") and row.endswith(" |") for row in table)
        assert len({row.count(" | ") for row in table}) == 1
    assert "- Inputs: model llama-3.1-8b" in md and "- Formula: per layer and token" in md
    assert "1 GiB = 2^30 = 1,073,741,824 bytes" in md
    assert "wrote" in res.stderr


def test_capacity_rows_follow_the_budget():
    spec = resolve("llama-3.1-8b")
    dep = Deployment(spec, gpu_name="H100 SXM", gpu_memory_bytes=85_028_896_768)
    r = report.sizing_report(spec, [dep], ["auto", "fp8"], [8192, 32768])
    bf16, fp8 = r.capacity
    # Llama-3.1-8B's 8,030,261,248 parameters in bf16, whatever the KV dtype, as vLLM's
    # memory_allocated counts them: + the rotary cache (131,072 positions x 128 x 2 B) + each
    # of the 32 attention layers' four fp32 scale scalars in a 512-byte block (every weight
    # of Llama-3.1-8B is a whole number of 2 MiB, so the allocator rounds nothing else)
    weights = 8030261248 * 2 + 131072 * 128 * 2 + 32 * 4 * 512
    assert bf16.weights_per_gpu_bytes == fp8.weights_per_gpu_bytes == weights
    # vLLM 0.33 estimate (kvplan.engines.vllm.memory's documented terms): ceil(total x 0.92)
    # - weights - the sampler warm-up's one Triton pass (1,024 seqs x 128,256 vocab x 14 B +
    # the 8,192 x 4,096 bf16 hidden states; above the 8,192-token forward's (3 x 14,336 +
    # 3 x 4,096) x 2 B a token) - 64 MiB non-torch growth - CUDA graphs (the 512-token
    # capture's forward buffers twice, warm-up and capture, + 50 more piecewise and 50 more
    # full graphs of 32 layers x 156 KiB each)
    sampler = 1024 * 128256 * 14 + 8192 * 4096 * 2
    assert sampler > 8192 * (3 * 14336 + 3 * 4096) * 2
    graphs = 2 * 512 * (3 * 14336 + 3 * 4096) * 2 + (50 + 50) * 32 * 156 * 1024
    # and Model Runner V2's sampler state, in total_consumed: 1,024 request slots x (128,256
    # output counts + cdiv(128,256, 32) prompt mask words) x 4 B (sample/penalties.py)
    penalties = 1024 * (128256 + 4008) * 4
    budget = (math.ceil(85_028_896_768 * 0.92) - weights - sampler - penalties - 64 * 2**20
              - graphs)
    assert bf16.kv_budget_bytes == fp8.kv_budget_bytes == budget
    for row, per_block in ((bf16, 16 * LLAMA_TOKEN_BF16), (fp8, 8 * LLAMA_TOKEN_BF16)):
        usable = row.kv_budget_bytes // per_block - 1  # whole blocks of 16, one null block
        assert row.max_requests == (usable // 512, usable // 2048)
        assert row.kv_bytes_per_token == per_block // 16


def test_report_without_chart_and_flag_conflicts(tmp_path):
    out = tmp_path / "plain.md"
    res = invoke("report", "llama-3.1-8b", "-o", str(out), "--no-chart", "--kv-dtype", "fp8",
                 "--batch", "2", "--contexts", "4k", "-t", "1k,2k")
    assert res.exit_code == 0, res.output
    md = out.read_text()
    assert "![" not in md and not (tmp_path / "plain.svg").exists()
    assert "Capacity on the chosen GPUs" not in md  # no --gpu
    assert _table(md, "KV cache of a batch, fp8_e4m3 (context x batch; whole model)")[2:] == [
        "| 1,024 | 128.000 MiB |", "| 2,048 | 256.000 MiB |"]  # 2 x n x 65,536 B
    both = invoke("report", "llama-3.1-8b", "-o", str(out), "--no-chart", "--chart", "x.svg")
    assert both.exit_code == 2 and "contradict" in both.stderr


def test_chart_path_is_linked_relative_to_the_report(tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "img").mkdir()
    out = tmp_path / "sizing.md"
    res = invoke("report", "llama-3.1-8b", "--gpu", "l4", "-o", str(out), "--chart",
                 str(tmp_path / "img" / "kv.png"), "--kv-dtype", "auto")
    assert res.exit_code == 0, res.output
    assert "(img/kv.png)" in out.read_text()
    assert (tmp_path / "img" / "kv.png").read_bytes()[:4] == b"\x89PNG"


def test_model_without_weights_still_reports(tmp_path):
    out = tmp_path / "q.md"
    tiny = str(ROOT / "tests" / "fixtures" / "tiny.yaml")  # no parameter count
    res = invoke("report", tiny, "--gpu", "h100", "-o", str(out), "--no-chart")
    assert res.exit_code == 0, res.output
    assert "no parameter count" in out.read_text()  # in the capacity table's "why not"
    given = invoke("report", tiny, "--gpu", "h100", "-o", str(out), "--no-chart",
                   "--weights-memory", "15GiB")
    assert given.exit_code == 0 and "why not" not in out.read_text()


def test_report_bad_input(tmp_path):
    bad = invoke("report", "llama-3.1-8b", "--gpu", "h10O", "-o", str(tmp_path / "x.md"))
    assert bad.exit_code == 2 and "unknown GPU" in bad.stderr
    assert not (tmp_path / "x.md").exists()


COMMANDS = [
    ["size", "llama-3.1-8b", "--tokens", "8k"],
    ["models", "llama-3.1"],
    ["show", "llama-3.1-8b"],
    ["gpus", "h100"],
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--context", "8k"],
    ["compare", "llama-3.1-8b", "--gpu", "h100,l40s"],
    ["check", str(ROOT / "docs" / "capacity.example.yaml")],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_markdown_on_every_command_pastes_cleanly(args):
    res = invoke(*args, "--format", "markdown")
    assert res.exit_code in (0, 1), res.output
    lines = res.stdout.splitlines()
    header = next(i for i, x in enumerate(lines) if x.startswith("| "))
    assert lines[header - 2].startswith("**") and lines[header - 1] == ""
    assert set(lines[header + 1].replace("|", "").split()) <= {"---", "---:"}
    table = lines[header:lines.index("", header)]
    assert len({row.count(" | ") for row in table}) == 1
    assert lines[-1] == ("- Units: B = bytes; KiB/MiB/GiB/TiB are powers of 2 "
                         "(1 GiB = 2^30 = 1,073,741,824 bytes).")
