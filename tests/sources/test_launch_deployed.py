"""Launch lines as they are deployed: a model directory on the serving machine read through
MODEL given beside --from-command, builds and forks of llama-server under other file names,
and GPUs such lines run on (GH200)."""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.planning.launch import engine_launches, from_command
from kvplan.sources.gpus import find_gpu
from kvplan.sources.launch import parse_launch

runner = CliRunner()
MODELS = FIXTURES / "engines" / "models"


def test_model_beside_the_command_reads_a_local_directory():
    # vllm-project/vllm#13061: the served model is a directory on the serving machine
    line = ("vllm serve --trust-remote-code --tensor_parallel_size 2 "
            "--gpu_memory_utilization=0.98 "
            "/root/autodl-tmp/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B")
    spec = str(MODELS / "deepseek-r1-distill-qwen-14b.yaml")
    plan = from_command(line, spec)
    assert plan.model == spec
    assert plan.overrides["tp"] == 2 and plan.overrides["memory_fraction"] == 0.98
    assert not plan.warnings  # MODEL was given on purpose: nothing to warn about
    # without MODEL the directory is read by its last part, which kvplan does not hold
    result = runner.invoke(app, ["plan", "--gpu", "rtx 4090", "--count", "2",
                                 "--from-command", line])
    assert result.exit_code == 2 and "DeepSeek-R1-Distill-Qwen-14B" in result.output
    result = runner.invoke(app, ["plan", spec, "--gpu", "rtx 4090", "--count", "2",
                                 "--engine-version", "0.7.2", "--format", "json",
                                 "--from-command", line])
    # exit 1: at the model's 131,072 tokens one request does not fit the two cards' KV budget,
    # so vLLM would not start (issue 20: plan exits 1 as check does; the JSON is still one
    # document with the deployment it read)
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert out["deployment"]["tp"] == 2 and out["deployment"]["num_gpus"] == 2
    assert out["engine_starts"] is False


def test_model_beside_keeps_the_weight_format_the_checkpoint_name_gives():
    # vllm-project/vllm#34076: ./Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8, an FP8 checkpoint
    plan = from_command("vllm serve ./Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8 "
                        "--pipeline-parallel-size 2", "qwen3-30b-a3b")
    assert plan.model == "qwen3-30b-a3b" and plan.overrides["weights_dtype"] == "fp8"
    assert plan.overrides["pp"] == 2


@pytest.mark.parametrize("line,program", [
    ("llama-server-cuda -m model.gguf -c 8192", "llama-server-cuda (read as llama-server)"),
    ("./build/bin/llama-server -m model.gguf -c 8192", "llama-server"),
    ("/opt/ik_llama.cpp/build/bin/llama-server -m model.gguf -c 8192 -fa", "llama-server"),
    ("llama-server.exe -m model.gguf -c 8192", "llama-server.exe (read as llama-server)"),
    ("bin/llama-cli -m ../../model.gguf -n 128 -ngl 999", "llama-cli"),
])
def test_builds_and_forks_of_llama_server_are_read_as_llama_cpp(line, program):
    launch = parse_launch(line, engine_launches())
    assert launch.engine == "llamacpp" and launch.program == program
    assert launch.settings["model"].endswith("model.gguf")


def test_a_name_that_only_begins_like_a_program_is_not_one():
    with pytest.raises(BadInputError, match="no engine's launch program"):
        parse_launch("llama-serverx -m model.gguf", engine_launches())
    # the exact program wins over a suffixed word earlier in the line
    launch = parse_launch("vllm-env/bin/activate && vllm serve Qwen/Qwen3-8B", engine_launches())
    assert launch.engine == "vllm" and launch.program == "vllm serve"


def test_gh200_is_its_hbm_as_torch_reports_it():
    gpu = find_gpu("gh200")
    # Lightning-AI/litgpt#1892, torch on a GH200 480GB: "total capacity of 94.88 GiB"
    assert gpu.memory_bytes == round(94.88 * 1024) * 2**20
    assert gpu.compute_capability == "9.0"
    assert find_gpu("GH200-480GB").name == gpu.name


def test_vllm_block_size_256_from_a_launch_line():
    # config/cache.py BlockSize gained 256 by 0.11.1; a 256-token block of Llama-3.1-8B holds
    # 256 tokens x 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
    result = runner.invoke(app, ["plan", "--gpu", "h100", "--engine-version", "0.11.1",
                                 "--format", "json", "--from-command",
                                 "vllm serve meta-llama/Llama-3.1-8B-Instruct --block-size 256"])
    assert result.exit_code == 0, result.output
    numbers = json.loads(result.stdout)["engine"]
    assert numbers["block_size"] == 256
    assert numbers["bytes_per_block"] == 256 * 32 * 8 * 128 * 2 * 2
    old = runner.invoke(app, ["plan", "--gpu", "h100", "--engine-version", "0.10.1",
                              "--from-command",
                              "vllm serve meta-llama/Llama-3.1-8B-Instruct --block-size 256"])
    assert old.exit_code == 2 and "no block size 256" in old.output


