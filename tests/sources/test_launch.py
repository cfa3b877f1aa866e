"""Launch commands as input (`kvplan plan --from-command`): each engine's program and flags,
Docker and Kubernetes wrappers, and the shared engine logs that quote their command."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.planning.launch import engine_launches, from_command
from kvplan.sources.launch import command_words, parse_launch

runner = CliRunner()
GIB = 2**30


def _plan(command: str, *args: str) -> tuple[dict, str]:
    result = runner.invoke(app, ["plan", "--from-command", command, *args, "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_vllm_serve_flags_set_the_deployment():
    lp = from_command("vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 "
                      "--max-model-len 32768 --gpu-memory-utilization 0.9 --kv-cache-dtype fp8 "
                      "--host 0.0.0.0 --port 8000 --trust-remote-code")
    assert (lp.engine, lp.model) == ("vllm", "meta-llama/Llama-3.1-70B-Instruct")
    assert lp.overrides == {"tp": 4, "max_model_len": 32768, "memory_fraction": 0.9,
                            "kv_dtype": "fp8"}
    assert lp.warnings == ()  # host, port and trust-remote-code are known not to matter
    assert set(lp.launch.ignored_flags) == {"--host", "--port", "--trust-remote-code"}


def test_equals_spelling_short_flags_and_line_continuations():
    lp = from_command("vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n  -tp=2 \\\n"
                      "  --max-model-len=16k --enforce-eager")
    assert lp.overrides["tp"] == 2 and lp.overrides["max_model_len"] == 16 * 1024


def test_unknown_flags_are_named_as_possibly_affecting_memory():
    lp = from_command("vllm serve meta-llama/Llama-3.1-8B-Instruct --frobnicate 3")
    assert any("--frobnicate" in w and "might change memory" in w for w in lp.warnings)


def test_docker_run_wrapper_image_tag_and_env():
    launch = parse_launch("docker run --runtime nvidia --gpus all -v ~/.cache:/root/.cache "
                          "--env HF_TOKEN=abc -p 8000:8000 --ipc=host vllm/vllm-openai:v0.10.1 "
                          "--model Qwen/Qwen3-8B --max-model-len 8192", engine_launches())
    assert launch.engine == "vllm" and launch.image == "vllm/vllm-openai:v0.10.1"
    assert launch.image_version == "0.10.1" and launch.env == {"HF_TOKEN": "abc"}
    assert launch.settings == {"model": "Qwen/Qwen3-8B", "max_model_len": 8192}


def test_kubernetes_container_command_and_args():
    spec = """
containers:
  - name: vllm
    image: vllm/vllm-openai:latest
    command: ["vllm", "serve"]
    args:
      - meta-llama/Llama-3.1-8B-Instruct
      - --tensor-parallel-size=2
      - --max-num-seqs
      - "128"
