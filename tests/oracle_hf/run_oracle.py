"""Differential test: kvplan's transformers engine against transformers' own cache objects.

Runs in its own environment (tests/oracle_hf/setup.sh: torch 2.13.0 CPU, transformers 5.24.0,
optimum-quanto and hqq; never in the default pytest run).

For real config.json files (tests/fixtures/hf-configs) shrunk in width only -- hidden size,
feed-forward, vocabulary and experts made small, with every key/value head, head_dim, latent
rank, linear-attention state and the layer-kind pattern kept; windows shrunk so the lengths
below cross them; the deepest models cut to fewer layers of the same pattern -- a model with
random bf16 weights (`AutoModelForCausalLM.from_config`) runs, batch 2:

- a prefill of N tokens, or a prefill of N - D tokens and D one-token decodes;
- into a `DynamicCache(config=...)`, a `StaticCache(config=..., max_cache_len=M)`, or a
  `QuantizedCache(backend=quanto|hqq, nbits=4|2, q_group_size=G, residual_length=R)`.

transformers' side: the bytes of the tensors the cache layers hold (sum of element_size x
numel over every tensor attribute of every layer, quanto's packed data / scale / shift and
HQQ's meta tensors included; 0-dim bookkeeping left out). kvplan's side, on a spec read from
the same shrunk config.json: `kvplan validate --layout hf-<cache>`'s prediction
(kvplan.validate.predict) and the engine's own figure (kvplan.engines.hf.profile /
`quantized_bytes`). Both must equal the measured bytes.

Prints "N of N equal" (tests/oracle_harness.py); exits 1 on any difference not listed in
KNOWN_DIFFERENCES (each explained in docs/engine-accuracy.md).

Usage: .oracle-hf-venv/bin/python tests/oracle_hf/run_oracle.py [--quick] [--model NAME] [-v]
       [--jobs N] (N worker processes; default the cores, at most 2)
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared harness
import oracle_harness as harness  # noqa: E402

harness.setup(TOKENIZERS_PARALLELISM="false")
BATCH = 2

# Differences that are understood and documented in docs/engine-accuracy.md: case id prefix
# -> reason.
KNOWN_DIFFERENCES: dict[str, str] = {}


@dataclass(frozen=True)
class Arch:
    """One real config and how it is shrunk: `window` replaces the sliding window (or
    attention chunk), `layers` cuts the depth (keeping the pattern), `lengths` are the token
    counts tried."""

    name: str
    fixture: str
    window: int | None = None
    layers: int | None = None
    lengths: tuple[int, ...] = (5, 31, 32, 33, 70)
    static: bool = True
    quantized: bool = False
    # QuantizedCache settings and runs for this model (None: QUANTIZED, QUANTIZED_RUNS)
    quant_settings: tuple[tuple[str, int, int, int], ...] | None = None
    quant_runs: tuple[tuple[int, int], ...] | None = None


ARCHS = (
    Arch("llama-3.1-8b", "meta-llama--Llama-3.1-8B-Instruct.json", layers=8, quantized=True),
    Arch("mistral-7b-v0.1", "mistralai--Mistral-7B-v0.1.json", window=32, layers=8,
         quantized=True),
    Arch("gemma-2-9b", "google--gemma-2-9b.json", window=32, layers=8),
    Arch("gemma-3-1b", "google--gemma-3-1b-it.json", window=32, layers=12),
    Arch("gpt-oss-20b", "openai--gpt-oss-20b.json", window=32, layers=6),
    Arch("deepseek-v3", "deepseek-ai--DeepSeek-V3.json", layers=5, quantized=True),
    # head_dim 64 under groups of 128: quanto's groups span two tokens' rows
    Arch("llama-3.2-1b", "meta-llama--Llama-3.2-1B.json", layers=4, lengths=(5, 33),
         quantized=True, quant_settings=(("quanto", 4, 128, 16), ("quanto", 2, 128, 16)),
         quant_runs=((41, 0), (60, 25))),
    Arch("qwen3-next-80b-a3b", "../../oracle/configs/Qwen--Qwen3-Next-80B-A3B-Instruct/"
         "config.json", layers=8,
         lengths=(9, 40), static=False),
)

HEAVIEST = ("deepseek-v3", "llama-3.1-8b")  # the most QuantizedCache decode steps
# QuantizedCache settings tried: (backend, nbits, q_group_size, residual_length)
QUANTIZED = (("quanto", 4, 64, 128), ("quanto", 2, 64, 8), ("hqq", 4, 64, 8),
             ("quanto", 4, 32, 16))
# (tokens, of which decoded one at a time after the prefill); 41 tokens of MLA's RoPE key
# (64 wide) in a batch of 2 are 82 groups of 64, which quanto's int2 packing (4 groups a
# byte row) rounds up to 84
QUANTIZED_RUNS = ((40, 0), (41, 0), (100, 0), (100, 10), (150, 20), (60, 25))


def shrink(raw: dict, arch: Arch) -> dict:
    """The config with small width (hidden 64, FFN 64, vocabulary 512, 4 experts) and the
    cache-shaping fields kept: heads, head_dim, latent ranks, linear-attention heads and
    kernel, layer kinds. Quantization configs are dropped (random bf16 weights)."""
    cfg = copy.deepcopy(raw)
    text = cfg.get("text_config")
    if isinstance(text, dict) and cfg.get("model_type") in ("gemma3",):
        cfg = {**text, "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text"}
    heads = cfg["num_attention_heads"]
    if cfg.get("head_dim") is None and not cfg.get("kv_lora_rank"):  # MLA: no head_dim
        cfg["head_dim"] = cfg["hidden_size"] // heads
    cfg["hidden_size"] = 64
    for key in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size"):
        if key in cfg:
            cfg[key] = 64
    cfg["vocab_size"] = 512
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        cfg[key] = None if key == "pad_token_id" else 1
    for key in ("num_local_experts", "n_routed_experts", "num_experts"):
        if key in cfg:
            cfg[key] = 4
    if "num_experts_per_tok" in cfg:
        cfg["num_experts_per_tok"] = 2
    for key in ("n_group", "topk_group"):
        if key in cfg:
            cfg[key] = 1
    if "q_lora_rank" in cfg and cfg["q_lora_rank"]:
        cfg["q_lora_rank"] = 64
    for key in ("quantization_config", "compression_config", "rope_scaling_factor"):
        cfg.pop(key, None)
    if arch.window is not None:
        for key in ("sliding_window", "sliding_window_size"):
            if key in cfg or key == "sliding_window":
                cfg[key] = arch.window
    if arch.layers is not None:
        cfg["num_hidden_layers"] = arch.layers
        if isinstance(cfg.get("layer_types"), list):
            cfg["layer_types"] = cfg["layer_types"][:arch.layers]
        if "num_nextn_predict_layers" in cfg:
            cfg["num_nextn_predict_layers"] = 0
    cfg["torch_dtype"] = "bfloat16"
    cfg["dtype"] = "bfloat16"
    cfg["use_cache"] = True
    return cfg


def tensor_bytes(obj: object, seen: set[int]) -> int:
    """Bytes of every tensor reachable from `obj` (a tensor, a tensor subclass's inner
    tensors, a list/tuple/dict of them); 0-dim tensors are bookkeeping and left out."""
    import torch

    if isinstance(obj, torch.Tensor):
        if type(obj) is not torch.Tensor and hasattr(obj, "__tensor_flatten__"):
            names, _ = obj.__tensor_flatten__()
            return sum(tensor_bytes(getattr(obj, n), seen) for n in names)
        if obj.dim() == 0 or id(obj) in seen:
            return 0
        seen.add(id(obj))
        return obj.element_size() * obj.numel()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(x, seen) for x in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(x, seen) for x in obj.values())
    return 0


def cache_bytes(cache) -> int:
    seen: set[int] = set()
    total = 0
    for layer in cache.layers:
        for value in vars(layer).values():
            total += tensor_bytes(value, seen)
    return total


@dataclass
class Case:
    arch: str
    cache: str  # dynamic | static | quanto/hqq spec
    tokens: int
    decodes: int
    max_len: int | None = None
    quant: tuple[str, int, int, int] | None = None

    @property
    def id(self) -> str:
        q = "" if self.quant is None else "-{}-int{}-g{}-r{}".format(*self.quant)
        m = "" if self.max_len is None else f"-max{self.max_len}"
        return f"{self.arch}/{self.cache}{q}{m}/N={self.tokens}/decodes={self.decodes}"


def cases(arch: Arch, quick: bool) -> list[Case]:
    lengths = arch.lengths[:2] if quick else arch.lengths
    out = []
    for n in lengths:
        for d in (0, 3) if n > 3 else (0,):
            out.append(Case(arch.name, "dynamic", n, d))
            if arch.static:
                out.append(Case(arch.name, "static", n, d, max_len=max(n, 48)))
    if arch.quantized and not quick:
        # a model with sliding layers: transformers refuses QuantizedCache (one case says so)
        settings = QUANTIZED[:1] if arch.window else arch.quant_settings or QUANTIZED
        runs = ((40, 0),) if arch.window else arch.quant_runs or QUANTIZED_RUNS
        for q in settings:
            for n, d in runs:
                out.append(Case(arch.name, "quantized", n, d, quant=q))
    return out


def run_real(model, cfg, case: Case) -> int:
    import torch
    from transformers import DynamicCache, QuantizedCache, StaticCache

    if case.cache == "dynamic":
        cache = DynamicCache(config=cfg)
    elif case.cache == "static":
        cache = StaticCache(config=cfg, max_cache_len=case.max_len)
    else:
        assert case.quant is not None
        backend, nbits, group, residual = case.quant
        cache = QuantizedCache(backend=backend, config=cfg, nbits=nbits, q_group_size=group,
                               residual_length=residual)
    gen = torch.Generator().manual_seed(case.tokens)
    ids = torch.randint(2, cfg.vocab_size, (BATCH, case.tokens), generator=gen)
    prefill = case.tokens - case.decodes
    with torch.no_grad():
        model(input_ids=ids[:, :prefill], past_key_values=cache, use_cache=True)
        for i in range(prefill, case.tokens):
            model(input_ids=ids[:, i:i + 1], past_key_values=cache, use_cache=True)
    return cache_bytes(cache)


def kvplan_figures(spec, case: Case) -> dict[str, int]:
    """kvplan's bytes for the case: validate's prediction and the engine's figure."""
    from kvplan.api import kv_format
    from kvplan.engines import hf
    from kvplan.validate.predict import predict
    from kvplan.validate.results import ValidateRequest

    if case.quant is None:
        fmt = hf.kv_format(spec)
        request = ValidateRequest(spec, fmt, case.tokens, BATCH, layout=f"hf-{case.cache}",
                                  max_len=case.max_len)
        prof = hf.profile(spec, cache=case.cache, seq_len=case.max_len or case.tokens,
                          batch=BATCH)
        return {"validate": sum(predict(request).values()), "engine": prof.cache_bytes}
    _, nbits, group, residual = case.quant
    fmt = kv_format(f"int{nbits}:g{group}:r{residual}", spec.dtype)
    prof = hf.profile(spec, cache="dynamic", seq_len=case.tokens, batch=BATCH,
                      kv_dtype=fmt.name, decoded=case.decodes)
    if case.decodes:  # validate's --tokens arrive as one prefill: the engine figure only
        return {"engine": prof.cache_bytes}
    request = ValidateRequest(spec, fmt, case.tokens, BATCH, layout="hf-dynamic")
    return {"validate": sum(predict(request).values()), "engine": prof.cache_bytes}


