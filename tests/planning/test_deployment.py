"""The one deployment builder (kvplan.planning.deployment): strings as the CLI takes them,
objects as Python has them, and errors that name the setting as the caller spells it."""

from __future__ import annotations

import pytest

from kvplan.core.dtypes import parse_format
from kvplan.core.errors import BadInputError
from kvplan.planning.deployment import SettingError, deployment, layout
from kvplan.sources.gpus import find_gpu
from kvplan.sources.library import resolve

# H100 SXM: what torch reports, 81,090 MiB per deviceQuery (the catalog's cited figure)
H100_BYTES = 85_028_896_768


def test_strings_are_read_as_the_cli_reads_them():
    dep = deployment("llama-3.1-8b", gpu="h100", count=4, kv_dtype="fp8",
                     max_model_len="32k", kv_memory="57.65GiB", weights_memory="15GB")
    assert (dep.tp, dep.pp, dep.num_gpus) == (4, 1, 4)
    assert dep.gpu_memory_bytes == H100_BYTES
    assert dep.max_model_len == 32 * 1024
    assert dep.kv_memory_bytes == int(57.65 * 2**30)  # a logged decimal size, floored
    assert dep.weights_bytes == 15 * 10**9
    assert dep.kv_dtype == "fp8"
    assert dep.engine == "vllm"


def test_objects_are_taken_as_they_are():
    spec, gpu, fmt = resolve("llama-3.1-8b"), find_gpu("h100"), parse_format("int4:g64")
    dep = deployment(spec, gpu=gpu, tp=2, pp=2, kv_dtype=fmt, kv_memory=2**34)
    assert dep.spec is spec and dep.gpu_name == gpu.name
    assert (dep.tp, dep.pp) == (2, 2) and dep.kv_memory_bytes == 2**34
    assert parse_format(dep.kv_dtype) == fmt  # a format object keeps its name


def test_gpu_memory_alone_makes_a_custom_gpu():
    assert deployment("llama-3.1-8b", gpu_memory="24GiB").gpu_memory_bytes == 24 * 2**30
    assert deployment("llama-3.1-8b", gpu_memory=10**9).gpu_memory_bytes == 10**9


@pytest.mark.parametrize(("count", "tp", "pp", "want"), [
    (None, None, None, (1, 1)), (8, None, None, (8, 1)), (8, None, 2, (4, 2)),
    (None, 2, 4, (2, 4)), (8, 2, 4, (2, 4))])
def test_layout(count, tp, pp, want):
    assert layout(count, tp, pp) == want


def test_errors_spell_the_setting_as_the_caller_does():
    with pytest.raises(SettingError, match=r"--tp 3 x --pp 1 = 3 GPUs, but --count is 4") as cli:
        layout(4, 3, None)
    assert cli.value.setting == "count"
    with pytest.raises(SettingError, match=r"^tp 3 x pp 1 = 3 GPUs, but count is 4"):
        layout(4, 3, None, spell=str)
    with pytest.raises(SettingError, match="--gpu and --gpu-memory both name the GPU"):
        deployment("llama-3.1-8b", gpu="h100", gpu_memory="24GiB")
    with pytest.raises(BadInputError, match="--max-model-len"):
        deployment("llama-3.1-8b", max_model_len="lots")


def test_unknown_engine_and_setting_are_errors():
    with pytest.raises(BadInputError, match="nope"):
        deployment("llama-3.1-8b", engine="nope")
    with pytest.raises(BadInputError, match="unknown deployment setting"):
        deployment("llama-3.1-8b", colour="red")