"""
    lp = from_command(spec)
    assert lp.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert lp.overrides == {"tp": 2, "max_num_seqs": 128}


def test_sglang_trtllm_and_llamacpp_tables():
    sg = parse_launch("python3 -m sglang.launch_server --model-path Qwen/QwQ-32B --tp 4 "
                      "--mem-fraction-static 0.85 --context-length 32768 --kv-cache-dtype "
                      "fp8_e4m3 --max-running-requests 64", engine_launches())
    assert sg.engine == "sglang" and sg.settings == {
        "model": "Qwen/QwQ-32B", "tp": 4, "gpu_memory_utilization": 0.85,
        "max_model_len": 32768, "kv_dtype": "fp8_e4m3", "max_num_seqs": 64}
    trt = parse_launch("trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 2 "
                       "--max_batch_size 64 --max_seq_len 4096 "
                       "--kv_cache_free_gpu_memory_fraction 0.85", engine_launches())
    assert trt.engine == "trtllm" and trt.settings == {
        "model": "meta-llama/Llama-3.1-8B-Instruct", "tp": 2, "max_num_seqs": 64,
        "max_model_len": 4096, "gpu_memory_utilization": 0.85}
    cpp = parse_launch("./llama-server -m /models/qwen3-8b-q4_k_m.gguf -c 16384 -np 4 "
                       "-ctk q8_0 -ctv q8_0 -fa -ngl 99 --port 8080", engine_launches())
    assert cpp.engine == "llamacpp" and cpp.settings == {
        "model": "/models/qwen3-8b-q4_k_m.gguf", "max_model_len": 16384, "parallel": 4,
        "kv_dtype": "q8_0", "kv_dtype_v": "q8_0", "flash_attn": "on", "n_gpu_layers": "99"}


def test_trtllm_serve_second_names_and_request_only_flags():
    # trtllm-serve (tensorrt_llm/commands/serve.py, 1.2) declares options under two names,
    # `@click.option("--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction")`,
    # --tensor_parallel_size/--tp_size, --config/--extra_llm_api_options; a public serving
    # note launches with the first spelling and --tool_parser (a response parser)
    trt = parse_launch("trtllm-serve serve /path/to/Qwen3-1.7B --host 127.0.0.1 --port 8000 "
                       "--tool_parser qwen3 --max_batch_size 1 --max_seq_len 2048 "
                       "--free_gpu_memory_fraction 0.5 --tensor_parallel_size 2 "
                       "--pipeline_parallel_size 1 --moe_expert_parallel_size 1 "
                       "--config llm_opts.yaml --grpc", engine_launches())
    assert trt.unknown_flags == ()
    assert trt.settings == {
        "model": "/path/to/Qwen3-1.7B", "max_num_seqs": 1, "max_model_len": 2048,
        "gpu_memory_utilization": 0.5, "tp": 2, "pp": 1, "ep": 1,
        "extra_options": "llm_opts.yaml"}
    assert {"--tool_parser", "--grpc"} <= set(trt.ignored_flags)


def test_llama_server_ctx_size_zero_is_the_models_trained_context():
    # llama.cpp#11681 runs `llama-server --ctx-size 0 --parallel 6`: common/arg.cpp's help for
    # -c says "0 = loaded from model", n_ctx_train (131,072 for Llama 3.2 1B, its config's
    # max_position_embeddings), split over the 6 slots: n_ctx_seq = GGML_PAD(131072 / 6, 256)
    # = 21,845 padded to 22,016 cells a slot, 132,096 in all
    line = ("./llama-server --model models/llama-3.2-1b-q8_0.gguf --alias full --host 0.0.0.0 "
            "--port 55055 --ctx-size 0 --threads 94 --threads-http 12 --parallel 6 "
            "--mirostat 2 --mirostat-ent 5.7 --mirostat-lr 0.14")
    cpp = parse_launch(line, engine_launches())
    assert cpp.settings == {"model": "models/llama-3.2-1b-q8_0.gguf", "parallel": 6}
    assert cpp.unknown_flags == ()
    result = runner.invoke(app, ["plan", "llama-3.2-1b", "--from-command", line,
                                 "--gpu-memory", "24GiB", "-f", "json"])
    # exit 1: a slot holds less than the model's full context, as the post complains
    assert result.exit_code == 1, result.output
    engine = json.loads(result.stdout)["engine"]
    assert engine["cells_per_seq"] == 22016 and engine["cells"] == 6 * 22016


# the DGX Spark TensorRT-LLM playbook's server, as jharthorn/dgx-spark-harness (throughput.sh)
# runs it: the LLM API options file is written by a here-document inside the container's
# `bash -c` string, then named by --extra_llm_api_options
SPARK_TRTLLM = """export MODEL_HANDLE="openai/gpt-oss-120b"
docker run --name trtllm_llm_server --rm -it --gpus all --ipc host --network host \\
  -e HF_TOKEN=$HF_TOKEN \\
  -e MODEL_HANDLE="$MODEL_HANDLE" \\
  -v $HOME/.cache/huggingface/:/root/.cache/huggingface/ \\
  nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev \\
  bash -c '
    export TIKTOKEN_ENCODINGS_BASE="/tmp/harmony-reqs" && \\
    mkdir -p $TIKTOKEN_ENCODINGS_BASE && \\
    hf download $MODEL_HANDLE && \\
    cat > /tmp/extra-llm-api-config.yml <<EOF
print_iter_log: false
kv_cache_config:
  dtype: "auto"
  free_gpu_memory_fraction: 0.9
cuda_graph_config:
  enable_padding: true
disable_overlap_scheduler: true
EOF
    trtllm-serve "$MODEL_HANDLE" \\
      --max_batch_size 64 \\
      --trust_remote_code \\
      --port 8355 \\
      --extra_llm_api_options /tmp/extra-llm-api-config.yml
