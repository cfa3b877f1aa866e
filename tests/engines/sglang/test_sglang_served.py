"""Which SGLang releases serve an architecture (kvplan/data/sglang-served.txt, derived by
scripts/sglang_models_history.py from each release's sglang/srt/models/*.py EntryClass): a
release that does not serve a config's class is refused by name, never planned as another
model's cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.engines.sglang.served import SERVED_FILE, check_served
from kvplan.engines.shared.served import served

ROOT = Path(__file__).resolve().parents[3]
FAMILIES = ROOT / "tests" / "fixtures" / "hf-configs" / "families"


def test_minimax_m1_is_refused_under_sglang_in_one_line():
    # no SGLang wheel 0.4.0-0.5.23 has a module whose EntryClass is MiniMaxM1ForCausalLM (its
    # minimax files are minimax_m2.py from 0.5.5 and the M3 ones): it would fall to the
    # Transformers backend, whose cache kvplan does not model -- not "44 requests fit"
    config = FAMILIES / "MiniMaxAI--MiniMax-M1.json"
    assert json.loads(config.read_text())["architectures"] == ["MiniMaxM1ForCausalLM"]
    result = CliRunner().invoke(app, [
        "plan", str(config), "--engine", "sglang", "--engine-version", "0.5.23", "--tp", "8",
        "--max-model-len", "32768", "--gpu", "h200"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "SGLang 0.5.23 does not serve MiniMaxM1ForCausalLM" in lines[0]
    assert "Transformers backend it would try instead is not modelled" in lines[0]


def test_a_class_is_refused_before_the_release_that_added_it():
    # models/qwen3_next.py (EntryClass Qwen3NextForCausalLM) first ships in the 0.5.2 wheel;
    # 0.5.1's has no such module
    with pytest.raises(BadInputError, match=r"SGLang 0\.5\.1 does not serve "
                       r"Qwen3NextForCausalLM yet \(added in 0\.5\.2\); give --engine-version "
                       r"0\.5\.2 or later"):
        check_served(("Qwen3NextForCausalLM",), (0, 5, 1))
    check_served(("Qwen3NextForCausalLM",), (0, 5, 2))
    check_served(("Qwen3NextForCausalLM",), None)  # the newest release read


def test_a_removed_class_names_the_last_release_serving_it():
    # models/vila.py ships from 0.4.8 to 0.5.4 and is gone from the 0.5.5 wheel
    with pytest.raises(BadInputError, match=r"SGLang 0\.5\.5 no longer serves "
                       r"VILAForConditionalGeneration \(removed in 0\.5\.5; the Transformers "
                       r"backend .*\); give --engine-version 0\.5\.4 or earlier"):
        check_served(("VILAForConditionalGeneration",), (0, 5, 5))
    check_served(("VILAForConditionalGeneration",), (0, 5, 4))


def test_before_the_transformers_backend_the_refusal_names_no_fallback():
    # models/transformers.py first ships in 0.4.7
    with pytest.raises(BadInputError) as refused:
        check_served(("MiniMaxM1ForCausalLM",), (0, 4, 6))
    assert "Transformers backend" not in str(refused.value)
    assert served(SERVED_FILE)[1]["TransformersForCausalLM"].added == (0, 4, 7)


def test_the_history_writer_reads_entry_classes(tmp_path):
    # three made-up releases: A throughout (a class), B in a list from 0.2.0, gone in 0.3.0
    def models(version, body):
        folder = tmp_path / version
        folder.mkdir()
        (folder / "m.py").write_text("\ufeffclass A: pass\nclass B: pass\n" + body)
        return f"{version}={folder}"

    sys.path.insert(0, str(ROOT / "scripts"))
    import sglang_models_history

    text = sglang_models_history.history([sglang_models_history._source(a) for a in (
        models("0.3.0", "EntryClass = A\n"), models("0.1.0", "EntryClass = [A]\n"),
        models("0.2.0", "EntryClass = [A, B]\n"))])
    rows = [line for line in text.splitlines() if not line.startswith("#")]
    assert rows == ["releases 0.1.0 0.2.0 0.3.0", "newest 0.3.0",
                    "A <=0.1.0 - model", "B 0.2.0 0.3.0 model"]
