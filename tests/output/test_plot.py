"""`kvplan plot` and the chart data: real PNG and SVG files checked for format, size, ink and
labelled axes; matplotlib only on that path; the committed docs samples have not drifted."""

from __future__ import annotations

import importlib.util
import shutil
import struct
import sys
import xml.etree.ElementTree as ET

import pytest
from factories import dense
from paths import ROOT
from probes import probe
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.output import chart as plot
from kvplan.planning.plan import Deployment
from kvplan.sources.library import resolve

GIB = 2**30
LLAMA_TOKEN_BF16 = 2 * 32 * 8 * 128 * 2  # K+V x layers x KV heads x head_dim x 2 bytes
runner = CliRunner()

def heavy_imports(argv: list[str], heavy: tuple[str, ...] = ("matplotlib",)) -> list[str]:
    """The modules of `heavy` that `kvplan ARGV` imported (in a fresh interpreter)."""
    result = probe(argv, heavy)
    assert result.ran, result.stderr  # an early error would import nothing either
    return result.loaded


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "120"})


def test_help_and_size_never_import_matplotlib():
    assert heavy_imports(["--help"]) == []
    assert heavy_imports(["size", "llama-3.1-8b", "--tokens", "8k"]) == []
    assert heavy_imports(["plot", "--help"]) == []
    assert heavy_imports(["report", "--help"]) == []


# --- the data, by hand ------------------------------------------------------------------------

def test_memory_chart_values_and_budget_levels():
    spec = resolve("llama-3.1-8b")
    dep = Deployment(spec, kv_memory_bytes=40 * GIB, max_model_len=32768)
    chart, warnings = plot.memory_chart([spec], ["bf16", "fp8"], [1024, 8192, 131072],
                                        batches=[1, 4], deployments=[dep])
    assert warnings == []
    bf16_b4 = next(s for s in chart.series if s.label == "bf16, batch 4")
    assert bf16_b4.tokens == (1024, 8192, 131072)
    assert bf16_b4.values == tuple(4 * n * LLAMA_TOKEN_BF16 for n in (1024, 8192, 131072))
    fp8_b1 = next(s for s in chart.series if s.label == "fp8_e4m3, batch 1")
    assert fp8_b1.values[1] == 8192 * LLAMA_TOKEN_BF16 // 2 == GIB // 2
    assert [lv.value_bytes for lv in chart.levels] == [40 * GIB]
    assert chart.title == "KV cache per GPU (batches 1, 4)"


