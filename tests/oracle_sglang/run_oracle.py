"""Differential test: kvplan's SGLang engine against SGLang 0.5.23's own KV-pool sizing.

Runs in its own environment (tests/oracle_sglang/setup.sh builds it; never in the default
pytest run): SGLang's whole wheel unpacked on PYTHONPATH beside torch (CPU) and the
pure-Python packages its imports need (tests/oracle_sglang/requirements.txt). torchvision is
replaced by an import hook that hands out empty modules: only multimodal config modules
import it, and the registry's build pulls a CUDA torch that does not load here.

The budget is the input, so nothing needs a GPU. For every library model SGLang serves x KV
budgets x page sizes x KV dtypes:

SGLang side, the steps of `KVCacheConfigurator._resolve_memory_pool_config`
(srt/mem_cache/kv_cache_configurator.py @ 0.5.23) after the GPU-only
`_profile_available_bytes`: a real `ServerArgs` published to the runtime context,
`ModelConfig.from_server_args` on the model's real config.json, the KV dtype from
`kv_cache_dtype.configure_kv_cache_dtype`, `resolve_layer_indices`, a `KVCacheConfigurator`
(model=None, as before the weights exist), for Mamba/GDN hybrids `_handle_max_mamba_cache`
on the budget in GB (as `_profile_available_bytes` calls it), then `config_from_budget`.
kvplan side: `kvplan.api.deploy(..., engine="sglang", kv_memory=budget, block_size=page)`.

Compared exactly: max_total_num_tokens, the SWA pool's tokens (hybrid-SWA models) and the
Mamba state slots (max_mamba_cache_size). Prints the count of equal cases and the time; exits
1 on any difference not listed in KNOWN_DIFFERENCES (each explained in
docs/engine-accuracy.md).

Usage: .oracle-sglang-venv/bin/python tests/oracle_sglang/run_oracle.py [--quick]
       [--model NAME] [--json F] [-v]
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import io
import logging
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared harness
import oracle_harness as harness  # noqa: E402

harness.setup()
GiB = 2**30
SGLANG_VERSION = "0.5.23"

# Library models not compared, with the reason.
SKIPPED = {
    # no config.json copy in the repository
    "gpt-3-175b": "no public checkpoint",
    "gemma-3-27b": "no config.json copy",
    # vision-language models: their processor/config modules need the real torchvision
    "gemma-3-4b": "vision-language (torchvision)",
    "llava-1.5-7b": "vision-language (torchvision)",
    "llama-4-scout": "vision-language (torchvision)",
    "llama-4-maverick": "vision-language (torchvision)",
    "llama-3.2-90b-vision": "vision-language (torchvision)",
    # remote code only (DeciLM)
    "llama-3.3-nemotron-super-49b": "needs the checkpoint's remote code",
    # SGLang 0.5.23 has no model class for it (srt/models has no Jamba)
    "jamba-1.5-mini": "SGLang 0.5.23 does not serve JambaForCausalLM",
    # custom code only (RWForCausalLM)
    "falcon-7b": "config.json needs the checkpoint's remote code",
    # kvplan refuses it for SGLang (DSV4PoolConfigurator is not modelled; docs §4)
    "deepseek-v4-flash": "kvplan does not model DSV4PoolConfigurator",
}

# Differences understood and documented in docs/engine-accuracy.md: model -> reason.
KNOWN_DIFFERENCES: dict[str, str] = {}

# SGLang refuses to start (and kvplan says it does not fit)
REFUSED = {"refused": "no memory for the pools"}

BUDGETS = (3 * GiB + 123_456_789, 21 * GiB, 61 * GiB + 7)
PAGE_SIZES = (1, 16, 64)
KV_DTYPES = ("auto", "fp8_e4m3")


# --- torchvision: empty modules --------------------------------------------------------------

class _Anything(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return cls


class _Stub(metaclass=_Anything):
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return self

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self


class _TorchvisionStub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any `torchvision[.x]` import gives an empty package whose names are _Stub classes."""

    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"
        module.__getattr__ = lambda attr: type(attr, (_Stub,), {})  # type: ignore[method-assign]
        return module

    def exec_module(self, module):
        pass


