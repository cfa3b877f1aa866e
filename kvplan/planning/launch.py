"""A launch command -> the deployment it starts: the engine, the model, and every setting that
changes memory, with the engine's own defaults for the rest (kvplan.sources.launch reads the
text; each engine's `launch()` supplies its programs and flag table)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import fields
from typing import Any, overload

from kvplan.core.errors import BadInputError
from kvplan.core.patterns import lazy
from kvplan.core.record import record
from kvplan.sources.launch import EngineLaunch, Launch, parse_launch

# --quantization / --quantize values -> kvplan's --weights-dtype (load-time or checkpoint)
_QUANTIZATION = {
    "fp8": "fp8", "fbgemm_fp8": "fp8", "awq": "awq", "awq_marlin": "awq", "gptq": "gptq",
    "gptq_marlin": "gptq", "marlin": "gptq", "bitsandbytes": "bnb-4bit",
    "bitsandbytes-nf4": "bnb-4bit", "bitsandbytes-fp4": "bnb-4bit", "eetq": "int8",
    "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4",
    "nvfp4": "nvfp4", "compressed-tensors": "auto", "modelopt": "auto",
}


@record
class LaunchPlan:
    launch: Launch
    model: str  # what resolves the model: a library name, hf:org/name, a path
    engine: str
    overrides: dict[str, Any]  # Deployment field -> value read from the command (bytes as ints)
    warnings: tuple[str, ...]


# checkpoint-name suffixes that say how the weights are stored (Qwen3-235B-A22B-FP8,
# gemma-4-26B-A4B-it-qat-AWQ-INT4: AWQ's 4-bit weights named with their width)
_NAME_QUANT = (("-fp8-dynamic", "fp8"), ("-fp8", "fp8"), ("-awq-int4", "awq"), ("-awq", "awq"),
               ("-gptq-int4", "gptq"), ("-gptq-int8", "gptq"), ("-gptq", "gptq"),
               ("-mxfp4", "mxfp4"), ("-nvfp4", "nvfp4"), ("-fp4", "nvfp4"))


def model_name(model: str, warnings: list[str]) -> tuple[str, str | None]:
    """The model an engine was started with, as kvplan can resolve it: a path on the serving
    machine (/models/Qwen3-8B) that is not here is read by its last part, and a quantized
    checkpoint's name that kvplan does not hold as its base model with the weight format its
    suffix names. Returns (model, weights dtype or None); notes go to `warnings`."""
    if model.startswith("$"):
        raise BadInputError(f"the launch command names its model by the shell variable "
                            f"{model}, which kvplan does not expand",
                            "give the model as MODEL beside --from-command (a library name, "
                            "a config.json or directory, hf:org/name)")
    local = model.startswith(("/", "./", "../", "~")) or model.lower().endswith(".gguf")
    if local and not os.path.exists(os.path.expanduser(model)):
        name = _directory_name(model)
        note = ""
        if name.lower().endswith(".gguf"):
            # llama.cpp's file on the serving machine: its name less the weight type it
            # carries (Qwen3-8B-Q4_K_M.gguf -> Qwen3-8B)
            stem = name[: -len(".gguf")]
            name = _GGUF_TYPE.sub("", stem)
            if name != stem:
                note = (f", its weights in the model's own dtype, not {stem[len(name) + 1:]} "
                        "(give the .gguf file as MODEL, or --weights-memory, for its size)")
        warnings.append(f"{model} is not a path here; read as the model {name!r}{note}")
        model = name
    return _resolvable(model, warnings)


def _directory_name(path: str) -> str:
    """The model a checkpoint path on the serving machine names: its last part, or the repo
    of a Hugging Face cache directory (.../models--Qwen--Qwen3-8B/snapshots/<hash> ->
    Qwen/Qwen3-8B), with ModelScope's `___` for a dot (Qwen2___5-7B -> Qwen2.5-7B)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    for part in parts:
        cached = re.fullmatch(r"models--([^/]+?)--(.+)", part)
        if cached:
            return f"{cached.group(1)}/{cached.group(2)}".replace("___", ".")
    return (parts[-1] if parts else path).replace("___", ".")


# the weight type a GGUF file's name ends in: -Q4_K_M, .Q8_0, -IQ4_XS, -UD-Q4_K_XL, -f16, -bf16
_GGUF_TYPE = lazy(r"[-._](?:UD-)?(?:I?Q\d[\w]*|[BF]F?16|F32)$", re.IGNORECASE)