'
"""


def test_trtllm_options_file_written_by_the_launch_text_is_read():
    trt = parse_launch(SPARK_TRTLLM, engine_launches())
    # the file's keys (TorchLlmArgs, KvCacheConfig) as the flags would set them
    assert trt.settings == {"model": "openai/gpt-oss-120b", "max_num_seqs": 64,
                            "kv_dtype": "auto", "gpu_memory_utilization": 0.9}
    assert "print_iter_log in /tmp/extra-llm-api-config.yml" in trt.ignored_flags
    # CUDA-graph padding and the overlap scheduler may change memory: named, not dropped
    assert trt.unknown_options == (
        "cuda_graph_config.enable_padding in /tmp/extra-llm-api-config.yml",
        "disable_overlap_scheduler in /tmp/extra-llm-api-config.yml")
    assert trt.unknown_flags == ()


def test_an_options_file_wins_over_the_flags_and_one_not_written_stays_named():
    # serve.py lays the file over the flags (update_llm_args_with_extra_dict); the target
    # may be a variable the script sets, the here-document `cat << EOF > FILE` (as
    # TensorRT-LLM's performance guide writes it)
    script = ("model_path=/path/to/llama3.1_70B\n"
              "extra_llm_api_file=/tmp/extra-llm-api-config.yml\n"
              "cat << EOF > ${extra_llm_api_file}\n"
              "kv_cache_config:\n  free_gpu_memory_fraction: 0.5\nmax_seq_len: 2048\n"
              "EOF\n"
              "trtllm-serve serve ${model_path} --max_seq_len 8192 "
              "--kv_cache_free_gpu_memory_fraction 0.9 "
              "--extra_llm_api_options ${extra_llm_api_file}\n")
    trt = parse_launch(script, engine_launches())
    assert trt.settings["gpu_memory_utilization"] == 0.5
    assert trt.settings["max_model_len"] == 2048 and "extra_options" not in trt.settings
    elsewhere = parse_launch("trtllm-serve m --extra_llm_api_options cfg.yml",
                             engine_launches())
    assert elsewhere.settings["extra_options"] == "cfg.yml"
    with pytest.raises(BadInputError, match="max_batch_size in f.yml"):
        parse_launch("cat > f.yml <<'EOF'\nmax_batch_size: many\nEOF\n"
                     "trtllm-serve m --config f.yml", engine_launches())


def test_sglang_logging_flags_are_ignored_and_batch_shapers_stay_unknown():
    # sglang#6888's line: the request log's level and the cache report change no memory; a
    # torch.compile batch cap and mixed prefill/decode batches may (the graphs and the
    # activation peak), so they are still named as unknown
    sg = parse_launch(
        "python -m sglang.launch_server --host 0.0.0.0 --port 30000 --dtype auto "
        "--mem-fraction-static 0.95 --tp-size 2 --max-running-requests 48 --trust-remote-code "
        "--enable-cache-report --log-level info --chunked-prefill-size 4096 --quantization fp8 "
        "--enable-torch-compile --cuda-graph-max-bs 64 --torch-compile-max-bs 32 --model-path "
        "Qwen2.5-7B-Instruct --attention-backend flashinfer --enable-mixed-chunk --log-requests "
        "--log-requests-level 2 --page-size 16", engine_launches())
    assert sg.unknown_flags == ("--torch-compile-max-bs", "--enable-mixed-chunk")
    assert {"--enable-cache-report", "--log-requests-level"} <= set(sg.ignored_flags)
    assert sg.settings["block_size"] == 16 and sg.settings["gpu_memory_utilization"] == 0.95


def test_sglang_parallel_sizes_under_their_long_names():
    # server_args.py declares "--tensor-parallel-size", "--tp-size" (pipeline and data alike);
    # didier-durand/llms-in-clouds/docs/sglang.md starts QwQ-32B on four L4s with the long name
    sg = parse_launch("python3.12 -m sglang.launch_server --model Qwen/QwQ-32B --model-path "
                      "/home/model/Qwen/QwQ-32B --tensor-parallel-size 4 --enable-p2p-check",
                      engine_launches())
    assert sg.settings == {"model": "/home/model/Qwen/QwQ-32B", "tp": 4}
    assert sg.unknown_flags == () and sg.ignored_flags == ("--enable-p2p-check",)
    sg = parse_launch("python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
                      "--pipeline-parallel-size 2 --data-parallel-size 2", engine_launches())
    assert sg.settings == {"model": "Qwen/Qwen3-8B", "pp": 2, "dp": 2}


@pytest.mark.parametrize("text,match", [
    ("", "empty"),
    ("python train.py --lr 3", "no engine's launch program"),
    ("vllm serve m --max-model-len", "has no value"),
    ("vllm serve m --tensor-parallel-size two", "not a valid number"),
    ("vllm serve m --gpu-memory-utilization nan", "not a valid number"),
    ("vllm serve 'unbalanced", "quotes"),
    ("docker run --gpus all", "names no image"),
])
def test_bad_commands_are_one_clear_error(text, match):
    with pytest.raises(BadInputError, match=match):
        from_command(text)


def test_cli_without_model_or_command_is_exit_2():
    result = runner.invoke(app, ["plan", "--gpu", "h100"])
    assert result.exit_code == 2 and "MODEL is missing" in result.output
    # a command without a model and no MODEL beside it names what to add
    none = runner.invoke(app, ["plan", "--gpu", "h100", "--from-command",
                               "vllm serve --tensor-parallel-size 2"])
    assert none.exit_code == 2 and "names no model" in none.output



def test_a_setting_in_the_command_and_as_a_flag_is_exit_2():
    # the command's TP would silently replace --tp's: a conflict, not a precedence rule
    both = runner.invoke(app, ["plan", "--gpu", "h100", "--tp", "2", "--from-command",
                               "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 4"])
    assert both.exit_code == 2, both.output
    assert "--tp given both as a flag and in --from-command" in both.output
    # a flag the command does not set still applies: TP 2 -> 2 GPUs
    out, _ = _plan("vllm serve meta-llama/Llama-3.1-8B", "--gpu", "h100", "--tp", "2")
    assert out["deployment"]["tp"] == 2 and out["deployment"]["num_gpus"] == 2


# --- the shared engine logs that quote their launch command --------------------------------

def test_shared_log_deepseek_v2_lite_tp2_pp2_from_its_command():
    # engine-logs.yaml vllm-pr20665: the command as quoted, 4x L4, the budget rank 0 logged;
    # "GPU KV cache size: 807,792 tokens", "Maximum concurrency for 1,024 tokens: 788.86x"
    out, _ = _plan("vllm serve deepseek-ai/DeepSeek-V2-Lite --trust-remote-code "
                   "--max-model-len=1024 --enforce-eager --tensor-parallel-size=2 "
                   "--pipeline-parallel-size=2", "--gpu", "l4", "--kv-memory", "12.13GiB")
    numbers = out["engine"]
    assert numbers["kv_cache_tokens"] == pytest.approx(807_792, rel=0.005)
    assert numbers["max_concurrency"] == pytest.approx(788.86, rel=0.005)


def test_shared_log_sglang_qwen3_235b_fp8_from_its_command():
    # engine-logs.yaml sglang-i21348: "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB,
    # V size: 8.23 GB" (SGLang's GB are 2^30): the pool is K + V = 16.46 GiB
    out, err = _plan("python3 -m sglang.launch_server --model /path/to/Qwen3-235B-A22B-FP8 "
                     "--tp 4 --trust-remote-code --host 0.0.0.0 --port 8000 "
                     "--mem-fraction-static 0.93", "--gpu", "h100", "--kv-memory", "16.46GiB")
    assert out["engine"]["max_total_num_tokens"] == pytest.approx(367_404, rel=0.005)
    assert "fp8 weights" in err
    # by hand: 94 layers x 1 KV head per rank (4 / TP 4) x 128 x 2 bytes, K and V
    assert out["engine"]["max_total_num_tokens"] == math.floor(
        int(16.46 * GIB) / (94 * 1 * 128 * 2 * 2))


def test_command_words_never_evaluate_anything():
    words = command_words("vllm serve $(rm -rf /) `reboot` --port 1 ; echo hi")
    assert "$(rm" in words and "`reboot`" in words  # plain words, nothing run


def test_vllm_bitsandbytes_flag_is_nf4_quantized_at_load():
    # vllm#13882's command line: `quantization=bitsandbytes` (vLLM's loader makes NF4 with
    # double quantization); the plan's weights use that format, not int4 with fp16 scales
    lp = from_command("vllm serve Qwen/Qwen2.5-7B-Instruct --quantization bitsandbytes")
    assert lp.overrides["weights_dtype"] == "bnb-4bit"


def test_vllm_reads_an_unambiguous_prefix_as_argparse_does():
    # vLLM 0.10.2's own start-up advice (memory-aware_RLHF's vllm.log, gpu_worker.py): "Replace
    # gpu_memory_utilization config with `--kv-cache-memory=16130110668`": argparse
    # (allow_abbrev) takes it for --kv-cache-memory-bytes
    lp = from_command("vllm serve Qwen/Qwen2.5-3B --kv-cache-memory=16130110668 "
                      "--max-model 4096 --max-num 8")
    assert lp.overrides["kv_memory_bytes"] == 16_130_110_668
    assert lp.overrides["max_model_len"] == 4096
    # --max-num begins --max-num-seqs and --max-num-batched-tokens: ambiguous, named
    assert any(w.startswith("--max-num:") for w in lp.warnings)
    assert "max_num_seqs" not in lp.overrides
    # kvplan reads prefixes for vLLM only (its own advice writes one); elsewhere a prefix
    # stays unknown and is named
    sg = from_command("python -m sglang.launch_server --model-path Qwen/Qwen2.5-3B "
                      "--mem-fraction 0.8")
    assert "memory_fraction" not in sg.overrides
    assert any(w.startswith("--mem-fraction:") for w in sg.warnings)


@pytest.mark.parametrize("line", [
    "nohup vllm serve Qwen/Qwen2.5-3B --max-model-len 4096 > vllm.log 2>&1 &",
    "vllm serve Qwen/Qwen2.5-3B --max-model-len 4096 2>&1 | tee vllm.log",
    "CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-3B --max-model-len 4096 &>log.txt && echo up",
    "sudo -E vllm serve Qwen/Qwen2.5-3B --max-model-len 4096 >> vllm.log",
    "time vllm serve Qwen/Qwen2.5-3B --max-model-len=4096 < /dev/null ; sleep 1",
])
def test_shell_redirections_pipes_and_wrappers_are_not_flags(line):
    # a shell line as posted: the command ends at |, ;, && or &, and its redirections (their
    # targets too) are the shell's, not the engine's
    lp = from_command(line)
    assert lp.overrides["max_model_len"] == 4096
    assert lp.warnings == ()


def test_sudo_docker_run_is_the_docker_line():
    lp = from_command("sudo docker run --gpus '\"device=0\"' -p 8000:8000 "
                      "vllm/vllm-openai:v0.9.2 --model Qwen/Qwen2.5-3B")
    assert lp.engine == "vllm" and lp.overrides["engine_version"] == "0.9.2"


def test_the_command_that_starts_the_engine_in_a_list_of_commands():
    lp = from_command("source ~/venv/bin/activate && cd /srv && CUDA_VISIBLE_DEVICES=1 "
                      "VLLM_PP_LAYER_PARTITION=20,16 vllm serve Qwen/Qwen2.5-3B -pp 2 "
                      "--max-model-len 4096 | tee serve.log")
    assert lp.overrides["pp_layers"] == (20, 16) and lp.overrides["max_model_len"] == 4096
    assert lp.warnings == ()


# --- lines as posted in public issues (the forms kvplan once misread, each written here) ------

def test_a_backslash_with_blanks_after_it_still_continues_the_line():
    # vllm-project/vllm#28228 posted its line with spaces after a `\`; a shell would end the
    # command there, but the reader keeps the flags on the next line
    lp = from_command("vllm serve meta-llama/Llama-3.1-8B-Instruct \\   \n  --max-model-len 8192")
    assert lp.overrides == {"max_model_len": 8192}
    assert lp.warnings == ()


def test_export_lines_before_the_command_are_its_environment():
    # ovg-project/kvcached#210: the switch exported on a line of its own, the command below
    script = ("export ENABLE_KVCACHED=true\nexport VLLM_USE_V1=1\n\n"
              "vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n  --tensor-parallel-size 2 &\n")
    lp = from_command(script)
    assert lp.launch.env == {"ENABLE_KVCACHED": "true", "VLLM_USE_V1": "1"}
    # VLLM_USE_V1 is vLLM's engine switch (envs.py), read as the deployment's vllm_v1
    assert lp.overrides == {"tp": 2, "vllm_v1": True}
    assert any("kvcached" in w for w in lp.warnings)


def test_a_scripts_own_variables_are_put_into_its_command():
    # sridhar1804/local-ai start_vllm.sh: the program and the model are variables the script
    # sets on lines above the command
    script = ("#!/bin/bash\nVLLM=/home/ubuntu/ai/bin/vllm\n"
              "MODEL=microsoft/Phi-3-mini-4k-instruct\nLOG=/home/ubuntu/ai/code/logs/vllm.log\n"
              'echo "$(date): Starting vLLM $MODEL on port 8000" >> "$LOG"\n\n'
              '"$VLLM" serve "$MODEL" \\\n  --dtype float16 \\\n  --max-model-len 4096 \\\n'
              '  --gpu-memory-utilization 0.85 \\\n  --port 8000 \\\n'
              '  >> "$LOG" 2>&1 &\nPID=$!\n')
    lp = from_command(script)
    assert lp.launch.engine == "vllm" and lp.model == "microsoft/Phi-3-mini-4k-instruct"
    assert lp.overrides == {"max_model_len": 4096, "memory_fraction": 0.85}


def test_a_variables_default_is_taken_and_said_where_the_text_does_not_set_it():
    # kolyangg/mlops-assignment scripts/start_vllm.sh: ${VAR:-default}, which the shell reads
    # as its default when VAR is unset (the serving machine's environment may set it)
    script = ('MODEL="${VLLM_MODEL:-Qwen/Qwen3-8B}"\n'
              'MAX_MODEL_LEN="${VLLM_MAX_MODEL_LEN:-6144}"\n'
              'exec uv run python -m vllm.entrypoints.openai.api_server --model "$MODEL" '
              '--max-model-len "$MAX_MODEL_LEN" --enable-prefix-caching\n')
    lp = from_command(script)
    assert lp.model == "Qwen/Qwen3-8B" and lp.overrides["max_model_len"] == 6144
    assert sum("VLLM_MAX_MODEL_LEN is not set in the command: read as its default '6144'" in w
               for w in lp.warnings) == 1
    lp = from_command("VLLM_MAX_MODEL_LEN=8192\n" + script)
    assert lp.overrides["max_model_len"] == 8192
    assert not any("VLLM_MAX_MODEL_LEN" in w for w in lp.warnings)
    # one the text never sets, with no default, is still not guessed
    with pytest.raises(BadInputError, match=r"shell variable \$CKPT"):
        from_command("MODEL=unused\nvllm serve $CKPT --max-model-len 4096")


def test_a_line_of_flags_continues_the_command_above_it():
    lp = from_command("vllm serve meta-llama/Llama-3.1-8B-Instruct\n  --max-model-len 4096\n"
                      "  --max-num-seqs 4")
    assert lp.overrides == {"max_model_len": 4096, "max_num_seqs": 4}


def test_a_quoted_json_object_over_several_lines_stays_one_word():
    lp = from_command("vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{\n"
                      '  "method": "ngram",\n  "num_speculative_tokens": 3\n}\'')
    assert lp.overrides == {"num_speculative_tokens": 3}


def test_compose_service_image_and_folded_command():
    # vllm-project/vllm#51041: compose's `image:` names the engine, `command: >` gives only
    # the arguments of the image's entrypoint
    spec = ("services:\n  vllm:\n    image: mirror.example/docker.io/vllm/vllm-openai:v0.26.0\n"
            "    environment:\n      - VLLM_PP_LAYER_PARTITION=16,16\n"
            "    command: >\n      /model\n      --pipeline-parallel-size 2\n"
            "      --gpu-memory-utilization 0.9\n")
    lp = from_command(spec, "llama-3.1-8b")
    assert lp.engine == "vllm" and lp.launch.image_version == "0.26.0"
    assert lp.overrides["pp"] == 2 and lp.overrides["memory_fraction"] == 0.9
    assert lp.overrides["pp_layers"] == (16, 16)  # read from the service's environment


def test_kubernetes_env_list_is_the_containers_environment():
    spec = ("containers:\n- name: vllm\n  image: vllm/vllm-openai:v0.10.1\n"
            "  env:\n  - name: ENABLE_KVCACHED\n    value: 'true'\n"
            "  args: [\"--model\", \"meta-llama/Llama-3.1-8B-Instruct\"]\n")
    lp = from_command(spec)
    assert lp.launch.env["ENABLE_KVCACHED"] == "true"
    assert any("kvcached" in w for w in lp.warnings)


@pytest.mark.parametrize("line", [
    "bash -c 'vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096'",
    "docker run --gpus all vllm/vllm-openai:v0.9.2 /bin/sh -c "
    "\"pip list; vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096\"",
    "apptainer run --nv -B /data:/data docker://vllm/vllm-openai:v0.9.2 "
    "--model meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096",
])
def test_shells_and_containers_that_run_the_command(line):
    lp = from_command(line)
    assert lp.engine == "vllm" and lp.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert lp.overrides["max_model_len"] == 4096


def test_a_line_of_arguments_only_is_refused_naming_its_first_flag():
    # ggml-org/llama.cpp#14043 posted the container's arguments without the program
    with pytest.raises(BadInputError, match="starts with the flag -c, not a program"):
        from_command("-c 240000 -ngl 1000 -nkvo --host 0.0.0.0 --port 8000 -sm row")


def test_a_variable_that_doubles_line_after_line_is_refused_in_bounded_memory():
    # `A=$A$A` on 32 lines would make a 64 GiB word from a 16-character value (a shell would
    # try); one word of many `$A` multiplies a long value as well. Both stop at the command's
    # own bound, with the error naming what to change
    doubling = "export A=" + "x" * 16 + "\n" + "export A=$A$A\n" * 32 + \
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --served-model-name $A"
    many = "export A=" + "x" * 30_000 + "\nvllm serve m --served-model-name " + "$A" * 10_000
    for text in (doubling, many):
        with pytest.raises(BadInputError, match="expand to more than 65,536 characters"):
            parse_launch(text, engine_launches())


def test_a_shell_variable_for_the_model_is_refused_by_name():
    with pytest.raises(BadInputError, match=r"shell variable \$CKPT"):
        from_command("vllm serve $CKPT --tensor-parallel-size 8")
    lp = from_command("vllm serve $CKPT --tensor-parallel-size 8", "llama-3.1-8b")
    assert lp.model == "llama-3.1-8b"


def test_an_awq_checkpoint_named_with_its_width_has_awq_weights():
    # sostrowsk/dgx-spark-local-llm: cyankiwi/gemma-4-26B-A4B-it-qat-AWQ-INT4, its weights
    # 16.63 GiB as vLLM loaded them (Marlin WNA16), where bf16 would be some 48 GiB
    lp = from_command("vllm serve cyankiwi/gemma-4-26B-A4B-it-qat-AWQ-INT4 --max-num-seqs 32",
                      "tests/fixtures/hf-configs/google--gemma-4-26B-A4B.json")
    assert lp.overrides["weights_dtype"] == "awq"


def test_a_gguf_file_not_here_is_read_by_its_name_less_the_weight_type():
    lp = from_command("llama-server -m /models/Qwen3-8B-Q4_K_M.gguf -c 8192")
    assert lp.model == "Qwen3-8B"
    assert any("not Q4_K_M" in w for w in lp.warnings)


def test_an_unknown_model_of_the_line_says_how_to_give_it():
    result = runner.invoke(app, ["plan", "--from-command", "vllm serve /srv/Nope-13B",
                                 "--gpu", "h100"])
    assert result.exit_code == 2
    assert "beside --from-command" in result.output


def test_a_stray_argument_is_named_as_one():
    lp = from_command("vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8111--gpu-memory-"
                      "utilization 0.95")
    assert any("'0.95': an argument no flag of vllm takes" in w for w in lp.warnings)


@pytest.mark.parametrize("flag", ["--hf-overrides '{\"num_hidden_layers\": 16}'",
                                  "--compilation-config '{\"cudagraph_mode\": \"FULL\"}'",
                                  "--rope-scaling '{\"rope_type\": \"yarn\", \"factor\": 4}'"])
def test_vllm_flags_that_change_the_config_are_named_not_ignored(flag):
    lp = from_command(f"vllm serve meta-llama/Llama-3.1-8B-Instruct {flag}")
    name = flag.split()[0].lstrip("-").replace("-", "_")
    assert any(name in w for w in lp.warnings), lp.warnings


@pytest.mark.parametrize("line, eager", [
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager=false", False),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager false", False),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager=True", True),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager", True),
])
def test_a_switch_given_a_value_takes_it(line, eager):
    # vllm-project/vllm#6689 posted --enable-chunked-prefill=false (0.5's StoreBoolean)
    assert from_command(line).overrides.get("enforce_eager", False) is eager


def test_a_switch_given_a_word_that_is_no_boolean_is_refused_by_name():
    with pytest.raises(BadInputError, match="--enforce-eager=maybe"):
        from_command("vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager=maybe")


def test_a_dockerfile_cmd_in_exec_form_with_a_comment_line():
    # vllm-project/vllm#14452 posted a Dockerfile whose CMD list has a line commented out
    text = ('FROM nvcr.io/nvidia/tritonserver:25.01-vllm-python-py3\nWORKDIR /app\n\n'
            'EXPOSE 8000\nCMD ["python3", "-m", "vllm.entrypoints.openai.api_server", \\\n'
            '    "--model", "meta-llama/Llama-3.1-8B-Instruct", \\\n'
            '    "--port", "8000", "--max_model_len", "8192", \\\n'
            '    # "--quantization", "bitsandbytes", \\\n'
            '    "--gpu_memory_utilization", "0.85", \\\n'
            '    "--enforce-eager"]\n')
    lp = from_command(text)
    assert lp.engine == "vllm" and lp.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert lp.overrides == {"max_model_len": 8192, "memory_fraction": 0.85,
                            "enforce_eager": True}
    assert lp.launch.image == "nvcr.io/nvidia/tritonserver:25.01-vllm-python-py3"


def test_a_dockerfile_entrypoint_and_cmd_in_shell_form():
    text = ("FROM vllm/vllm-openai:v0.9.2\nENV VLLM_PP_LAYER_PARTITION=16,16\n"
            'ENTRYPOINT ["/bin/bash", "-c"]\n'
            'CMD ["vllm serve meta-llama/Llama-3.1-8B-Instruct --pipeline-parallel-size 2"]\n')
    lp = from_command(text)
    assert lp.overrides["pp"] == 2 and lp.overrides["pp_layers"] == (16, 16)
    assert lp.launch.image_version == "0.9.2"


def test_another_images_tag_is_not_the_engines_release():
    lp = from_command("docker run --gpus all nvcr.io/nvidia/tritonserver:25.01-vllm-python-py3 "
                      "vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert lp.launch.image_version is None and "engine_version" not in lp.overrides


def test_tgi_reads_every_flag_from_its_environment_and_the_flag_wins():
    # launcher/src/main.rs: each Args field is #[clap(long, env)]; the launcher's own docs
    # print "[env: MODEL_ID=]", "[env: NUM_SHARD=]" beside the flags
    lp = from_command("docker run --gpus all -e MODEL_ID=meta-llama/Llama-3.1-8B-Instruct "
                      "-e MAX_TOTAL_TOKENS=8192 -e NUM_SHARD=2 "
                      "ghcr.io/huggingface/text-generation-inference:2.4.1 "
                      "--max-total-tokens 4096")
    assert lp.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert lp.overrides["tp"] == 2 and lp.overrides["max_model_len"] == 4096


def test_llamacpp_reads_its_llama_arg_variables():
    # common/arg.cpp: -c is .set_env("LLAMA_ARG_CTX_SIZE"), -np LLAMA_ARG_N_PARALLEL, ...
    lp = from_command("docker run --gpus all -e LLAMA_ARG_CTX_SIZE=8192 "
                      "-e LLAMA_ARG_N_PARALLEL=2 -e LLAMA_ARG_MODEL=/models/model.gguf "
                      "ghcr.io/ggml-org/llama.cpp:server-cuda -ngl 99", "llama-3.1-8b")
    assert lp.overrides["max_model_len"] == 8192 and lp.overrides["parallel"] == 2


def test_a_bad_value_in_an_engine_variable_names_the_variable():
    with pytest.raises(BadInputError, match="LLAMA_ARG_CTX_SIZE='lots'"):
        from_command("LLAMA_ARG_CTX_SIZE=lots llama-server -m /m/x.gguf", "llama-3.1-8b")


@pytest.mark.parametrize("mark", ["^", "`"])
def test_windows_line_continuations(mark):
    lp = from_command(f"vllm serve meta-llama/Llama-3.1-8B-Instruct {mark}\n"
                      f"  --max-model-len 4096 {mark}\n  --max-num-seqs 4")
    assert lp.overrides == {"max_model_len": 4096, "max_num_seqs": 4}
    assert lp.warnings == ()


def test_a_windows_path_keeps_its_separators():
    # DzKriMo/Aigis README: llama-server.exe from PowerShell, its paths with backslashes, which
    # a POSIX shell reading of the words would drop (.llama.cppllama-server.exe)
    cpp = parse_launch(".\\llama.cpp\\llama-server.exe \\\n  -m models\\qwen2.5-3b-instruct-"
                       "q4_k_m.gguf \\\n  --port 8080 --n-gpu-layers 35 --ctx-size 2048",
                       engine_launches())
    assert cpp.engine == "llamacpp" and cpp.settings == {
        "model": "models/qwen2.5-3b-instruct-q4_k_m.gguf", "n_gpu_layers": "35",
        "max_model_len": 2048}
    lp = from_command("C:\\Users\\me\\llama\\llama-server.exe -m C:\\models\\"
                      "Qwen3-8B-Q4_K_M.gguf -c 8192 ^\n  -np 2")
    assert lp.model == "Qwen3-8B" and lp.overrides["max_model_len"] == 8192
    # a POSIX line's escaped quotes are still the shell's
    sp = parse_launch('vllm serve m --speculative-config "{\\"model\\": \\"d\\", '
                      '\\"num_speculative_tokens\\": 3}"', engine_launches())
    assert sp.settings["speculative_config"] == {"model": "d", "num_speculative_tokens": 3}


@pytest.mark.parametrize("line, model", [
    # vllm-project/vllm#6689: a Hugging Face cache directory names its repo
    ("python -m vllm.entrypoints.openai.api_server --model /NS/llm-1/nobackup/shared/"
     "huggingface_cache/hub/models--meta-llama--Meta-Llama-3.1-70B-Instruct "
     "--tensor-parallel-size 2", "meta-llama/Meta-Llama-3.1-70B-Instruct"),
    ("vllm serve /root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/0123abcd",
     "Qwen/Qwen3-8B"),
    # ModelScope writes a dot as ___ in its directories; the one library model listing a
    # repo of that name (Qwen/Qwen2.5-7B-Instruct) is the model
    ("vllm serve /root/autodl-tmp/models/qwen/Qwen2___5-7B-Instruct", "qwen2.5-7b"),
])
def test_a_checkpoint_directory_is_read_as_the_repo_it_names(line, model):
    from kvplan.sources.library import resolve

    lp = from_command(line)
    assert lp.model == model
    resolve(lp.model)  # a library model: planned offline


def test_an_escaped_blank_before_a_line_break_is_no_argument():
    # a README quoting its shell: `vllm serve \ \` then the model on the next line
    lp = from_command("vllm serve \\ \\\n    /home/me/models/Qwen/Qwen3-8B \\\n"
                      "    --tensor-parallel-size 4")
    assert lp.model == "Qwen3-8B" and lp.overrides == {"tp": 4}


def test_engine_launches_load_each_table_when_reached():
    # `vllm serve ...` is read with vLLM's table alone (start-up); the sequence still holds
    # every registered engine's table, in the registry's order, however it is read
    from dataclasses import replace

    from kvplan.engines import registry
    from kvplan.engines.settings import launch_flags

    eager = [replace(t, flags={**t.flags, **launch_flags(n)})
             for n in registry.names() if (t := registry.launch_table(n)) is not None]
    assert list(engine_launches()) == eager
    assert len(engine_launches()) == len(eager) and engine_launches()[-1] == eager[-1]
    assert engine_launches()[1:3] == eager[1:3] and engine_launches()[2] == eager[2]
    lazy = engine_launches()
    assert next(iter(lazy)).engine == "vllm" and len(lazy._loaded) == 1
    with pytest.raises(IndexError):
        engine_launches()[len(eager)]


def test_a_vllm_command_loads_no_other_engines_tables():
    from probes import probe

    result = probe(["plan", "--from-command", "vllm serve meta-llama/Llama-3.1-8B-Instruct",
                    "--gpu", "h100"],
                   ("kvplan.engines.vllm.text", "kvplan.engines.sglang.text",
                    "kvplan.engines.trtllm.text", "kvplan.engines.llamacpp.text",
                    "kvplan.engines.tgi.text"))
    assert result.ran and result.loaded == ["kvplan.engines.vllm.text"], result.stderr


def test_a_reupload_the_hub_cannot_be_asked_about_is_read_as_explain_reads_it(monkeypatch):
    # the line names unsloth/Llama-3.2-3B-Instruct, a re-upload of the library's
    # meta-llama/Llama-3.2-3B-Instruct: with the Hub out of reach, --from-command reads it as
    # that model (said), as explain does (tests/planning/test_explain.py); a name no library
    # model shares stays unresolved, and planning it gives the Hub's error
    from kvplan.core.errors import UnavailableError
    from kvplan.sources import hub

    def unreachable(*args, **kwargs):
        raise UnavailableError("cannot reach the Hugging Face Hub (test)")

    monkeypatch.setattr(hub, "load_hub_spec", unreachable)
    lp = from_command("vllm serve unsloth/Llama-3.2-3B-Instruct --max-model-len 4096")
    assert lp.model == "llama-3.2-3b"
    assert any("same name under another owner" in w for w in lp.warnings)
    assert from_command("vllm serve someone/Not-A-Model-7B").model == "someone/Not-A-Model-7B"


def test_every_sudo_option_is_skipped_before_the_program():
    # sudo -E -u root: both options (and -u's user) belong to sudo, not to the command
    from kvplan.planning.launch import engine_launches
    from kvplan.sources.launch import _unwrap

    words, image, env = _unwrap(["sudo", "-E", "-u", "root", "vllm", "serve", "m"],
                                engine_launches())
    assert words == ["vllm", "serve", "m"] and image is None and env == {}


def test_llama_servers_chat_parsing_flags_are_known_not_to_matter():
    # a deployment guide's line for gpt-oss-20b on eight Ascend NPUs (held-out launch lines,
    # second round, tests/fixtures/launch/index.yaml): --reasoning-format (common/arg.cpp,
    # how the reply's reasoning is parsed) was named as a flag that might change memory
    line = ("CANN_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ./build/bin/llama-server -a gpt-oss-20b "
            "-m /data/models/ggml-org/gpt-oss-20b-GGUF/gpt-oss-20b-mxfp4.gguf -c 0 -fa --jinja "
            "--reasoning-format none --gpu-layers 60")
    cpp = parse_launch(line, engine_launches())
    assert cpp.unknown_flags == ()
    # a llama-server script's other such flags: the grammar, the context shift, the log
    other = ("build/bin/llama-server --jinja --reasoning-format auto -m gpt-oss-20b-F16.gguf "
             "--no-context-shift --grammar-file cline.gbnf --log-verbose "
             "--chat-template-file t.jinja --reasoning-budget 0")
    assert parse_launch(other, engine_launches()).unknown_flags == ()
    result = runner.invoke(app, ["plan", "gpt-oss-20b", "--from-command", line,
                                 "--gpu-memory", "29812MiB", "--count", "8", "-f", "json"])
    assert result.exit_code == 0, result.output
    assert "not a flag" not in result.stderr
    # what b6115 logged: 'size = 3072.00 MiB (131072 cells, 12 layers ...)' and 'size = 18.00
    # MiB (768 cells, 12 layers ...)': 12 full layers x 131,072 x 8 x 64 x 2 (K, V) x 2 B, and
    # 12 sliding layers of pad(128 + 512, 256) = 768 cells
    assert json.loads(result.stdout)["engine"]["total_bytes"] == (3072 + 18) * 2**20