Result = tuple[dict, list[str], str | None, str]  # Tally.add's arguments


def run_arch(name: str, quick: bool, threads: int, part: int | None = None
             ) -> tuple[list[Result], float]:
    """The cases of one architecture (`part`: only those of `parts(...)[part]`): the model
    built once, each case run into a fresh cache, compared with kvplan's figures. Runs in a
    worker process of its own (`--jobs`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from kvplan.api import model as kv_model
    from kvplan.core.errors import BadInputError

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    arch = next(a for a in ARCHS if a.name == name)
    raw = json.loads((harness.FIXTURES / arch.fixture).read_text())
    shrunk = shrink(raw, arch)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(shrunk))
        spec = kv_model(str(Path(tmp) / "config.json")).spec
        cfg = AutoConfig.from_pretrained(tmp)
    cfg._attn_implementation = "eager"
    net = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    t0 = time.monotonic()
    out: list[Result] = []
    todo = cases(arch, quick) if part is None else parts(arch, quick)[part]
    for case in todo:
        try:
            real: int | str = run_real(net, cfg, case)
        except ValueError as exc:  # transformers refuses the setting
            real = f"refused ({str(exc).splitlines()[0][:80]})"
        try:
            ours: dict[str, int | str] = dict(kvplan_figures(spec, case))
        except BadInputError as exc:
            ours = {"kvplan": f"refused ({exc.message[:80]})"}
        both_refuse = isinstance(real, str) and all(isinstance(v, str) for v in ours.values())
        out.append(({"case": case.id, "transformers": real, **ours},
                    [] if both_refuse else
                    [f"kvplan {k} {_figure(v)}" for k, v in ours.items() if v != real],
                    next((r for p, r in KNOWN_DIFFERENCES.items() if case.id.startswith(p)),
                         None),
                    f"{case.id}: transformers {_figure(real)}"))
    return out, time.monotonic() - t0


def parts(arch: Arch, quick: bool) -> list[list[Case]]:
    """An architecture's cases in units of work for the workers: one per QuantizedCache
    setting (its decodes are most of the time), one for the other caches."""
    units: dict[object, list[Case]] = {}
    for case in cases(arch, quick):
        units.setdefault(case.quant, []).append(case)
    return list(units.values())


def main() -> int:
    parser = harness.parser(__doc__, "two lengths, no QuantizedCache")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)),
                        help="worker processes, each running a model's cases of one cache "
                             "setting at a time (default: the cores, at most 2)")
    args = parser.parse_args()
    start = time.monotonic()
    tally = harness.Tally(args.verbose)
    archs = [a for a in ARCHS if not args.model or a.name in args.model]
    if not archs:
        parser.error(f"no architecture {args.model}; known: {', '.join(a.name for a in ARCHS)}")
    # units of work (`parts`): the QuantizedCache ones first, the heaviest models' first,
    # so that the workers finish about together
    units = [(a, i) for a in archs for i in range(len(parts(a, args.quick)))]
    units.sort(key=lambda u: (u[1] == 0, u[0].name not in HEAVIEST))
    jobs = max(1, min(args.jobs, len(units)))
    threads = max(1, min(2, os.cpu_count() or 1) // jobs)
    left = {a.name: len(parts(a, args.quick)) for a in archs}
    spent = {a.name: (0, 0.0) for a in archs}

    def report(arch: Arch, results: list[Result], seconds: float, whole: bool = False) -> None:
        for result in results:
            tally.add(*result)
        count, took = spent[arch.name]
        spent[arch.name] = count + len(results), took + seconds
        left[arch.name] = 0 if whole else left[arch.name] - 1
        if not left[arch.name]:
            count, took = spent[arch.name]
            print(f"  {arch.name}: {count} cases in {took:.1f} s", flush=True)

    if jobs == 1:
        for arch in archs:
            report(arch, *run_arch(arch.name, args.quick, threads), whole=True)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # spawn: a fresh interpreter per worker (forking after torch started its threads can
        # hang)
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(run_arch, a.name, args.quick, threads, i): a
                       for a, i in units}
            for future in as_completed(futures):
                report(futures[future], *future.result())
    return tally.finish("transformers 5.24.0 oracle",
                        f"{len(archs)} models, batch {BATCH}, real cache objects, {jobs} "
                        f"processes", time.monotonic() - start, args.json)


def _figure(value: int | str) -> str:
    return f"{value:,} B" if isinstance(value, int) else value


if __name__ == "__main__":
    sys.exit(main())