# --- SGLang ----------------------------------------------------------------------------------

class Sglang:
    """SGLang 0.5.23's pool sizing, imported once."""

    def __init__(self):
        sys.meta_path.insert(0, _TorchvisionStub())
        warnings.filterwarnings("ignore")
        with contextlib.redirect_stderr(io.StringIO()):
            import sglang.srt.arg_groups.mamba_hook as mamba_hook
            from sglang.srt import runtime_context
            from sglang.srt.configs.model_config import AttentionArch, ModelConfig
            from sglang.srt.layers import quantization
            from sglang.srt.mem_cache import kv_cache_dtype
            from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
            from sglang.srt.model_executor.model_runner_components.layer_setup import (
                resolve_layer_indices,
            )
            from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (  # noqa: E501
                SpecAuxHiddenStateConfig,
            )
            from sglang.srt.server_args import ServerArgs
            from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
        # The CPU platform refuses the mamba "extra_buffer" strategy that ServerArgs picks
        # for GDN hybrids by default on CUDA (arg_groups/mamba_hook.py); the strategy does
        # not change the pool figures (no_buffer with overlap off gives the same), so the
        # platform check answers as on CUDA.
        mamba_hook._platform_supports_mamba_cache_extra_buffer = lambda: True
        # layers/quantization/__init__.py registers "mxfp4" (gpt-oss's checkpoints) only on
        # CUDA, ROCm gfx95, XPU or the CPU engine; ModelConfig checks the name against it
        quantization.QUANTIZATION_METHODS.setdefault("mxfp4", quantization.Mxfp4Config)
        logging.disable(logging.WARNING)
        self.rc, self.ModelConfig, self.AttentionArch = runtime_context, ModelConfig, \
            AttentionArch
        self.kv_cache_dtype, self.KVCacheConfigurator = kv_cache_dtype, KVCacheConfigurator
        self.resolve_layer_indices, self.SpecAux = resolve_layer_indices, \
            SpecAuxHiddenStateConfig
        self.ServerArgs, self.SpeculativeAlgorithm = ServerArgs, SpeculativeAlgorithm

    def server_args(self, path: Path, page_size: int, kv_dtype: str):
        sa = self.ServerArgs(model_path=str(path), device="cpu", skip_tokenizer_init=True,
                             page_size=page_size, kv_cache_dtype=kv_dtype)
        self.rc.publish(sa, role="scheduler")
        return sa

    def model_config(self, sa):
        return self.ModelConfig.from_server_args(sa)

    def pools(self, sa, mc, budget_bytes: int) -> dict:
        """What SGLang sizes from `budget_bytes` (the bytes `_profile_available_bytes` would
        return before the Mamba share is taken)."""
        rc = self.rc
        # a fresh publish drops the overrides the last case took (its max_mamba_cache_size)
        rc.publish(sa, role="scheduler")
        resolved, dtype = self.kv_cache_dtype.configure_kv_cache_dtype(
            server_args_kv_cache_dtype=rc.get_model().kv_cache_dtype, model=None,
            model_dtype=mc.dtype, is_draft_worker=False, is_dflash=False,
            speculative_draft_attention_backend=None)
        info = self.resolve_layer_indices(model=None, model_config=mc, is_draft_worker=False)
        # load_model_utils.py resolve_sliding_window_size with model=None
        window = (mc.sliding_window_size if mc.is_hybrid_swa and mc.sliding_window_size
                  is not None else mc.attention_chunk_size)
        kvc = self.KVCacheConfigurator(
            device="cpu", gpu_id=0, attn_dp_size=1, pp_size=1, pp_group=None, model=None,
            model_config=mc, server_args=sa, kv_cache_dtype=dtype,
            kv_cache_dtype_str=resolved or rc.get_model().kv_cache_dtype,
            model_dtype=mc.dtype, page_size=rc.get_schedule().page_size,
            sliding_window_size=window,
            spec_algorithm=self.SpeculativeAlgorithm.from_string(None),
            is_draft_worker=False, post_capture_kv_active=False,
            spec_aux_config=self.SpecAux(), is_hybrid_swa=mc.is_hybrid_swa,
            is_hybrid_swa_compress=mc.is_hybrid_swa_compress,
            use_mla_backend=mc.attention_arch == self.AttentionArch.MLA, layer_info=info,
            forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
            memory_pool_config=None)
        budget = budget_bytes
        mamba = None
        if kvc.mambaish_config is not None:
            # _profile_available_bytes: rest_memory (GB) through _handle_max_mamba_cache,
            # which refuses to start when no state slot fits
            try:
                rest_gb = kvc._handle_max_mamba_cache(budget_bytes / (1 << 30))
            except RuntimeError as exc:
                if "Not enough GPU memory for hybrid" not in str(exc):
                    raise
                return REFUSED
            budget = int(rest_gb * (1 << 30))
            mamba = rc.get_schedule().max_mamba_cache_size
        cfg = kvc.config_from_budget(budget)
        return {"max_total_num_tokens": cfg.max_total_num_tokens,
                "swa_max_total_num_tokens": cfg.swa_max_total_num_tokens,
                "max_mamba_cache_size": mamba}


