"""Engine settings as declarations: one `Setting` row per setting, read by everything that
takes one (design.md, "What becomes data" #1).

A row names the setting once: kvplan's flags, each engine's own launch flags, the plan-file
key, the `Deployment` field, its type, unit, bounds, default and help. `plan` and `compare`
get their options from the rows (kvplan.cli.settings), plan files their `engine:` keys
(kvplan.planning.check), `--from-command` the engines' flags (kvplan.planning.launch), and
`check_bounds` the same message from a flag, a file or a launch line; so a new setting is one
row plus its use. Kinds: int, float, bool, bytes, gib (GiB as the engine's flag takes it, held
as bytes), tokens and str. COMMON_SETTINGS every engine shares; ENGINE_SETTINGS the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.core.units import GIB, MAX_BATCH, MAX_TOKENS

MAX_GPUS = 65_536  # GPUs (or ranks of one kind) in one instance: far above any real one
KINDS = ("int", "float", "bool", "bytes", "gib", "tokens", "str")


@record
class Setting:
    """One engine setting, declared once."""

    name: str  # the builder's keyword (kvplan.deploy) and the plan file's `engine:` key
    field_name: str  # the Deployment field it sets
    flags: tuple[str, ...]  # kvplan's own flags (`plan`, `compare`), long form first
    kind: str  # one of KINDS
    unit: str  # tokens, requests, bytes, GiB, fraction, layers, or "" for a switch or a name
    help: str
    # each engine's own launch flags for it: engine name -> flags (read by --from-command)
    engine_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    low: float | None = None  # bounds, inclusive (None: none)
    high: float | None = None
    default: Any = None  # None: the engine's own default (by release and GPU: its `defaults`)
    choices: tuple[str, ...] = ()  # for str settings with a fixed set of values
    # the engines whose model in kvplan reads it (() = every engine); given to another
    # engine, it is refused by name rather than ignored
    only: tuple[str, ...] = ()
    section: str = "engine"  # where a plan file's deployment gives it ("": at its top)
    # the engines whose budget from the GPU and settings it decides (kvplan explain names it
    # when a log does not print it, rather than take the default silently)
    budget: tuple[str, ...] = ()
    # a str setting whose value has a syntax of its own: value, where -> the value as the
    # Deployment keeps it (errors name `where`, the flag as given)
    parse: Callable[[Any, str], str] | None = None
    # a str setting a launch line may give again, each value joined after a comma (-ot)
    repeats: bool = False
    # a bool setting whose default is the engine's own (default None): the flag that turns
    # it off, kvplan's and the engines' alike (--no-async-scheduling)
    off_flag: str | None = None

    @property
    def plan_key(self) -> str:
        """Where a capacity-plan file gives it: `deployments[i].engine.<name>`, or
        `deployments[i].<name>` for the settings every engine shares."""
        return f"{self.section}.{self.name}" if self.section else self.name

    @property
    def flag(self) -> str:
        return self.flags[0]

    def to_field(self, value: Any, spell: str | None = None) -> Any:
        """The value as the Deployment keeps it (bytes as ints), checked against the bounds;
        errors name the setting as the user gave it (`spell`: the flag; "" for none, when the
        caller names the field itself, as a plan file's line does)."""
        if value is None:
            return None
        where = f"{self.flag if spell is None else spell} " if spell != "" else ""
        if self.kind == "bytes":
            from kvplan.core.units import byte_count, parse_bytes

            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise BadInputError(f"{where}must be a size such as 24GiB, got {value!r}")
            if isinstance(value, str):
                return parse_bytes(value, where.strip())
            return byte_count(value, where.strip())
        if self.kind == "tokens" and isinstance(value, str):
            from kvplan.core.units import parse_tokens

            value = parse_tokens(value, where.strip() or self.name)
        if self.kind == "gib":
            number = _number(value, where)
            _bounded(number, self, where)
            return int(number * GIB)  # as the engine does: int(x * 1024**3)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise BadInputError(f"{where}must be true or false, got {value!r}")
            return value
        if self.kind == "str":
            if isinstance(value, bool):
                value = "on" if value else "off"  # YAML 1.1 reads a bare on/off as true/false
            if self.parse is not None:
                return self.parse(value, where)
            value = str(value)
            if self.choices and value not in self.choices:
                raise BadInputError(f"{where}must be one of {', '.join(self.choices)}, got "
                                    f"{value!r}")
            return value
        number = _number(value, where)
        if self.kind in ("int", "tokens"):
            if not isinstance(number, int):
                raise BadInputError(f"{where}must be a whole number, got {value!r}")
        _bounded(number, self, where)
        return number


def _number(value: Any, where: str) -> int | float:
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise BadInputError(f"{where}must be a number, got {value!r}")
    return value


def _shown(value: float) -> str:
    """A bound or a value as a message prints it: an int of any size never goes through float
    (a 400-digit count overflows one), one past 10^18 by its order of magnitude."""
    if isinstance(value, int):
        if -10**18 < value < 10**18:
            return f"{value:,}"
        return f"{'-' if value < 0 else ''}about 10^{int(abs(value).bit_length() * 0.30103)}"
    return f"{value:,g}"


def _bounded(value: float, row: Setting, where: str) -> None:
    low, high = row.low, row.high
    if low is not None and value < low or high is not None and value > high:
        if low is not None and high is not None:
            span = f"between {_shown(low)} and {_shown(high)}"
        elif low is not None:
            span = f"at least {_shown(low)}"
        else:
            assert high is not None  # the test above holds only with a bound
            span = f"at most {_shown(high)}"
        raise BadInputError(f"{where}must be {span}, got {_shown(value)}")


# vLLM's modalities whose encoder --limit-mm-per-prompt gates (multimodal/registry.py, the
# processors' get_supported_mm_limits, 0.10-0.33)
MM_MODALITIES = ("image", "video", "audio")


# the items a prompt may hold of a modality --limit-mm-per-prompt leaves out
# (config/multimodal.py MultiModalConfig.get_limit_per_prompt)
MM_DEFAULT_LIMIT = 999


def parse_mm_limits(value: Any, where: str = "--limit-mm-per-prompt ") -> str:
    """vLLM --limit-mm-per-prompt, items per prompt by modality, as vLLM takes it: a JSON
    object (`{"image": 0, "video": 0}`; from 0.12 a modality may also be an object with its
    `count`, config/multimodal.py MultiModalConfig.limit_per_prompt), the older key=value list
    (`image=0,video=0`), or a mapping (a plan file's). Held as the key=value list sorted by
    modality, so two spellings of one setting are one value; a modality left out is vLLM's
    default, 999 (MultiModalConfig.get_limit_per_prompt)."""
    import json

    def said(text: str) -> str:  # the flag as the user gave it, then what is wrong
        return f"{where.strip()}: {text}" if where.strip() else text

    pairs: dict[str, Any]
    if isinstance(value, Mapping):
        pairs = dict(value)
    else:
        text = str(value).strip()
        if text.startswith("{"):
            try:  # a log echoes the Python dict: {'image': 0}
                loaded = json.loads(text if '"' in text else text.replace("'", '"'))
            except ValueError:
                raise BadInputError(said(f"not a JSON object: {text!r}"),
                                    'give it as {"image": 0, "video": 0} or image=0,video=0'
                                    ) from None
            if not isinstance(loaded, dict):
                raise BadInputError(said(f"must be a JSON object, got {text!r}"))
            pairs = loaded
        else:
            pairs = {}
            for item in filter(None, (x.strip() for x in text.split(","))):
                name, eq, number = item.partition("=")
                if not eq:
                    raise BadInputError(said(f"takes modality=count pairs, got {item!r}"),
                                        "give it as image=0,video=0 or {\"image\": 0}")
                pairs[name.strip()] = number.strip()
    if not pairs:
        raise BadInputError(said("names no modality"), "give image=0,video=0")
    out: dict[str, int] = {}
    for name, given in pairs.items():
        if name not in MM_MODALITIES:
            raise BadInputError(said(f"no modality {name!r}; vLLM's with a tower: "
                                     f"{', '.join(MM_MODALITIES)}"))
        count: Any = given.get("count") if isinstance(given, Mapping) else given  # 0.12 on
        if isinstance(count, str) and count.isdigit() and len(count) <= 18:
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise BadInputError(said(f"{name} must be a whole number of items, at least 0, "
                                     f"got {count!r}"))
        out[name] = min(count, MAX_BATCH)  # any count past that gates nothing more
    return ",".join(f"{k}={out[k]}" for k in sorted(out))


# vLLM's model runner by the flag that names it: --runner (0.10.2 on: auto, generate, pooling,
# draft), --convert (0.10.2 on: auto, none, embed, classify, reward -- a conversion into a
# pooling model) and --task (0.6-0.10: auto, generate, embedding, embed, classify, score,
# reward, transcription, draft), each mapped to the runner it implies (config/model.py
# ModelConfig._get_runner_type / _get_convert_type, 0.11.0; the task table of 0.10.1.1)
RUNNER_VALUES: dict[str, str] = {
    "auto": "auto", "none": "auto",
    "generate": "generate", "transcription": "generate",
    "pooling": "pooling", "embed": "pooling", "embedding": "pooling", "classify": "pooling",
    "score": "pooling", "reward": "pooling"}


def parse_runner(value: Any, where: str = "--runner ") -> str:
    """The runner a vLLM --runner, --convert or --task value implies: generate, pooling, or
    auto (the model's architecture decides; kvplan takes it as generating)."""
    text = str(value).strip().strip("'\"`").lower()  # a log quotes it: `--runner auto`
    if text == "draft":
        raise BadInputError(f"{where.strip() or '--runner'}: kvplan does not model vLLM's "
                            "draft runner", "plan the target model; a drafter's layers are "
                            "--draft-layers")
    if text not in RUNNER_VALUES:
        raise BadInputError(f"{where.strip() or '--runner'}: no vLLM runner, conversion or "
                            f"task {text!r}", f"give one of {', '.join(RUNNER_VALUES)}")
    return RUNNER_VALUES[text]


def mm_limits(text: str | None) -> dict[str, int]:
    """--limit-mm-per-prompt in any form `parse_mm_limits` takes (the held one too) as
    modality -> items per prompt."""
    if not text:
        return {}
    return {k: int(v) for k, _, v in (x.partition("=") for x in
                                      parse_mm_limits(text).split(","))}


# --- the rows --------------------------------------------------------------------------------
# Engine flags: vLLM vllm/engine/arg_utils.py EngineArgs.add_cli_args (0.33); SGLang
# srt/server_args.py ServerArgs.add_cli_args (0.5); llama.cpp common/arg.cpp (b6xxx);
# TensorRT-LLM tensorrt_llm/commands/serve.py (1.1; later releases declare each option under a
# second name: --tensor_parallel_size/--tp_size, --pipeline_parallel_size/--pp_size,
# --free_gpu_memory_fraction/--kv_cache_free_gpu_memory_fraction); TGI launcher/src/main.rs
# (3.3). SGLang declares each parallel size under two names ("--tensor-parallel-size",
# "--tp-size"; pipeline and data alike, server_args.py) and argparse takes --tp and --dp as
# prefixes of them.

COMMON_SETTINGS: tuple[Setting, ...] = (
    Setting("tp", "tp", ("--tp", "--tensor-parallel-size"), "int", "GPUs",
            "Tensor-parallel GPUs (KV heads split; default: --count).",
            {"vllm": ("--tensor-parallel-size", "-tp"),
             "sglang": ("--tp-size", "--tensor-parallel-size", "--tp"),
             "trtllm": ("--tp_size", "--tensor_parallel_size"), "tgi": ("--num-shard",)},
            low=1, high=MAX_GPUS, section=""),
    Setting("pp", "pp", ("--pp", "--pipeline-parallel-size"), "int", "stages",
            "Pipeline stages (layers split).",
            {"vllm": ("--pipeline-parallel-size", "-pp"),
             "sglang": ("--pp-size", "--pipeline-parallel-size"),
             "trtllm": ("--pp_size", "--pipeline_parallel_size")}, low=1, high=MAX_GPUS,
            default=1, section=""),
    Setting("dp", "dp", ("--dp",), "int", "ranks",
            "Data-parallel ranks, each with its own requests and KV cache (vLLM "
            "--data-parallel-size: TP x PP GPUs each; SGLang --dp).",
            {"vllm": ("--data-parallel-size", "-dp"),
             "sglang": ("--dp-size", "--data-parallel-size", "--dp")},
            low=1, high=MAX_GPUS, default=1, section=""),
    Setting("dcp", "dcp", ("--dcp",), "int", "ranks",
            "vLLM decode context parallel: the TP ranks split each request's tokens (MLA "
            "caches are no longer replicated); must divide --tp.",
            {"vllm": ("--decode-context-parallel-size", "-dcp")}, low=1, high=MAX_GPUS,
            default=1, section=""),
    Setting("max_model_len", "max_model_len", ("--max-model-len", "--ctx-size", "-c"),
            "tokens", "tokens",
            "The engine's maximum length per request (default: the model's maximum context); "
            "llama.cpp's -c/--ctx-size, the context all slots share.",
            {"vllm": ("--max-model-len",), "sglang": ("--context-length",),
             "llamacpp": ("--ctx-size", "-c"), "trtllm": ("--max_seq_len",),
             "tgi": ("--max-total-tokens",)}, low=1, high=MAX_TOKENS, section="",
            budget=("vllm",)),
    # the names are open (each engine's own, kvplan's group-wise formats such as int4:g64),
    # so no fixed choices: the engine's kv_format refuses a name it lacks, by name. llama.cpp's
    # -ctk sets the K cache (-ctv, V, is read beside it: kvplan.planning.launch); TensorRT-LLM
    # takes it as kv_cache_config.dtype in --extra_llm_api_options, --kv_cache_dtype in its
    # quantization scripts (examples/quantization/quantize.py)
    Setting("kv_dtype", "kv_dtype", ("--kv-dtype", "--kv-cache-dtype"), "str", "",
            "auto (the model's dtype), fp32, fp16, bf16, fp8, fp8_e5m2, int8, int4, int2, "
            "nvfp4, fp8_ds_mla, nvfp4_ds_mla (MLA only), or group-wise like int4:g64, "
            "int2:g32:kivi:r128.",
            {"vllm": ("--kv-cache-dtype",), "sglang": ("--kv-cache-dtype",),
             "llamacpp": ("--cache-type-k", "-ctk"), "trtllm": ("--kv_cache_dtype",),
             "tgi": ("--kv-cache-dtype",)}, default="auto", section=""),
)

ENGINE_SETTINGS: tuple[Setting, ...] = (
    Setting("gpu_memory_utilization", "memory_fraction",
            ("--gpu-memory-utilization", "--mem-fraction-static"), "float", "fraction",
            "vLLM gpu_memory_utilization (0.9; 0.92 from 0.20), SGLang mem_fraction_static, "
            "TRT-LLM free_gpu_memory_fraction (0.9).",
            {"vllm": ("--gpu-memory-utilization",), "sglang": ("--mem-fraction-static",),
             "trtllm": ("--kv_cache_free_gpu_memory_fraction", "--free_gpu_memory_fraction"),
             "tgi": ("--cuda-memory-fraction",)}, low=0.01, high=1.0,
            budget=("vllm", "sglang", "trtllm", "tgi")),
    Setting("block_size", "block_size", ("--block-size",), "int", "tokens",
            "Tokens per block (default: the engine's).",
            {"vllm": ("--block-size",), "sglang": ("--page-size",)}, low=1, high=MAX_TOKENS),
    Setting("max_num_batched_tokens", "max_num_batched_tokens", ("--max-num-batched-tokens",),
            "int", "tokens", "Tokens per scheduler step (default: by GPU).",
            {"vllm": ("--max-num-batched-tokens",), "sglang": ("--chunked-prefill-size",),
             "trtllm": ("--max_num_tokens",), "tgi": ("--max-batch-prefill-tokens",)},
            low=1, high=MAX_TOKENS, budget=("vllm", "sglang", "trtllm", "tgi")),
    Setting("max_num_seqs", "max_num_seqs", ("--max-num-seqs",), "int", "requests",
            "Requests running at once, a cap on concurrency: vLLM max_num_seqs (default by GPU "
            "and version), SGLang --max-running-requests, TRT-LLM max_batch_size (2048).",
            {"vllm": ("--max-num-seqs",), "sglang": ("--max-running-requests",),
             "trtllm": ("--max_batch_size",), "tgi": ("--max-batch-size",)},
            low=1, high=MAX_BATCH, budget=("vllm", "sglang", "trtllm")),
    Setting("parallel", "parallel", ("--parallel", "-np"), "int", "requests",
            "llama.cpp slots.", {"llamacpp": ("--parallel", "-np")}, low=1, high=MAX_BATCH,
            default=1),
    Setting("kv_memory", "kv_memory_bytes", ("--kv-memory",), "bytes", "bytes",
            "A measured KV budget per GPU, as the engine logged it: 57.65GiB (vLLM 'Available "
            "KV cache memory').", {"vllm": ("--kv-cache-memory-bytes",)}),
    Setting("activation_memory", "activation_bytes", ("--activation-memory",), "bytes",
            "bytes", "Measured activation peak per GPU."),
    Setting("cudagraph_memory", "cudagraph_bytes", ("--cudagraph-memory",), "bytes", "bytes",
            "CUDA-graph memory vLLM >= 0.20 subtracts."),
    Setting("enforce_eager", "enforce_eager", ("--enforce-eager",), "bool", "",
            "vLLM without CUDA graphs (nothing reserved for them).",
            {"vllm": ("--enforce-eager",), "sglang": ("--disable-cuda-graph",)}, default=False,
            budget=("vllm", "sglang")),
    Setting("expert_parallel", "expert_parallel", ("--enable-expert-parallel",), "bool", "",
            "vLLM: whole experts over the TP x DP GPUs.",
            {"vllm": ("--enable-expert-parallel",)}, default=False),
    Setting("dp_attention", "dp_attention", ("--enable-dp-attention",), "bool", "",
            "SGLang: attention data-parallel inside the TP group (--dp must divide --tp; GPUs "
            "= TP).", {"sglang": ("--enable-dp-attention",)}, default=False),
    Setting("flashinfer_sampler", "flashinfer_sampler", ("--flashinfer-sampler",), "bool", "",
            "vLLM with flashinfer installed (the vllm/vllm-openai image): 0.8-0.11 sample with "
            "FlashInfer, a smaller warm-up peak.", default=False),
    Setting("num_speculative_tokens", "num_speculative_tokens", ("--num-speculative-tokens",),
            "int", "tokens", "vLLM speculative decoding: draft tokens proposed a step "
            "(--speculative-config's num_speculative_tokens); CUDA graphs are captured for 1 + "
            "that many tokens a request.", {"vllm": ("--num-speculative-tokens",)},
            low=0, high=MAX_TOKENS, default=0),
    Setting("num_draft_layers", "num_draft_layers", ("--draft-layers",), "int", "layers",
            "vLLM speculative decoding with an EAGLE or MTP drafter: its decoder layers, each "
            "an attention layer of the target's shape in the same KV pool (v1/worker/"
            "gpu_model_runner.py, the drafter's layers in the KV cache config); the draft "
            "model's config gives them (1 for the EAGLE heads of Llama 3.1).",
            low=0, high=1024, default=0, only=("vllm",)),
    Setting("cpu_offload_gb", "cpu_offload_bytes", ("--cpu-offload-gb",), "gib", "GiB",
            "vLLM: GiB of weights per GPU kept in CPU memory (read over UVA), taken from the "
            "decoder layers' parameters; the weights term of the budget falls by as much.",
            {"vllm": ("--cpu-offload-gb",)}, low=0, high=2**20, default=0, only=("vllm",)),
    Setting("mamba_ssm_cache_dtype", "mamba_ssm_cache_dtype", ("--mamba-ssm-cache-dtype",),
            "str", "", "vLLM: the SSM state's dtype (auto: the model's own, which vLLM's CPU "
            "build resets to float32; vllm/config/cache.py CacheConfig.mamba_ssm_cache_dtype).",
            {"vllm": ("--mamba-ssm-cache-dtype",)}, default="auto",
            choices=("auto", "float32", "bfloat16", "float16"), only=("vllm",)),
    Setting("limit_mm_per_prompt", "mm_limits", ("--limit-mm-per-prompt",), "str", "items",
            "vLLM: items per prompt by modality, as JSON {\"image\": 0, \"video\": 0} or "
            "image=0,video=0 (a modality left out: 999). With every modality of a tower at 0 "
            "the releases that do so build no tower and profile no encoder (docs/engine-kv-"
            "sizing.md §7.9).", {"vllm": ("--limit-mm-per-prompt",)}, only=("vllm",),
            parse=parse_mm_limits),
    Setting("runner", "runner", ("--runner",), "str", "",
            "vLLM's model runner: pooling for an embedding, classification or reward model "
            "(--runner pooling, --convert embed|classify|reward, --task embed|classify|"
            "score|reward), whose profile runs a pooler and no sampler; generate or auto "
            "otherwise.", {"vllm": ("--runner", "--convert", "--task")}, only=("vllm",),
            parse=parse_runner),
    Setting("enable_lora", "enable_lora", ("--enable-lora",), "bool", "",
            "vLLM LoRA serving: every linear layer, the embedding and the LM head get slots "
            "for --max-loras adapters of --max-lora-rank, allocated with the weights.",
            {"vllm": ("--enable-lora",)}, default=False, only=("vllm",), budget=()),
    Setting("max_loras", "max_loras", ("--max-loras",), "int", "adapters",
            "vLLM --enable-lora: adapters in one batch, each a slot in every LoRA layer (1).",
            {"vllm": ("--max-loras",)}, low=1, high=MAX_BATCH, only=("vllm",)),
    Setting("max_lora_rank", "max_lora_rank", ("--max-lora-rank",), "int", "",
            "vLLM --enable-lora: the rank every slot is sized for (16; config/lora.py).",
            {"vllm": ("--max-lora-rank",)}, low=1, high=4096, only=("vllm",)),
    Setting("language_model_only", "language_model_only", ("--language-model-only",), "bool",
            "", "vLLM 0.17+: every modality's limit at 0, as --limit-mm-per-prompt with each "
            "at 0 (config/multimodal.py MultiModalConfig.language_model_only).",
            {"vllm": ("--language-model-only",)}, default=False, only=("vllm",)),
    Setting("async_scheduling", "async_scheduling", ("--async-scheduling",), "bool", "",
            "vLLM 0.26+: two batches in flight, so a sliding-window layer holds the window "
            "plus 2 x --max-num-batched-tokens a request (config/vllm.py "
            "max_in_flight_tokens); on by default on CUDA, off on the CPU build.",
            {"vllm": ("--async-scheduling",)}, only=("vllm",),
            off_flag="--no-async-scheduling"),
    Setting("n_ubatch", "n_ubatch", ("--ubatch-size", "-ub"), "int", "tokens",
            "llama.cpp's micro-batch (512): its compute buffers grow with it.",
            {"llamacpp": ("--ubatch-size", "-ub")}, low=1, high=MAX_TOKENS),
    Setting("flash_attn", "flash_attn", ("--flash-attn", "-fa"), "str", "",
            "llama.cpp on|off|auto (auto: on): without it the compute buffer holds KQ, context "
            "x micro-batch x heads x 4 B."),
    Setting("n_gpu_layers", "n_gpu_layers", ("--n-gpu-layers", "-ngl"), "str", "layers",
            "llama.cpp: layers on the GPU (N, all or auto; default all). The output layer and "
            "the last N-1 repeating layers go to the GPU with their KV cache; the rest and the "
            "token embeddings stay in host memory."),
    Setting("no_kv_offload", "no_kv_offload", ("--no-kv-offload", "-nkvo"), "bool", "",
            "llama.cpp: keep the whole KV cache in host memory.",
            {"llamacpp": ("--no-kv-offload", "-nkvo")}, default=False),
    Setting("tensor_overrides", "tensor_overrides", ("--override-tensor", "-ot"), "str", "",
            "llama.cpp: PATTERN=BUFFER_TYPE[,...] (exps=CPU): weights whose GGUF names match a "
            "pattern with a CPU buffer type stay in host memory (the first match decides).",
            {"llamacpp": ("--override-tensor", "-ot")}, only=("llamacpp",), repeats=True),
    Setting("cpu_moe", "cpu_moe", ("--cpu-moe", "-cmoe"), "bool", "",
            "llama.cpp: keep every routed expert in host memory (-ot exps=CPU).",
            {"llamacpp": ("--cpu-moe", "-cmoe")}, default=False, only=("llamacpp",)),
    Setting("n_cpu_moe", "n_cpu_moe", ("--n-cpu-moe", "-ncmoe"), "int", "layers",
            "llama.cpp: keep the routed experts of the first N layers in host memory.",
            {"llamacpp": ("--n-cpu-moe", "-ncmoe")}, low=0, high=MAX_GPUS,
            only=("llamacpp",)),
    Setting("mla_attn", "mla_attn", ("--mla-use", "-mla"), "int", "",
            "ik_llama.cpp's MLA cache (DeepSeek): 2 or 3 keep the latent alone, as llama.cpp "
            "does; 1 without flash attention adds a transposed latent (kv^T); 0, the "
            "uncompressed cache, is not modelled.",
            {"llamacpp": ("--mla-use", "-mla")}, low=0, high=3, only=("llamacpp",)),
    Setting("kv_unified", "kv_unified", ("--kv-unified", "-kvu"), "bool", "",
            "llama.cpp: one KV cache of --ctx-size cells shared by the -np slots (default: a "
            "cache of ctx/np cells per slot); the compute buffer then spans every cell.",
            {"llamacpp": ("--kv-unified", "-kvu")}),
    Setting("max_batch_total_tokens", "max_batch_total_tokens", ("--max-batch-total-tokens",),
            "int", "tokens",
            "TGI: ignored on flash-attention models, which size the batch from the warm-up (the "
            "router warns it is deprecated); the launcher refuses a --max-total-tokens above "
            "it (and, before 2.4, a --max-batch-prefill-tokens).",
            {"tgi": ("--max-batch-total-tokens",)}, low=1, high=2**32 - 1, only=("tgi",)),
)

SETTINGS: tuple[Setting, ...] = COMMON_SETTINGS + ENGINE_SETTINGS
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
BY_FIELD: dict[str, Setting] = {s.field_name: s for s in SETTINGS}

# how --from-command reads a row's value after its engine flag (kvplan.core.launch kinds)
_LAUNCH_KINDS = {"int": "int", "float": "float", "gib": "float", "bool": "flag",
                 "bytes": "int", "tokens": "tokens", "str": "str"}


def launch_flags(engine: str) -> dict[str, tuple[str, str]]:
    """The rows' flags for one engine's launch table: flag -> (setting name, value kind)."""
    flags = {flag: (s.name, "append" if s.repeats else _LAUNCH_KINDS[s.kind])
             for s in SETTINGS for flag in s.engine_flags.get(engine, ())}
    flags.update({s.off_flag: (s.name, "no-flag") for s in SETTINGS
                  if s.off_flag and engine in s.engine_flags})
    return flags


def check_bounds(dep: Any) -> None:
    """Every row's bounds on a Deployment, the same whether a flag, a plan file or a launch
    line set it (a bytes value parsed from GiB is checked as the GiB it came from), and a
    setting kvplan models for some engines only, given to another."""
    for s in SETTINGS:
        value = getattr(dep, s.field_name, None)
        if s.only and dep.engine not in s.only and value not in (None, False, 0, s.default):
            raise BadInputError(f"{s.flag}: kvplan models it for "
                                f"{', '.join(s.only)} only, not for {dep.engine}",
                                f"leave {s.flag} out, or plan with --engine {s.only[0]}")
        if value is None or s.kind in ("bool", "str", "bytes"):
            continue
        shown = value / GIB if s.kind == "gib" else value
        _bounded(shown, s, f"{s.name} ({s.flag}) ")


__all__ = ["BY_FIELD", "BY_NAME", "COMMON_SETTINGS", "ENGINE_SETTINGS", "KINDS",
           "MM_MODALITIES", "RUNNER_VALUES", "SETTINGS", "Setting", "check_bounds",
           "launch_flags", "mm_limits", "parse_mm_limits", "parse_runner"]
