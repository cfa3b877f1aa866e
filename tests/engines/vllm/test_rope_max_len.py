"""vLLM's max_model_len from a rope-scaled config, and V0's long-context chunked prefill by
release (vllm#5248: deepseek-coder-6.7b-instruct over two T4s under 0.4.3).

Numbers from vLLM's source: `_get_and_verify_max_len` (config.py of 0.4.3) multiplies
max_position_embeddings by rope_scaling's factor unless the type is "su" (later also
"longrope" and "llama3"); a "yarn" rope starts from its original_max_position_embeddings.
deepseek-coder-6.7b-instruct's config.json: max_position_embeddings 16,384, rope_scaling
{"type": "linear", "factor": 4.0}.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from paths import FIXTURES  # noqa: E402

from kvplan.core.spec import Rope  # noqa: E402
from kvplan.engines.vllm.config import derived_max_model_len  # noqa: E402
from kvplan.engines.vllm.memory import batch_settings  # noqa: E402
from kvplan.planning.deployment import deployment  # noqa: E402
from kvplan.planning.verdict import engine_start, longer_context_refusal  # noqa: E402
from kvplan.sources.library import resolve  # noqa: E402

CODER = str(FIXTURES / "engines" / "models" / "deepseek-coder-6.7b.yaml")


def test_linear_rope_scales_the_length_vllm_derives():
    spec = resolve(CODER)
    assert spec.max_context_tokens == 16384
    assert derived_max_model_len(spec) == 16384 * 4  # 65,536
    # yarn: original_max_position_embeddings x factor (32,768 x 4), not max_position x factor
    yarn = replace(spec, rope=Rope("yarn", 4.0, 32768))
    assert derived_max_model_len(yarn) == 131072
    # the kinds vLLM leaves unscaled, and Gemma 3, whose length is already scaled
    for kind in ("llama3", "longrope", "su"):
        assert derived_max_model_len(replace(spec, rope=Rope(kind, 8.0, 8192))) == 16384
    # Gemma 3 (rope_scaling linear 8.0, its 131,072-token length already scaled)
    gemma = resolve(str(FIXTURES / "hf-configs" / "google--gemma-3-4b-it.json"))
    assert gemma.rope is not None and gemma.rope.factor == 8.0
    assert derived_max_model_len(gemma) == gemma.max_context_tokens == 131072
    assert derived_max_model_len(replace(spec, rope=None)) == 16384


def test_the_derived_length_is_the_default_and_the_limit():
    dep = deployment(CODER, gpu="t4", count=2, engine="vllm", engine_version="0.4.3")
    assert dep.max_model_len == 65536
    # 65,536 is within what vLLM derives: no VLLM_ALLOW_LONG_MAX_MODEL_LEN needed
    assert longer_context_refusal(dep) is None
    longer = deployment(CODER, gpu="t4", count=2, engine="vllm", engine_version="0.4.3",
                        max_model_len=65537)
    assert longer_context_refusal(longer) is not None
    # other engines keep the model's own maximum
    assert deployment(CODER, gpu="t4", engine="llamacpp").max_model_len is None


def test_v0_long_context_chunked_prefill_from_053():
    # 0.4.3 (and 0.5.2): no chunked prefill by default, max(max_model_len, 2048) tokens
    for version in ((0, 4, 3), (0, 5, 2)):
        b = batch_settings(version, None, None, 65536)
        assert (b.max_num_batched_tokens, b.max_num_seqs, b.chunked_prefill) == (65536, 256, False)
    # 0.5.3 (arg_utils.py use_long_context): chunked at 512 tokens above 32,768
    b = batch_settings((0, 5, 3), None, None, 65536)
    assert (b.max_num_batched_tokens, b.chunked_prefill) == (512, True)
    b = batch_settings((0, 5, 3), None, None, 32768)
    assert (b.max_num_batched_tokens, b.chunked_prefill) == (32768, False)


def test_the_0_4_3_line_over_two_t4s_does_not_start():
    # '# GPU blocks: 507' then an error: 507 x 16 = 8,112 tokens, fewer than the 65,536 of
    # one request, so 0.4.3's worker.py raise_if_cache_size_invalid refuses to start
    dep = deployment(CODER, gpu="t4", count=2, engine="vllm", engine_version="0.4.3")
    start = engine_start(dep)
    assert not start.starts
    assert start.capacity is not None and start.capacity.pool.max_request_tokens == 65536