def name_quant(model: str) -> str | None:
    """The weight format a checkpoint's name ends in (Qwen3-Coder-30B-A3B-Instruct-FP8 -> fp8)."""
    lowered = model.rstrip("/").lower()
    return next((quant for suffix, quant in _NAME_QUANT if lowered.endswith(suffix)), None)


def quantization_weights(quant: str, warnings: list[str]) -> str | None:
    """An engine's quantization (--quantization, --quantize, or as its log prints it) as
    kvplan's weights dtype; None where it names no format of its own (compressed-tensors,
    modelopt: the checkpoint's config says; None) or one kvplan does not read (said)."""
    if quant in ("None", "none", ""):
        return None
    mapped = _QUANTIZATION.get(quant.lower())
    if mapped is None:
        warnings.append(f"quantization {quant!r} is not one kvplan reads: the checkpoint's "
                        "own format is assumed")
    return None if mapped in (None, "auto") else mapped


def _resolvable(model: str, warnings: list[str]) -> tuple[str, str | None]:
    """The model as kvplan resolves it: the name itself, its base less a weight-format
    suffix, or either as the one library alias it is the name part of (a directory named
    as the Hub repo without its organisation)."""
    lowered = model.lower()
    quant = next(((model[: -len(sfx)], q) for sfx, q in _NAME_QUANT
                  if lowered.endswith(sfx)), None)
    for name, weights in ((model, None), *([quant] if quant else [])):
        found = _library_name(name)
        if found is None:
            continue
        if weights is not None:
            warnings.append(f"{model!r} is read as {found!r} with {weights} weights (its "
                            "name's suffix); kvplan holds no spec of that checkpoint")
        elif found != name and "/" in name:
            warnings.append(f"the Hub cannot be reached to read {name!r}: read as {found} (a "
                            "library model listing a repo of the same name under another "
                            "owner); MODEL or --model says otherwise")
        elif found != name:
            warnings.append(f"{model!r} is read as the library's {found!r}")
        return found, weights
    return model, None  # resolving it again will give the library's own error


def _library_name(name: str) -> str | None:
    """`name` where kvplan resolves it, else the one library model listing a repo of that
    name: for a bare name (a checkpoint directory) under any owner; for a Hub repo the Hub
    cannot be asked about, under another owner (a re-upload: unsloth/Llama-3.2-3B-Instruct).
    None with none or several."""
    from kvplan.core.errors import KvplanError, UnavailableError
    from kvplan.sources.library import find_same_name, resolve

    try:
        resolve(name)
        return name
    except KvplanError as exc:
        if "/" in name and not isinstance(exc, UnavailableError):
            return None  # the Hub answered: its error stands
        found = find_same_name(name)
        return found[0].name if len(found) == 1 else None


