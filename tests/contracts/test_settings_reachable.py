"""Every declared setting (kvplan.engines.settings) reaches the Deployment from each way in:
`plan`'s and `compare`'s flags, a capacity-plan file's keys (`engine:` keys for the engine
settings, the deployment's own for the common ones), and each engine's own launch flags read
by --from-command; and its bounds are checked the same way from each."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.engines.settings import COMMON_SETTINGS, GIB, SETTINGS

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # the library's llama-3.1-8b by its alias
# a value of each setting that an engine accepts, and the field value it must become
SAMPLES = {
    "tp": (2, 2), "pp": (2, 2), "dp": (2, 2), "dcp": (2, 2), "max_model_len": ("16k", 16384),
    "gpu_memory_utilization": (0.5, 0.5), "block_size": (32, 32),
    "max_num_batched_tokens": (8192, 8192), "max_num_seqs": (2, 2), "parallel": (2, 2),
    "kv_memory": ("1GiB", GIB), "activation_memory": ("1GiB", GIB),
    "cudagraph_memory": ("1GiB", GIB), "enforce_eager": (True, True),
    "expert_parallel": (True, True), "dp_attention": (True, True),
    "flashinfer_sampler": (True, True), "num_speculative_tokens": (2, 2),
    "num_draft_layers": (1, 1),
    "cpu_offload_gb": (1.5, 3 * GIB // 2), "n_ubatch": (256, 256), "flash_attn": ("off", "off"),
    "n_gpu_layers": ("20", "20"), "no_kv_offload": (True, True),
    "mamba_ssm_cache_dtype": ("float32", "float32"), "kv_dtype": ("fp8", "fp8"),
    # held as the key=value list sorted by modality (the JSON form: tests/engines/vllm/
    # test_mm_limits.py, quoted as a shell needs it)
    "limit_mm_per_prompt": ("video=0,image=2", "image=2,video=0"),
    "language_model_only": (True, True),
    "runner": ("embed", "pooling"),
    "enable_lora": (True, True),
    "max_loras": (4, 4),
    "max_lora_rank": (64, 64),
    # on from its flag (its off flag: tests/engines/vllm/test_vllm_pages.py)
    "async_scheduling": (True, True),
}
# settings no launch line carries: figures an engine logged (kvplan explain reads them from
# the log), what vLLM's image (not a flag) decides, and the drafter's layers (its config's)
NOT_LAUNCH_FLAGS = {"activation_memory", "cudagraph_memory", "flashinfer_sampler",
                    "num_draft_layers"}
# the engine a plan file names for a setting only one engine reads
ENGINE_OF = {"flash_attn": "llamacpp", "n_gpu_layers": "llamacpp", "parallel": "llamacpp",
             "n_ubatch": "llamacpp", "no_kv_offload": "llamacpp", "dp_attention": "sglang"}
PROGRAMS = {"vllm": f"vllm serve {MODEL}",
            "sglang": f"python -m sglang.launch_server --model-path {MODEL}",
            "llamacpp": f"llama-server -m {MODEL}", "trtllm": f"trtllm-serve {MODEL}",
            "tgi": f"text-generation-launcher --model-id {MODEL}"}
# what a sample needs beside it: decode context parallel splits TP ranks
NEEDS = {"dcp": {"tp": 2}}
# llama.cpp's one cache for every slot (-kvu), a switch only llama.cpp reads
SAMPLES["kv_unified"] = (True, True)
ENGINE_OF["kv_unified"] = "llamacpp"
# TGI's --max-batch-total-tokens, which its launcher checks (the plans here use 8k contexts)
SAMPLES["max_batch_total_tokens"] = (16000, 16000)
# llama.cpp's tensor overrides (-ot, --cpu-moe, --n-cpu-moe)
SAMPLES["tensor_overrides"] = ("exps=CPU", "exps=CPU")
SAMPLES["cpu_moe"] = (True, True)
SAMPLES["n_cpu_moe"] = (4, 4)
SAMPLES["mla_attn"] = (3, 3)  # ik_llama.cpp -mla
ENGINE_OF.update(tensor_overrides="llamacpp", cpu_moe="llamacpp", n_cpu_moe="llamacpp",
                 mla_attn="llamacpp")
ENGINE_OF["max_batch_total_tokens"] = "tgi"
ROWS = [pytest.param(row, id=row.name) for row in SETTINGS]
COMMON = {row.name for row in COMMON_SETTINGS}


def test_every_row_has_a_sample():
    assert set(SAMPLES) == {row.name for row in SETTINGS}


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("command", ["plan", "compare"])
def test_reachable_from_the_flags(row, command, monkeypatch):
    import kvplan.api

    built = []
    deploy = kvplan.api.deploy

    def spy(*args, **kwargs):
        d = deploy(*args, **kwargs)
        built.append(d.deployment)
        return d

    monkeypatch.setattr(kvplan.api, "deploy", spy)
    if command == "compare" and row.name in COMMON - {"max_model_len"}:
        pytest.skip("compare lays out GPUs by --count only")
    value, field_value = SAMPLES[row.name]
    flag = [row.flag] if row.kind == "bool" else [row.flag, str(value)]
    memory = [] if row.name == "kv_memory" else ["--gpu", "h100"]
    length = [] if row.name == "max_model_len" else ["--max-model-len", "8k"]
    extra = [w for k, v in NEEDS.get(row.name, {}).items() for w in (f"--{k}", str(v))]
    res = runner.invoke(app, [command, "llama-3.1-8b", *memory, "--engine",
                              ENGINE_OF.get(row.name, "vllm"), *length, *extra, *flag,
                              "-f", "json"])
    assert res.exit_code in (0, 1), res.output
    assert built and getattr(built[0], row.field_name) == field_value


@pytest.mark.parametrize("row", ROWS)
def test_reachable_from_a_plan_file(row, tmp_path):
    from kvplan.planning.check import load_plan

    value, field_value = SAMPLES[row.name]
    text = value if not isinstance(value, bool) else str(value).lower()
    if isinstance(value, str) and "," in value:  # a YAML flow mapping splits at commas
        text = f'"{value}"'
    plan = tmp_path / "plan.yaml"
    engine = ENGINE_OF.get(row.name, "vllm")
    top = {"max_model_len": "8k", **NEEDS.get(row.name, {})}
    if row.section:
        engine = f"{{name: {engine}, {row.name}: {text}}}"
    else:
        top[row.name] = text
    plan.write_text(
        "schema: kvplan.capacity/1\ndeployments:\n  - name: a\n    model: llama-3.1-8b\n"
        "    gpu: h100\n" + "".join(f"    {k}: {v}\n" for k, v in top.items()) +
        f"    engine: {engine}\n"
        "    requires: {min_concurrency: {concurrency: 1, context: 1k}}\n")
    (planned,) = load_plan(plan).deployments
    assert getattr(planned.deployment, row.field_name) == field_value


@pytest.mark.parametrize("row", ROWS)
def test_reachable_from_a_launch_command(row):
    from kvplan.planning.launch import engine_launches, from_command

    if row.name in NOT_LAUNCH_FLAGS:
        assert not row.engine_flags
        return
    value, field_value = SAMPLES[row.name]
    if not row.engine_flags:  # read by the engine's own table under the field's name
        tables = {t.engine: t.flags for t in engine_launches()}
        assert any(setting in (row.name, row.field_name)
                   for flags in tables.values() for setting, _ in flags.values())
        return
    for engine, flags in row.engine_flags.items():
        for flag in flags:
            launch_value = field_value if row.kind == "bytes" else value
            words = flag if row.kind == "bool" else f"{flag} {launch_value}"
            lp = from_command(f"{PROGRAMS[engine]} {words}")
            assert lp.engine == engine
            assert lp.overrides[row.field_name] == field_value, (engine, flag)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in SETTINGS
                                 if r.low is not None])
def test_bounds_are_checked_the_same_way_in(row, tmp_path):
    """Below the row's lower bound: exit 2 from the flag, the plan file and the launch line,
    each naming the setting as it was given there."""
    from kvplan.planning.launch import engine_launches, from_command

    below = row.low - (0.5 if row.kind in ("float", "gib") else 1)
    flag = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", row.flag, str(below)])
    assert flag.exit_code == 2 and row.flag in flag.stderr, flag.output
    plan = tmp_path / "plan.yaml"
    where = f"engine: {{name: vllm, {row.name}: {below}}}" if row.section else \
        f"{row.name}: {below}"
    plan.write_text("schema: kvplan.capacity/1\ndeployments:\n  - name: a\n"
                    f"    model: llama-3.1-8b\n    gpu: h100\n    {where}\n"
                    "    requires: {min_concurrency: {concurrency: 1, context: 1k}}\n")
    file = runner.invoke(app, ["check", str(plan)])
    assert file.exit_code == 2 and f"{row.plan_key}'" in file.stderr, file.output
    unset = {t.engine: t.unset_values for t in engine_launches()}
    for engine, flags in row.engine_flags.items():
        if str(below) in unset.get(engine, {}).get(flags[0], ()):
            continue  # the engine's own meaning for it (llama.cpp -c 0: the model's context)
        with pytest.raises(KvplanError, match=flags[0]):
            from_command(f"{PROGRAMS[engine]} {flags[0]} {below}")


def test_a_bound_message_never_turns_a_huge_count_into_a_float():
    """A 400-digit tensor-parallel size (a fuzzed log's echoed flag) is refused by its row's
    bounds with exit-2 wording, not an OverflowError from formatting it as a float."""
    from kvplan.core.errors import BadInputError
    from kvplan.engines.settings import BY_NAME

    with pytest.raises(BadInputError, match=r"must be .*got about 10\^399"):
        BY_NAME["tp"].to_field(10**399, "--tensor-parallel-size")
    with pytest.raises(BadInputError, match=r"got 0$"):
        BY_NAME["tp"].to_field(0, "--tensor-parallel-size")