# --- kvplan ----------------------------------------------------------------------------------

def kvplan_pools(spec, page_size: int, kv_dtype: str, budget_bytes: int) -> dict:
    from kvplan.api import deploy
    from kvplan.core.errors import NoKVMemoryError

    try:
        cap = deploy(spec, gpu="h100", engine="sglang", kv_dtype=kv_dtype,
                     kv_memory=budget_bytes, block_size=page_size).capacity
    except NoKVMemoryError:
        return REFUSED
    p = cap.engine_profile
    return {"max_total_num_tokens": p.max_total_num_tokens,
            "swa_max_total_num_tokens": p.swa_max_total_num_tokens,
            "max_mamba_cache_size": p.max_mamba_cache_size}


# --- cases -----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    args = harness.parser(__doc__, "one budget").parse_args(argv)

    t0 = time.time()
    sg = harness.imported(f"SGLang {SGLANG_VERSION}", Sglang)
    tmp = Path(tempfile.mkdtemp(prefix="kvplan-oracle-sglang-"))
    specs = harness.library_specs(SKIPPED, args.model)
    budgets = BUDGETS[1:2] if args.quick else BUDGETS
    tally = harness.Tally(args.verbose)
    models = set()
    for spec in specs:
        path = harness.config_dir(spec, tmp)
        if path is None:
            tally.error(f"{spec.name}: no config.json copy")
            continue
        for kv in KV_DTYPES:
            for page in PAGE_SIZES:
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        sa = sg.server_args(path, page, kv)
                        mc = sg.model_config(sa)
                except Exception as exc:
                    tally.error(f"{spec.name} {kv} page {page}: SGLang config", exc)
                    continue
                for budget in budgets:
                    try:
                        want = sg.pools(sa, mc, budget)
                    except Exception as exc:
                        want = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                    try:
                        got = kvplan_pools(spec, page, kv, budget)
                    except Exception as exc:
                        got = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                    same = got == want
                    case = dict(model=spec.name, kv_cache_dtype=kv, page_size=page,
                                budget_bytes=budget, sglang=want, kvplan=got, equal=same)
                    models.add(spec.name)
                    tally.add(case, [] if same else ["SGLang and kvplan differ"],
                              KNOWN_DIFFERENCES.get(spec.name))
    return tally.finish(f"SGLang {SGLANG_VERSION} oracle",
                        f"{len(models)} library models x {len(budgets)} budgets x pages "
                        f"{', '.join(map(str, PAGE_SIZES))} x KV dtypes {', '.join(KV_DTYPES)}",
                        time.time() - t0, args.json)


if __name__ == "__main__":
    sys.exit(main())