def _speculative(config: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """vLLM's --speculative-config object -> the Deployment fields kvplan models: the draft
    tokens a step (the CUDA-graph sizes grow with them); the drafter itself (`method`,
    `model`) is named in a warning, its weights and KV layers not read from the command."""
    k = config.get("num_speculative_tokens")
    if k is None:  # vLLM then takes the draft model's n_predict (MTP), which kvplan does not read
        warnings.append("--speculative-config gives no num_speculative_tokens: kvplan plans "
                        "without draft tokens (add it to the object to count them)")
        return {}
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise BadInputError(f"--speculative-config in the launch command: num_speculative_tokens "
                            f"must be a whole number >= 0, got {k!r}",
                            "write it as {\"num_speculative_tokens\": 3, ...}")
    drafter = config.get("method") or config.get("model")
    if drafter:
        warnings.append(f"speculative decoding with {drafter!r}: kvplan reads its "
                        f"{k} draft tokens a step, not the drafter's weights or KV layers")
    return {"num_speculative_tokens": k}


def _connector_note(config: Any) -> str:
    """vLLM's --kv-transfer-config, named: a KV connector (LMCache, NIXL, CPU offloading)
    moves KV blocks to or from other memory and can hold GPU memory of its own, which kvplan
    does not model; its figures are those of vLLM without the connector."""
    fields_ = config if isinstance(config, dict) else {}
    name = fields_.get("kv_connector") or "KV"
    role = f" ({fields_['kv_role']})" if fields_.get("kv_role") else ""
    return (f"--kv-transfer-config: vLLM runs the {name} connector{role}; kvplan does not "
            "model it (what it holds on the GPU, or the blocks it keeps elsewhere), so its "
            "figures are vLLM's without a connector")


def layer_partition(partition: str, pp: Any) -> tuple[int, ...]:
    """vLLM's VLLM_PP_LAYER_PARTITION (envs.py; get_pp_indices in distributed/utils.py reads
    it): the layer count of each pipeline stage, one per stage."""
    try:
        layers = tuple(int(p) for p in partition.split(","))
    except ValueError:
        raise BadInputError(f"VLLM_PP_LAYER_PARTITION {partition!r} in the launch command is "
                            "not a list of layer counts", "write it like 16,32") from None
    stages = pp if pp is not None else 1
    if len(layers) != stages:
        raise BadInputError(f"VLLM_PP_LAYER_PARTITION {partition!r} names {len(layers)} "
                            f"stages but --pipeline-parallel-size is {stages}",
                            "give one layer count per stage")
    return layers


def unknown_flag(flag: str, engine: str) -> str:
    """What kvplan says of a flag it does not know for `engine` (in a launch line, or echoed
    by the engine's log)."""
    return f"{flag}: not a flag kvplan knows for {engine}; it might change memory"


def engine_launches() -> Sequence[EngineLaunch]:
    """Every registered engine's launch table (engines without one are skipped), in the
    registry's order, each loaded when a reader first gets to it (EngineLaunches)."""
    from kvplan.engines import registry

    return EngineLaunches(registry.names())


class EngineLaunches(Sequence[EngineLaunch]):
    """The engines' launch tables as a sequence that loads each table (the engine's tables
    module, its settings' flags joined) the first time iteration or indexing reaches it. A
    reader that stops at the first engine whose program a command names (vLLM's, first in
    the registry, for `vllm serve ...`) loads no other engine's tables; its length, a
    search that finds nothing, or an index past the loaded ones loads the rest."""

    def __init__(self, names: Sequence[str]) -> None:
        self._names = list(names)
        self._next = 0  # the next name to load
        self._loaded: list[EngineLaunch] = []

    def _load_one(self) -> bool:
        """Load the next engine's table; False when every name has been tried."""
        from dataclasses import replace

        from kvplan.engines import registry
        from kvplan.engines.settings import launch_flags

        while self._next < len(self._names):
            name = self._names[self._next]
            self._next += 1
            table = registry.launch_table(name)  # the built-ins' without their code
            if table is not None:
                # the declared settings' flags (kvplan.engines.settings) join the table
                self._loaded.append(replace(table, flags={**table.flags,
                                                          **launch_flags(name)}))
                return True
        return False

    def __iter__(self) -> Iterator[EngineLaunch]:
        i = 0
        while i < len(self._loaded) or self._load_one():
            yield self._loaded[i]
            i += 1

    def __len__(self) -> int:
        while self._load_one():
            pass
        return len(self._loaded)

    @overload
    def __getitem__(self, index: int) -> EngineLaunch: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[EngineLaunch]: ...

    def __getitem__(self, index: int | slice) -> EngineLaunch | Sequence[EngineLaunch]:
        if isinstance(index, slice) or index < 0:
            len(self)
        else:
            while index >= len(self._loaded) and self._load_one():
                pass
        return self._loaded[index]


def from_command(text: str, model: str | None = None) -> LaunchPlan:
    """The deployment a launch command starts. `model`, when given, is what kvplan reads the
    model from (a library name, a config.json or directory, hf:org/name) instead of the
    command's own, as deployed lines name a directory on the serving machine
    (`vllm serve ./Qwen/Qwen3-8B`) whose config is elsewhere here; a checkpoint name's
    weight-format suffix (-FP8, -AWQ) still sets the weights."""
    from kvplan.engines.base import Deployment
    from kvplan.engines.registry import launch_table

    launch = parse_launch(text, engine_launches())
    table = launch_table(launch.engine)
    s = dict(launch.settings)
    warnings: list[str] = list(launch.defaults)
    named = s.pop("model", None) or s.pop("hf_repo", None)
    if model is not None:
        quant_from_name = name_quant(str(named)) if named else None
    elif not named:
        if table is not None and table.positional is None and \
                all(setting != "model" for setting, _ in table.flags.values()):
            # a server that loads models per request (ollama serve): no line names one
            raise BadInputError(f"{launch.program} names no model: it loads one per request",
                                "give the model as MODEL beside --from-command (a library "
                                "name, a config.json or directory, hf:org/name)")
        raise BadInputError(f"the {launch.program} command names no model",
                            "include the model (vllm serve MODEL, --model-path, -m, --model-id)"
                            ", or give MODEL beside --from-command")
    else:
        model, quant_from_name = model_name(str(named), warnings)
    from kvplan.engines.registry import get as get_engine
    from kvplan.engines.settings import BY_NAME

    # the engine's own reading of what its program's line states (Ollama's runner: the
    # context over its slots, and the runner's flag defaults)
    reading = getattr(get_engine(launch.engine), "launch_settings", None)
    if callable(reading):
        reading(launch.program, s, warnings)
    known = {f.name for f in fields(Deployment)}
    overrides: dict[str, Any] = {}
    # the settings the command's environment gave (Ollama's OLLAMA_*), named so in errors
    from_env = {setting: var for var, (setting, _) in (table.env if table else {}).items()
                if var in launch.env}
    # declared settings (kvplan.engines.settings), read and bounded by their rows
    for name in sorted(k for k in s if k in BY_NAME):
        row = BY_NAME[name]
        spelled = from_env.get(name) or row.engine_flags.get(launch.engine, (row.flag,))[0]
        overrides[row.field_name] = row.to_field(s.pop(name), f"{spelled} in the command")
    # other settings named as Deployment fields (the flag tables name them so) as they are
    overrides.update({k: s.pop(k) for k in sorted(s) if k in known})
    quant = s.pop("quantization", None) or quant_from_name
    if quant is not None:
        mapped = quantization_weights(str(quant), warnings)
        if mapped is not None:
            overrides["weights_dtype"] = mapped
    speculative = s.pop("speculative_config", None)
    if speculative is not None:
        overrides.update(_speculative(speculative, warnings))
    kvcached = s.pop("kvcached", None)
    if kvcached is not None and str(kvcached).lower() in ("1", "true", "yes", "on"):
        warnings.append(f"ENABLE_KVCACHED={kvcached}: kvcached (ovg-project/kvcached) puts the "
                        f"engine's KV pool in virtual memory it maps on demand; kvplan does not "
                        f"model it, so its figures are {launch.engine}'s own pool")
    connector = s.pop("kv_transfer_config", None)
    if connector is not None:
        warnings.append(_connector_note(connector))
    dtype = s.pop("model_dtype", None)
    if dtype not in (None, "auto"):
        warnings.append(f"--dtype {dtype}: kvplan sizes the checkpoint's own dtype")
    value_v = s.pop("kv_dtype_v", None)
    if value_v is not None and value_v != overrides.get("kv_dtype", value_v):
        overrides["kv_dtype_v"] = value_v  # llama.cpp -ctv: V in its own type
    elif value_v is not None and "kv_dtype" not in overrides:
        overrides["kv_dtype"] = value_v
    partition = s.pop("pp_layer_partition", None)
    if partition is not None:
        overrides["pp_layers"] = layer_partition(str(partition), overrides.get("pp"))
    for key, value in sorted(s.items()):
        if value not in (False, None):
            warnings.append(f"read {key}={value!r} from the command; kvplan does not model it "
                            "yet (the engine default is assumed)")
    if launch.image_version and "engine_version" in known:
        overrides["engine_version"] = launch.image_version
    # what the engine reads from its image and environment (vLLM: the sampler flashinfer
    # gives its image); an engine without the hook reads nothing
    hook = getattr(get_engine(launch.engine), "launch_overrides", None)
    if callable(hook):
        overrides.update({k: v for k, v in hook(launch.image, launch.image_version,
                                                launch.env).items() if k in known})
    for flag in launch.unknown_flags:
        if flag.startswith("-"):
            warnings.append(unknown_flag(flag, launch.engine))
        else:  # a word where no flag takes it: a stray value, or a flag glued to another
            warnings.append(f"{flag!r}: an argument no flag of {launch.engine} takes; kvplan "
                            "ignores it (check the line near it)")
    for option in launch.unknown_options:
        warnings.append(f"{option}: not an option kvplan knows for {launch.engine}; it might "
                        "change memory")
    return LaunchPlan(launch, model, launch.engine, overrides, tuple(warnings))