def test_cpu_offload_is_read_not_silently_dropped():
    # planned since issue 20 (kvplan.engines.settings' cpu_offload_gb row): 32 GiB a GPU,
    # as vLLM's int(cpu_offload_gb * 1024**3)
    plan = from_command("vllm serve meta-llama/Llama-3.1-70B-Instruct --cpu-offload-gb 32 -tp 2")
    assert plan.overrides["tp"] == 2 and plan.overrides["cpu_offload_bytes"] == 32 * 2**30
    assert not any("--cpu-offload-gb" in w for w in plan.warnings)


GPT_OSS = ("vllm serve openai/gpt-oss-120b --gpu-memory-utilization 0.95 "
           "--max-num-batched-tokens 1024")


def _weights_gib(line: str, *flags: str) -> float:
    result = runner.invoke(app, ["plan", "--from-command", line, "--gpu", "h100",
                                 "--format", "json", *flags])
    assert result.exit_code in (0, 1), result.output
    return int(json.loads(result.stdout)["budget"]["weights_bytes"][0]) / 2**30


def test_mxfp4_marlin_backend_from_the_launch_environment():
    # envs.py VLLM_MXFP4_USE_MARLIN=1: get_mxfp4_backend takes Marlin for MXFP4 experts
    plan = from_command("VLLM_MXFP4_USE_MARLIN=1 " + GPT_OSS)
    assert plan.overrides["mxfp4_backend"] == "marlin"
    assert "mxfp4_backend" not in from_command(GPT_OSS).overrides
    # what vLLM logged loading gpt-oss-120b on one H100: "Model loading took 65.9651 GiB"
    # with the Marlin kernel (vllm-project/vllm#23278), "64.38 GiB" with "Using Triton
    # backend" (vllm-project/vllm#33155)
    marlin = _weights_gib("VLLM_MXFP4_USE_MARLIN=1 " + GPT_OSS, "--engine-version", "0.11.0")
    triton = _weights_gib(GPT_OSS, "--engine-version", "0.14.1")
    assert abs(marlin - 65.9651) <= 65.9651 * 0.002
    assert abs(triton - 64.38) <= 64.38 * 0.005


def test_an_unknown_mxfp4_backend_is_named():
    from kvplan.api import deploy

    with pytest.raises(BadInputError, match="MXFP4 MoE backend 'cutlass'"):
        assert deploy("gpt-oss-120b", gpu="h100", mxfp4_backend="cutlass").capacity is None


def test_pipeline_layer_partition_is_read_as_the_stage_split():
    # vllm-project/vllm#34076: VLLM_PP_LAYER_PARTITION=16,32 over a 16 GB and a 32 GB card
    plan = from_command("VLLM_PP_LAYER_PARTITION=16,32 vllm serve "
                        "./Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8 --pipeline-parallel-size 2",
                        "qwen3-30b-a3b")
    assert plan.launch.settings["pp_layer_partition"] == "16,32"
    assert plan.overrides["pp_layers"] == (16, 32)
    assert not any("PARTITION" in w for w in plan.warnings)  # modelled, not only named
    with pytest.raises(BadInputError, match="names 3 stages"):
        from_command("VLLM_PP_LAYER_PARTITION=16,16,16 vllm serve Qwen/Qwen3-8B -pp 2")
    with pytest.raises(BadInputError, match="not a list of layer counts"):
        from_command("VLLM_PP_LAYER_PARTITION=half vllm serve Qwen/Qwen3-8B -pp 2")
    # the counts must cover the model's layers (get_pp_indices raises otherwise): exit 2
    result = runner.invoke(app, ["plan", "qwen3-30b-a3b", "--gpu", "rtx 5090", "--from-command",
                                 "VLLM_PP_LAYER_PARTITION=16,16 vllm serve Qwen/Qwen3-30B-A3B "
                                 "--pipeline-parallel-size 2"])
    assert result.exit_code == 2, result.output
    assert "16,16 does not split 48 layers over 2 stages" in result.output


def test_what_kvplan_does_not_model_is_named_from_the_line():
    # vllm-project/vllm#21348: vLLM with the LMCache connector; kvplan sizes vLLM without it
    plan = from_command("vllm serve /path/to/Qwen3-235B-A22B-FP8 --tensor-parallel-size 4 "
                        "--kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\","
                        "\"kv_role\":\"kv_both\"}'", "qwen3-235b-a22b")
    assert any(w.startswith("--kv-transfer-config: vLLM runs the LMCacheConnectorV1 connector "
                            "(kv_both); kvplan does not model it") for w in plan.warnings)
    assert not any("not a flag kvplan knows" in w for w in plan.warnings)
    # kvcached (ovg-project/kvcached#210 starts vLLM with ENABLE_KVCACHED=true): named when on
    on = from_command("ENABLE_KVCACHED=true KVCACHED_AUTOPATCH=1 vllm serve Qwen/Qwen3-8B")
    assert any(w.startswith("ENABLE_KVCACHED=true: kvcached") for w in on.warnings)
    off = from_command("ENABLE_KVCACHED=false vllm serve Qwen/Qwen3-8B")
    assert not any("kvcached" in w for w in off.warnings)
    # SGLang's --is-embedding (a reward model's score head is not the LM head kvplan counts)
    reward = from_command("python -m sglang.launch_server --model-path "
                          "Skywork/Skywork-Reward-Llama-3.1-8B-v0.2 --is-embedding", "llama-3.1-8b")
    assert any("is_embedding=True" in w for w in reward.warnings)
    assert not any("not a flag kvplan knows" in w for w in reward.warnings)
