"""Cache policies as token budgets: what a request would hold if the engine evicted, compressed
or shared its KV cache the way a paper defines it.

These are what-ifs beside kvplan's baseline (the exact cache an engine keeps today). A policy
says how many token slots each layer would keep instead, and the layer kinds' own byte formulas
(kvplan.core.layers) turn the slots into bytes, so a policy combines with any KV format.
Token budgets: `sinks+window:S,W` (StreamingLLM, arXiv:2309.17453), `budget:N` (H2O,
arXiv:2306.14048), `snapkv:N` (arXiv:2404.14469), `pyramid:N` (PyramidKV, arXiv:2406.02069, as
KVCache-Factory `pyramidkv_utils.py` PyramidKVCluster.update_kv budgets layers); sharing:
`share:K` (Cross-Layer Attention, arXiv:2405.12981); codecs: `turboquant:B`
(arXiv:2504.19874), `kvtc:R` (arXiv:2511.01815), `cachegen:R` (arXiv:2310.07240). They combine
with `&`: one token budget, one share:K, one codec. Each policy's rule, and why the codecs
are storage formats: docs/formulas.md §5.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import MLA, ChunkedLocal, FullAttention, Layer, SlidingWindow
from kvplan.core.record import record

#: the layer kinds a policy may shorten or share: those that keep a growing set of tokens
TOKEN_KINDS = (FullAttention, SlidingWindow, ChunkedLocal, MLA)

CODECS = ("turboquant", "kvtc", "cachegen")


@record
class Policy:
    """One policy's parameters, parsed from its text. `kind` is none, sinks+window, budget,
    snapkv, pyramid, share, or a codec (turboquant, kvtc, cachegen)."""

    kind: str
    text: str
    sinks_tokens: int = 0
    window_tokens: int = 0
    budget_tokens: int = 0
    beta: int = 20
    share_every: int = 1
    bits: int = 0  # turboquant: bits per coordinate
    ratio: Fraction = Fraction(1)  # kvtc, cachegen: the compression ratio

    @property
    def citation(self) -> str:
        return CITATIONS[self.kind]

    def assumptions(self) -> tuple[str, ...]:
        k = self.kind
        if k == "sinks+window":
            return (f"each layer keeps the first {self.sinks_tokens:,} tokens and the last "
                    f"{self.window_tokens:,}",)
        if k == "budget":
            return (f"each layer keeps {self.budget_tokens:,} tokens per KV head through "
                    "prefill and generation (the same count in every head)",)
        if k == "snapkv":
            return (f"the prompt is compressed to {self.budget_tokens:,} tokens per layer and "
                    f"head ({self.window_tokens:,} of them the observation window); generated "
                    "tokens are appended uncompressed",)
        if k == "pyramid":
            return (f"the prompt is compressed per layer as PyramidKV's reference code budgets "
                    f"it (N = {self.budget_tokens:,}, beta = {self.beta}, window "
                    f"{self.window_tokens:,}: more tokens in lower layers); generated tokens "
                    "are appended uncompressed",)
        if k == "share":
            return (f"every {self.share_every} adjacent attention layers of the same kind share "
                    "the first one's cache (the others store nothing)",)
        if k == "turboquant":
            return (f"each key and value row stored as {self.bits} bits per coordinate plus "
                    "two fp16 norms (the row's and the QJL residual's)",)
        if k == "kvtc":
            return (f"the cache compressed {float(self.ratio):g}x except the first "
                    f"{self.sinks_tokens:,} and last {self.window_tokens:,} tokens; a storage "
                    "format (attention reads the decompressed cache)",)
        if k == "cachegen":
            return (f"the cache encoded into a bitstream {float(self.ratio):g}x smaller than "
                    "the request's KV format; a storage and transfer format (attention reads "
                    "the decoded cache)",)
        return ("the engine keeps every token (no policy)",)


CITATIONS = {
    "none": "the exact cache the engine keeps (kvplan baseline)",
    "sinks+window": "StreamingLLM, Xiao et al., ICLR 2024, arXiv:2309.17453",
    "budget": "H2O, Zhang et al., NeurIPS 2023, arXiv:2306.14048",
    "snapkv": "SnapKV, Li et al., 2024, arXiv:2404.14469",
    "pyramid": "PyramidKV, Cai et al., 2024, arXiv:2406.02069 (section 3.2); layer budgets "
               "as KVCache-Factory pyramidkv_utils.py PyramidKVCluster.update_kv",
    "share": "Cross-Layer Attention, Brandon et al., 2024, arXiv:2405.12981",
    "turboquant": "TurboQuant, Zandieh et al., 2025, arXiv:2504.19874 (Algorithm 2)",
    "kvtc": "KVTC, Staniszewski and Lancucki, 2025, arXiv:2511.01815 (the 4 oldest (sink) and "
            "128 most recent tokens left uncompressed)",
    "cachegen": "CacheGen, Liu et al., SIGCOMM 2024, arXiv:2310.07240 (3.5-4.3x, abstract)",
}

#: what each policy keeps per layer, as docs/whatif.md states it (n = the request's tokens)
DEFINITIONS = {
    "sinks+window:S,W": "the first S tokens and the last W: `min(n, S + W)`",
    "budget:N": "N tokens per layer and head, through prefill and generation: `min(n, N)`",
    "snapkv:N[,window=W]": "the prompt compressed once to N (the last W always kept), the "
                           "output appended: `min(prompt, N) + output`",
    "pyramid:N[,beta=B,window=W]": "prompt < N: all of it; < 2(N-W): N; longer: layer l keeps "
                                   "`max - l x steps + W` (max = 2(N-W) - (N-W)//B); the "
                                   "output appended",
    "share:K": "each K adjacent attention layers of one kind keep one cache",
    "turboquant:B": "every kept token, each row in `ceil(n x B / 8)` bytes + two fp16 norms",
    "kvtc:R[,sinks=S,window=W]": "every kept token; all but the first S (4) and last W (128) "
                                 "stored in 1/R of their bytes",
    "cachegen:R": "every kept token, in 1/R of its bytes (a bitstream)",
}

NO_POLICY = Policy("none", "none")


def _count(text: str, what: str) -> int:
    from kvplan.core.units import parse_tokens

    return parse_tokens(text, what)


def parse_policy(text: str) -> tuple[Policy, ...]:
    """`sinks+window:4,1020`, `budget:2048`, `snapkv:1024,window=32`, `pyramid:512,beta=20`,
    `share:2`, `turboquant:3`, `kvtc:20`, `cachegen:4`, or several joined by `&`. Raises
    BadInputError naming the part it cannot read."""
    parts = [p.strip() for p in text.split("&")]
    if not text.strip() or any(not p for p in parts):
        raise BadInputError(f"--policy {text!r} is empty or has an empty part",
                            "e.g. sinks+window:4,1020 or share:2&budget:2048")
    policies = tuple(_parse_one(p) for p in parts)
    kinds = [p.kind for p in policies if p.kind != "none"]
    evicting = [k for k in kinds if k != "share" and k not in CODECS]
    codecs = [k for k in kinds if k in CODECS]
    if len(evicting) > 1 or kinds.count("share") > 1 or len(codecs) > 1:
        raise BadInputError(f"--policy {text!r} combines {', '.join(kinds)}",
                            "combine at most one token budget, one share:K and one codec")
    return policies


def _parse_one(part: str) -> Policy:
    what = f"--policy {part!r}"
    name, _, args = part.partition(":")
    name = name.strip().lower()
    if name == "none" and not args:
        return NO_POLICY
    if name not in CITATIONS or name == "none":
        raise BadInputError(f"{what}: unknown policy {name!r}", "one of " + ", ".join(DEFINITIONS))
    positional: list[str] = []
    named: dict[str, str] = {}
    for item in (a.strip() for a in args.split(",")) if args else ():
        if not item:
            raise BadInputError(f"{what} has an empty argument")
        key, eq, value = item.partition("=")
        if eq:
            named[key.strip().lower()] = value.strip()
        else:
            positional.append(item)
    def take(count: int, keys: Sequence[str] = ()) -> None:
        if len(positional) != count or set(named) - set(keys):
            extra = sorted(set(named) - set(keys))
            raise BadInputError(f"{what}: expected {count} number(s)"
                                + (f" and optionally {', '.join(k + '=' for k in keys)}"
                                   if keys else "")
                                + (f"; unknown {', '.join(extra)}" if extra else ""),
                                f"e.g. {EXAMPLES[name]}")

    if name == "sinks+window":
        take(2)
        sinks, window = (_count(v, what) for v in positional)
        if window < 1:
            raise BadInputError(f"{what}: the recent window must be at least 1 token")
        return Policy(name, part, sinks_tokens=sinks, window_tokens=window)
    if name == "budget":
        take(1)
        return Policy(name, part, budget_tokens=_positive(_count(positional[0], what), what))
    if name == "snapkv":
        take(1, ("window",))
        budget = _positive(_count(positional[0], what), what)
        window = _count(named.get("window", "32"), what)
        if window > budget:
            raise BadInputError(f"{what}: the observation window ({window:,}) is larger than "
                                f"the budget ({budget:,})")
        return Policy(name, part, budget_tokens=budget, window_tokens=window)
    if name == "pyramid":
        take(1, ("beta", "window"))
        budget = _positive(_count(positional[0], what), what)
        beta = _positive(_count(named.get("beta", "20"), what), what)
        window = _count(named.get("window", "32"), what)
        if window >= budget:
            raise BadInputError(f"{what}: the observation window ({window:,}) must be smaller "
                                f"than the budget ({budget:,})")
        return Policy(name, part, budget_tokens=budget, beta=beta, window_tokens=window)
    if name == "turboquant":
        take(1)
        bits = _count(positional[0], what)
        if not 2 <= bits <= 8:
            raise BadInputError(f"{what}: bits per coordinate must be 2 to 8 (one of them the "
                                f"QJL sign), got {bits}", "e.g. turboquant:3")
        return Policy(name, part, bits=bits)
    if name in ("kvtc", "cachegen"):
        take(1, ("sinks", "window") if name == "kvtc" else ())
        ratio = _ratio(positional[0], what)
        if name == "cachegen":
            return Policy(name, part, ratio=ratio)
        return Policy(name, part, ratio=ratio,
                      sinks_tokens=_count_or_zero(named.get("sinks", "4"), what),
                      window_tokens=_count_or_zero(named.get("window", "128"), what))
    take(1)
    return Policy(name, part, share_every=_positive(_count(positional[0], what), what))


EXAMPLES = {"sinks+window": "sinks+window:4,1020", "budget": "budget:2048",
            "snapkv": "snapkv:1024,window=32", "pyramid": "pyramid:512,beta=20",
            "share": "share:2", "turboquant": "turboquant:3", "kvtc": "kvtc:20",
            "cachegen": "cachegen:4"}


def _count_or_zero(text: str, what: str) -> int:
    return 0 if text.strip() == "0" else _count(text, what)


def _positive(value: int, what: str) -> int:
    if value < 1:
        raise BadInputError(f"{what}: must be at least 1, got {value}")
    return value


def _ratio(text: str, what: str) -> Fraction:
    try:
        value = Fraction(text.strip().rstrip("xX"))
    except (ValueError, ZeroDivisionError):
        raise BadInputError(f"{what}: the compression ratio must be a number such as 20 or "
                            f"3.5, got {text!r}") from None
    if value < 1:
        raise BadInputError(f"{what}: the compression ratio must be at least 1, got {text!r}")
    return value


# --- applying policies to a model's layers --------------------------------------------------

def pyramid_budgets(budget_tokens: int, beta: int, num_layers: int, prompt_tokens: int,
                    window_tokens: int = 32) -> tuple[int, ...]:
    """Prompt tokens each layer keeps under PyramidKV, bottom layer first, as the reference
    code budgets them (KVCache-Factory pyramidkv_utils.py, PyramidKVCluster.update_kv)."""
    if prompt_tokens < budget_tokens:
        return (prompt_tokens,) * num_layers
    spare = budget_tokens - window_tokens
    if prompt_tokens < 2 * spare or num_layers == 1:
        return (budget_tokens,) * num_layers
    low = spare // beta
    high = 2 * spare - low
    if high >= prompt_tokens - window_tokens:
        high = prompt_tokens - window_tokens
        low = 2 * spare - high
    steps = (high - low) // (num_layers - 1)
    return tuple(high - i * steps + window_tokens for i in range(num_layers))


def kept_tokens(layers: Sequence[Layer], policies: Sequence[Policy], prompt_tokens: int,
                output_tokens: int = 0) -> tuple[int | None, ...]:
    """Token slots each layer keeps under the policies at the request's full length (prompt +
    output); None for a layer a policy does not touch (state, cross attention, no cache) and 0
    for a layer whose cache another layer holds (share:K)."""
    if prompt_tokens < 0 or output_tokens < 0:
        raise BadInputError("prompt and output tokens must not be negative")
    total = prompt_tokens + output_tokens
    positions = [i for i, layer in enumerate(layers) if isinstance(layer, TOKEN_KINDS)]
    caps: dict[int, int] = {i: total for i in positions}
    for policy in policies:
        if policy.kind == "sinks+window":
            caps = {i: min(c, policy.sinks_tokens + policy.window_tokens)
                    for i, c in caps.items()}
        elif policy.kind == "budget":
            caps = {i: min(c, policy.budget_tokens) for i, c in caps.items()}
        elif policy.kind == "snapkv":
            caps = {i: min(c, min(prompt_tokens, policy.budget_tokens) + output_tokens)
                    for i, c in caps.items()}
        elif policy.kind == "pyramid":
            budgets = pyramid_budgets(policy.budget_tokens, policy.beta, len(positions),
                                      prompt_tokens, policy.window_tokens)
            caps = {i: min(caps[i], b + output_tokens)
                    for i, b in zip(positions, budgets, strict=True)}
    for policy in policies:
        if policy.kind == "share":
            # groups of K adjacent layers of one kind and shape: a layer can only hold the
            # cache of a layer that keeps the same tokens in the same rows
            seen: dict[Layer, int] = {}
            for i in positions:
                n = seen.get(layers[i], 0)
                seen[layers[i]] = n + 1
                if n % policy.share_every:
                    caps[i] = 0
    return tuple(caps.get(i) for i in range(len(layers)))


def codec(policies: Sequence[Policy]) -> Policy | None:
    """The codec among the policies (turboquant, kvtc, cachegen), if any."""
    return next((p for p in policies if p.kind in CODECS), None)


def turboquant_format(bits: int) -> KVFormat:
    """TurboQuant's row (arXiv:2504.19874, Algorithm 2): `bits` per coordinate ((bits - 1)-bit
    MSE code + 1-bit QJL sign) and two fp16 scalars, the row's norm and the residual's."""
    return KVFormat(f"turboquant:{bits}", bits, row_scalar_bytes=2 * 2,
                    description=f"TurboQuant, {bits} bits per coordinate + 2 fp16 norms per row")


def _slots(layer: Layer, tokens: int, kept: int | None, block_size: int | None) -> int | None:
    """Token slots the layer holds (whole blocks with `block_size`); None for a layer that
    keeps no token slots (state, or a cache whose own rule is not per token)."""
    if kept is None or kept >= layer.held_tokens(tokens):
        if not block_size:
            return layer.held_tokens(tokens) if isinstance(layer, TOKEN_KINDS) else None
        return layer.paged_tokens(tokens, block_size) or None
    return cdiv(kept, block_size) * block_size if block_size else kept


def _layer_bytes(layer: Layer, tokens: int, kept: int | None, fmt: KVFormat, tp: int,
                 block_size: int | None, code: Policy | None = None) -> int:
    if kept == 0:
        return 0
    slots = _slots(layer, tokens, kept, block_size)
    if slots is None or (kept is None and not block_size and code is None):
        # the policy does not bind here: the layer's own rule (kvplan.core.sizing's)
        return layer.request_bytes(tokens, fmt, tp)
    held = _peak(layer, slots, fmt, tp)
    if code is None or not isinstance(layer, TOKEN_KINDS) or code.kind == "turboquant":
        return held
    if code.kind == "cachegen":
        return cdiv(held * code.ratio.denominator, code.ratio.numerator)
    plain = layer.bytes_for_tokens(min(slots, code.sinks_tokens + code.window_tokens), fmt, tp)
    return plain + cdiv((held - plain) * code.ratio.denominator, code.ratio.numerator)


def _peak(layer: Layer, slots: int, fmt: KVFormat, tp: int) -> int:
    """Bytes of `slots` token slots, or of the last KIVI flush peak before them if larger."""
    now = layer.bytes_for_tokens(slots, fmt, tp)
    peak = fmt.last_flush_peak(slots)
    return max(now, layer.bytes_for_tokens(peak, fmt, tp)) if peak else now


def request_bytes(layers: Sequence[Layer], policies: Sequence[Policy], fmt: KVFormat,
                  prompt_tokens: int, output_tokens: int = 0, tp: int = 1,
                  block_size: int | None = None) -> int:
    """Bytes one request holds under the policies; with `block_size`, each layer's slots are
    rounded up to whole blocks as a paged engine allocates them."""
    tokens = prompt_tokens + output_tokens
    kept = kept_tokens(layers, policies, prompt_tokens, output_tokens)
    code = codec(policies)
    if code is not None and code.kind == "turboquant":
        fmt = turboquant_format(code.bits)
    return sum(_layer_bytes(layer, tokens, k, fmt, tp, block_size, code)
               for layer, k in zip(layers, kept, strict=True))


def format_citation(fmt: KVFormat) -> str:
    """Where a KV format's storage rule comes from, for a what-if row in that format."""
    if fmt.per_channel_keys:
        return ("KIVI, Liu et al., ICML 2024, arXiv:2402.02750 (Algorithm 1: keys per channel "
                "in groups of G tokens, the last l mod R in full precision; values per token, "
                "the last R in full precision)")
    if fmt.row_scalar_bytes:
        return CITATIONS["turboquant"]
    if fmt.group_size and fmt.name not in ("nvfp4", "fp8_ds_mla", "nvfp4_ds_mla"):
        window = (f"; the last {fmt.residual_tokens:,} tokens in full precision"
                  if fmt.residual is not None else "")
        return ("group-wise integer quantization: a scale (and zero point unless sym) per "
                f"group of {fmt.group_size} elements of each token's row{window}")
    return "the KV format as the engine stores it"