def test_memory_chart_tp_splits_kv_heads_and_stops_at_max_context():
    spec = resolve("llama-3.1-8b")
    chart, _ = plot.memory_chart([spec], ["auto"], [4096, 262144], tp=2)
    (s,) = chart.series
    assert s.tokens == (4096,)  # 256k is past the model's 128k
    assert s.values == (4096 * LLAMA_TOKEN_BF16 // 2,)


def test_budget_line_left_out_with_a_warning_when_weights_unknown():
    spec = dense()  # no parameter count
    dep = Deployment(spec, gpu_name="H100 SXM", gpu_memory_bytes=80 * GIB)
    chart, warnings = plot.memory_chart([spec], ["auto"], [1024], deployments=[dep])
    assert chart.levels == () and "no parameter count" in warnings[0]


def test_concurrency_chart_is_block_arithmetic():
    spec = resolve("llama-3.1-8b")
    deps = [Deployment(spec, kv_memory_bytes=60 * GIB, max_model_len=32768, kv_dtype=d,
                       engine_version="0.11") for d in ("auto", "fp8")]
    chart = plot.concurrency_chart(deps, [8192, 32768, 65536])
    bf16, fp8 = chart.series
    usable = 60 * GIB // (16 * LLAMA_TOKEN_BF16) - 1  # blocks of 16 tokens, one null block
    assert bf16.tokens == (8192, 32768)  # 64k is past max_model_len
    assert bf16.values == (usable // 512, usable // 2048) == (59, 14)
    assert fp8.values == ((2 * usable + 1) // 512, (2 * usable + 1) // 2048)


# --- real files -------------------------------------------------------------------------------

def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_png_is_valid_sized_and_not_blank(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    out = tmp_path / "kv.png"
    res = invoke("plot", "llama-3.1-8b", "--kv-dtype", "bf16,fp8", "--gpu", "h100", "-o",
                 str(out))
    assert res.exit_code == 0, res.output
    data = out.read_bytes()
    assert _png_size(data) == (8 * 150, int(4.5 * 150))  # 8 x 4.5 in at 150 dpi
    pixels = imread(out)[:, :, :3]
    ink = (pixels < 0.9).any(axis=2).mean()
    assert 0.02 < ink < 0.5  # lines, text and a legend on white
    colours = {tuple(p) for p in (pixels * 255).astype(int).reshape(-1, 3)[::37]}
    assert len(colours) > 20
    assert b"Date" not in data and b"Matplotlib" not in data  # no timestamp or version


def test_axis_labels_carry_units():
    pytest.importorskip("matplotlib")
    spec = resolve("llama-3.1-8b")
    chart, _ = plot.memory_chart([spec], ["auto"], [1024, 2048])
    ax = plot.figure(chart).axes[0]
    assert ax.get_xlabel() == "context length (tokens per request; 1k = 1,024)"
    assert ax.get_ylabel() == "KV cache per GPU (GiB, 1 GiB = 2^30 bytes)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bf16"]
    si = plot.figure(chart, "si").axes[0]
    assert si.get_ylabel() == "KV cache per GPU (GB, 1 GB = 10^9 bytes)"
    conc = plot.concurrency_chart([Deployment(spec, kv_memory_bytes=8 * GIB)], [1024])
    assert plot.figure(conc).axes[0].get_ylabel() == \
        "concurrent requests (whole requests that fit)"


def test_svg_is_valid_deterministic_and_labelled(tmp_path):
    pytest.importorskip("matplotlib")
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    for out in (a, b):
        res = invoke("plot", "llama-3.1-8b", "mistral-7b-v0.3", "-o", str(out))
        assert res.exit_code == 0, res.output
    assert a.read_bytes() == b.read_bytes()
    root = ET.parse(a).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height")) == ("576pt", "324pt")  # 8 x 4.5 in
    paths = root.findall(".//{http://www.w3.org/2000/svg}path")
    assert len(paths) > 50
    text = a.read_text()
    # text is drawn as paths; matplotlib keeps each string as a comment beside it
    assert "<!-- KV cache per GPU (GiB, 1 GiB = 2^30 bytes) -->" in text
    assert "<!-- context length (tokens per request; 1k = 1,024) -->" in text
    assert "<!-- mistral-7b-v0.3, bf16 -->" in text
    assert "dc:date" not in text


def test_concurrency_plot(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "conc.png"
    res = invoke("plot", "llama-3.1-8b", "--y", "concurrency", "--kv-memory", "60GiB",
                 "--kv-dtype", "auto,fp8", "-t", "1k..32k", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert _png_size(out.read_bytes()) == (1200, 675)
    assert "wrote" in res.stderr and "2 series" in res.stderr


def test_plot_bad_input_exit_2(tmp_path):
    bad = invoke("plot", "llama-3.1-8b", "-o", str(tmp_path / "chart.jpg"))
    assert bad.exit_code == 2 and "end the file name in .png or .svg" in bad.stderr
    conc = invoke("plot", "llama-3.1-8b", "--y", "concurrency", "-o", str(tmp_path / "c.png"))
    assert conc.exit_code == 2 and "needs memory to plan with" in conc.stderr
    y = invoke("plot", "llama-3.1-8b", "--y", "speed", "-o", str(tmp_path / "c.png"))
    assert y.exit_code == 2


def test_missing_matplotlib_is_one_line_exit_2(tmp_path, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib` -> ImportError
    res = invoke("plot", "llama-3.1-8b", "-o", str(tmp_path / "chart.png"))
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        "kvplan: error: plotting needs matplotlib: pip install 'matplotlib>=3.8'"]
    assert not (tmp_path / "chart.png").exists()


# --- the committed docs samples ---------------------------------------------------------------

def _regen():
    spec = importlib.util.spec_from_file_location("regen_docs", ROOT / "scripts" /
                                                  "regen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_samples_have_not_drifted():
    pytest.importorskip("matplotlib")
    regen = _regen()
    assert regen.drifted() == [], "run: python scripts/regen_docs.py"
    assert regen.main(["--check"]) == 0


def test_drift_is_detected(tmp_path):
    pytest.importorskip("matplotlib")
    regen = _regen()
    for name in regen.FILES:
        shutil.copy(ROOT / "docs" / name, tmp_path / name)
    with (tmp_path / regen.REPORT).open("a") as f:
        f.write("edited by hand\n")
    assert regen.drifted(tmp_path) == [regen.REPORT]
    (tmp_path / regen.CHART).unlink()
    assert regen.drifted(tmp_path) == [regen.REPORT, regen.CHART]