@record
class PolicyResult:
    """One policy beside the exact baseline, for one request of prompt + output tokens."""

    policy: str
    citation: str
    assumptions: tuple[str, ...]
    prompt_tokens: int
    output_tokens: int
    kv_dtype: str
    request_bytes: int  # exact bytes of one request under the policy (per GPU with tp)
    baseline_request_bytes: int  # the same request with every token kept
    paged_request_bytes: int  # whole blocks per layer (block_size), policy applied
    baseline_paged_request_bytes: int
    kept_tokens_min: int  # fewest / most token slots on a layer the policy touches
    kept_tokens_max: int
    kv_budget_bytes: int | None  # the engine's KV pool per GPU, when a deployment is given
    max_requests: int | None  # kv_budget_bytes // paged_request_bytes
    baseline_max_requests: int | None


def evaluate(layers: Sequence[Layer], policies: Sequence[Policy], fmt: KVFormat,
             prompt_tokens: int, output_tokens: int = 0, tp: int = 1, block_size: int = 16,
             kv_budget_bytes: int | None = None) -> PolicyResult:
    """The policies' bytes and capacity beside the baseline (every token kept). Capacity is
    the KV budget divided by whole-block request bytes, for both columns alike."""
    if block_size < 1:
        raise BadInputError(f"--block-size must be at least 1, got {block_size}")
    kept = [k for k in kept_tokens(layers, policies, prompt_tokens, output_tokens)
            if k is not None]
    exact = request_bytes(layers, policies, fmt, prompt_tokens, output_tokens, tp)
    base = request_bytes(layers, (), fmt, prompt_tokens, output_tokens, tp)
    paged = request_bytes(layers, policies, fmt, prompt_tokens, output_tokens, tp, block_size)
    base_paged = request_bytes(layers, (), fmt, prompt_tokens, output_tokens, tp, block_size)
    fits = base_fits = None
    if kv_budget_bytes is not None:
        fits = kv_budget_bytes // paged if paged else None
        base_fits = kv_budget_bytes // base_paged if base_paged else None
    code = codec(policies)
    if code is not None and code.kind == "turboquant":
        fmt = turboquant_format(code.bits)  # the rows are TurboQuant's whatever --kv-dtype says
    active = [p for p in policies if p.kind != "none"]
    cites = [p.citation for p in active]
    if fmt.is_quantized and fmt.group_size and not fmt.row_scalar_bytes:
        cites.append(format_citation(fmt))  # a what-if format: its own rule's source
    active = active or [NO_POLICY]
    cites = cites or [NO_POLICY.citation]
    return PolicyResult(
        policy="&".join(p.text for p in active), citation="; ".join(cites),
        assumptions=tuple(a for p in active for a in p.assumptions()),
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, kv_dtype=fmt.name,
        request_bytes=exact, baseline_request_bytes=base, paged_request_bytes=paged,
        baseline_paged_request_bytes=base_paged,
        kept_tokens_min=min(kept, default=0), kept_tokens_max=max(kept, default=0),
        kv_budget_bytes=kv_budget_bytes, max_requests=fits, baseline_max_requests=base_fits)


def evaluate_stages(stages: Sequence[Sequence[Layer]], policies: Sequence[Policy],
                    fmt: KVFormat, prompt_tokens: int, output_tokens: int = 0, tp: int = 1,
                    block_size: int = 16, kv_budget_bytes: int | None = None) -> PolicyResult:
    """`evaluate` on each pipeline stage; the stage whose whole-block bytes are largest bounds
    capacity per GPU (in a hybrid model that need not be the stage with the most layers)."""
    return max((evaluate(stage, policies, fmt, prompt_tokens, output_tokens, tp, block_size,
                         kv_budget_bytes) for stage in stages),
               key=lambda r: (r.paged_request_bytes, r.request_bytes))
