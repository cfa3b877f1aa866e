"""Property-based fuzzing of the newer surfaces (issue 25): GGUF headers, engine launch lines,
engine start-up logs, and the Hub path against a loopback server that misbehaves. Each case
ends in a result or one KvplanError (exit 2 at the CLI; 3 where the Hub cannot be used and
nothing is cached) - never another exception, a hang, more than 1 GiB, or a file written
outside the Hub cache.

As in tests/contracts/test_fuzz_hostile.py: a few dozen cases each in the default run, and `slow`
variants (CI's `pytest -m slow` step) with 10,400 cases in all: GGUF 4,000, launch lines
2,000, logs 4,000, Hub 400 (each Hub case is a real HTTP exchange). Every variant checks that
it really ran its share. Measured on 2 shared CPU cores: about 100 s for the slow variants.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib
import os
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gguf_files import write_gguf
from hostile import alarm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import FIXTURES
from test_fuzz_hostile import memory_cap

from kvplan.core.errors import KvplanError

# no single case may take longer: a hang detector, generous for a loaded machine (the Hub
# cases' own limit is 4 s; a hang fails the whole test through the alarm as well)
CASE_SECONDS = 60.0


def run_cases(body: Callable[[Any], None], strategy: st.SearchStrategy[Any], n: int) -> None:
    """Run `body` on n cases of `strategy`: each under the memory cap and the time limit."""
    count = [0]

    def case(value: Any) -> None:
        count[0] += 1
        start = time.monotonic()
        with memory_cap():
            body(value)
        took = time.monotonic() - start
        assert took < CASE_SECONDS, f"one case took {took:.1f} s"

    inner = settings(max_examples=n, deadline=None, database=None,
                     suppress_health_check=list(HealthCheck))(given(strategy)(case))
    with alarm(max(600, n // 2)):  # a hang detector, generous for a loaded machine
        inner()
    assert count[0] >= n * 9 // 10, f"ran {count[0]} of {n} cases"


def sizes(default: int, slow: int) -> Any:
    return pytest.mark.parametrize("n", [
        pytest.param(default, id="default"),
        pytest.param(slow, id="slow", marks=pytest.mark.slow)])


def expect_result_or_kvplan_error(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except KvplanError as exc:
        assert exc.exit_code in (1, 2, 3) and exc.message and "\n" not in exc.message, exc
        return exc


# --- 1. GGUF headers ------------------------------------------------------------------------

NUMBERS64 = st.one_of(st.sampled_from([0, 1, 2, 3, 8, 9, 12, 13, 255, 2**31, 2**32 - 1, 2**32,
                                       10**12, 2**62, 2**63, 2**64 - 1]),
                      st.integers(min_value=0, max_value=2**64 - 1))


def _writer_files() -> dict[str, bytes]:
    """Valid files written by llama.cpp's own writer (the gguf package): the seeds."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for arch, keys in (
            ("llama", {"block_count": 2, "context_length": 4096, "embedding_length": 256,
                       "feed_forward_length": 512, "attention.head_count": 4,
                       "attention.head_count_kv": 2, "attention.key_length": 64,
                       "attention.value_length": 64}),
            ("nemotron_h", {"block_count": 4, "context_length": 8192, "embedding_length": 256,
                            "attention.head_count": 4, "attention.head_count_kv": [0, 2, 0, 0],
                            "feed_forward_length": [0, 0, 1024, 0], "ssm.inner_size": 512,
                            "ssm.state_size": 16, "ssm.conv_kernel": 4,
                            "ssm.time_step_rank": 8, "ssm.group_count": 1})):
            path = write_gguf(Path(d) / f"{arch}.gguf", arch, keys, tokenizer=True,
                              name=f"fuzz {arch}")
            out[arch] = path.read_bytes()
    return out


@st.composite
def mutated_gguf(draw: st.DrawFn, seeds: dict[str, bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(sorted(seeds.values()))))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["flip", "u64", "u32", "cut", "insert", "zeros"]))
        # the counts live in the first kilobyte
        at = draw(st.integers(min_value=0, max_value=max(min(len(data), 1024) - 1, 0)))
        if not data:
            break
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif op == "u64":
            data[at:at + 8] = struct.pack("<Q", draw(NUMBERS64))
        elif op == "u32":
            data[at:at + 4] = struct.pack("<I", draw(NUMBERS64) % 2**32)
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(max_size=32))
        else:
            data[at:] = bytes(draw(st.sampled_from([0, 64, 4096, 2**20])))
    return bytes(data)


VALUE_TYPES = st.integers(min_value=0, max_value=14)


@st.composite
def raw_value(draw: st.DrawFn, depth: int = 0) -> bytes:
    vtype = draw(VALUE_TYPES)
    payload: bytes
    if vtype == 9 and depth < 6:  # an array: its element type, a count, then elements
        sub = draw(VALUE_TYPES)
        count = draw(st.one_of(st.integers(min_value=0, max_value=4), NUMBERS64))
        items = b"".join(draw(raw_value(depth + 1))[4:] for _ in range(min(count, 3)))
        payload = struct.pack("<IQ", sub, count) + items
    elif vtype == 8:
        payload = struct.pack("<Q", draw(st.one_of(st.integers(0, 8), NUMBERS64))) + \
            draw(st.binary(max_size=8))
    else:
        payload = draw(st.binary(min_size=0, max_size=8))
    return struct.pack("<I", vtype) + payload


KEYS = st.sampled_from(["general.architecture", "general.name", "general.alignment",
                        "llama.block_count", "llama.attention.head_count",
                        "llama.attention.head_count_kv", "nemotron_h.block_count",
                        "nemotron_h.ssm.time_step_rank", "tokenizer.ggml.tokens",
                        "tokenizer.ggml.scores", "x"])


@st.composite
def raw_gguf(draw: st.DrawFn) -> bytes:
    """A header built from the format's parts with hostile counts and types."""
    kvs = []
    if draw(st.booleans()):
        arch = draw(st.sampled_from(["llama", "nemotron_h", "qwen3", "rwkv9", ""]))
        kvs.append(struct.pack("<Q", 20) + b"general.architecture" + struct.pack("<I", 8)
                   + struct.pack("<Q", len(arch)) + arch.encode())
    for _ in range(draw(st.integers(min_value=0, max_value=5))):
        key = draw(KEYS).encode()
        kvs.append(struct.pack("<Q", len(key)) + key + draw(raw_value()))
    n_keys = draw(st.one_of(st.just(len(kvs)), NUMBERS64))
    n_tensors = draw(st.one_of(st.integers(min_value=0, max_value=3), NUMBERS64))
    version = draw(st.sampled_from([1, 2, 3, 3, 3, 2**24]))
    return (b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_keys) + b"".join(kvs)
            + draw(st.binary(max_size=64)))


@sizes(default=40, slow=4_000)
def test_gguf_reader(n, tmp_path):
    from kvplan.sources.gguf import load_gguf

    seeds = _writer_files()
    for seed in seeds.values():  # the seeds themselves read
        (tmp_path / "seed.gguf").write_bytes(seed)
        load_gguf(tmp_path / "seed.gguf")
    # memory-backed when the machine has it: a case is a write and a read of a small file
    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() and os.access(shm, os.W_OK) \
        else tmp_path
    path = folder / "case.gguf"

    def body(data: bytes) -> None:
        path.write_bytes(data)
        expect_result_or_kvplan_error(lambda: load_gguf(path))

    try:
        run_cases(body, st.one_of(mutated_gguf(seeds), raw_gguf()), n)
    finally:
        path.unlink(missing_ok=True)
        if folder != tmp_path:
            folder.rmdir()


# --- 2. launch lines ------------------------------------------------------------------------

FLAG_WORDS = st.sampled_from([
    "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "--max-model-len",
    "--gpu-memory-utilization", "--kv-cache-dtype", "--block-size", "--max-num-seqs",
    "--max-num-batched-tokens", "--dtype", "--quantization", "--speculative-config",
    "--data-parallel-size", "--enable-expert-parallel", "--mem-fraction-static", "--tp",
    "--context-length", "--ctx-size", "-c", "-ngl", "--n-gpu-layers", "--parallel", "-np",
    "--model", "-m", "--model-path", "--max-total-tokens", "--num-shard", "--cache-type-k",
    "--kv_cache_free_gpu_memory_fraction", "--max_batch_size", "-e", "--gpus", "all",
    "--", "=", "\\", "'", '"', "$(", "`", ";", "|", "&&", "#"])
VALUE_WORDS = st.one_of(
    st.sampled_from(["0", "1", "-1", "8", "0.9", "1e9", "nan", "inf", "auto", "fp8", "bf16",
                     "9" * 30, "9" * 5000, "1e-99999999", "16777216", "{", "{}",
                     '{"num_speculative_tokens": 99999999999}', "''", "x" * 300]),
    st.text(max_size=12))
MODELS = st.sampled_from([
    "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B", "llama-3.1-8b", "/models/Qwen3-8B",
    "./nowhere", "hf:org/x@../../../../escape", "org/x@/abs", "deepseek-ai/DeepSeek-V3",
    "model.gguf", "a" * 300, ""])
PROGRAMS = st.sampled_from([
    "vllm serve", "python -m vllm.entrypoints.openai.api_server --model",
    "python -m sglang.launch_server --model-path", "llama-server -m", "trtllm-serve",
    "text-generation-launcher --model-id", "docker run --gpus all vllm/vllm-openai:v0.10.1",
    "docker run -it lmsysorg/sglang:v0.5.0 python -m sglang.launch_server --model-path",
    "docker run vllm/vllm-openai:v0." + "9" * 400, "CUDA_VISIBLE_DEVICES=0,1 vllm serve",
    "", "sudo", "bash -c 'vllm serve"])


@st.composite
def launch_lines(draw: st.DrawFn) -> str:
    words = [draw(PROGRAMS), draw(MODELS)]
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        flag = draw(FLAG_WORDS)
        words.append(f"{flag}={draw(VALUE_WORDS)}" if draw(st.booleans()) else flag)
        if draw(st.booleans()):
            words.append(draw(VALUE_WORDS))
    sep = draw(st.sampled_from([" ", " \\\n  ", "\t"]))
    return sep.join(words)


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """No network: a model name that would go to the Hub finds an empty cache (exit 3)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    _reload_client()
    yield
    monkeypatch.undo()
    _reload_client()


def _reload_client() -> None:
    with contextlib.suppress(ImportError):
        import huggingface_hub
        from huggingface_hub import constants

        importlib.reload(constants)
        huggingface_hub.close_session()


@sizes(default=40, slow=2_000)
def test_launch_lines(n, offline_hub, tmp_path):
    from kvplan.planning.launch import from_command

    def body(text: str) -> None:
        expect_result_or_kvplan_error(lambda: from_command(text))

    before = set(Path.cwd().iterdir())
    run_cases(body, launch_lines(), n)
    assert set(Path.cwd().iterdir()) == before  # nothing written where it runs


# --- 3. start-up logs ----------------------------------------------------------------------

LOG_SEEDS = [
    "INFO 06-23 14:20:01 [core.py:69] Initializing a V1 LLM engine (v{ver}) with config: "
    "model='{model}', speculative_config=None, tokenizer='{model}', dtype=torch.bfloat16, "
    "max_seq_len={num}, download_dir=None, load_format=auto, tensor_parallel_size={num}, "
    "pipeline_parallel_size={num}, quantization=None, enforce_eager=False, "
    "kv_cache_dtype={word}, device_config=cuda",
    "INFO 06-23 14:20:40 [gpu_model_runner.py:1595] Model loading took {num} GiB and {num} "
    "seconds",
    "INFO 06-23 14:21:48 [gpu_worker.py:232] Available KV cache memory: {num} GiB",
    "INFO 06-23 14:21:48 [kv_cache_utils.py:716] GPU KV cache size: {num} tokens",
    "INFO 06-23 14:21:48 [kv_cache_utils.py:720] Maximum concurrency for {num} tokens per "
    "request: {num}x",
    "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='{model}', tp_size={num}, "
    "mem_fraction_static={num}, context_length={num}, kv_cache_dtype='{word}')",
    "[2025-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: {num}, K size: {num} GB, V size:"
    " {num} GB",
    "[2025-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
    "avail mem={num} GB, mem usage={num} GB.",
    "llama_kv_cache_unified: size = {num} MiB ({num} cells, {num} layers, {num} seqs), "
    "K (f16): {num} MiB, V (f16): {num} MiB",
    "llama_context: n_ctx = {num}",
    "print_info: n_layer = {num}",
    "{junk}",
]
LOG_NUMBERS = st.one_of(st.sampled_from(["0", "1", "16", "409,584", "50.00", "1.5", "-1",
                                         "9" * 400, "9" * 5000, "1." + "9" * 400, "nan",
                                         "inf", "1e308", "16777216", ""]),
                        st.integers(min_value=0, max_value=2**70).map(str))


@st.composite
def logs(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        template = draw(st.sampled_from(LOG_SEEDS))
        lines.append(template.format(
            ver=draw(st.sampled_from(["0.9.1", "0.11.0", "0." + "9" * 50, "x", ""])),
            model=draw(MODELS), word=draw(st.sampled_from(["auto", "fp8", "'", ""])),
            num=draw(LOG_NUMBERS), junk=draw(st.text(max_size=200))))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n", "\x00"]))


@sizes(default=40, slow=4_000)
def test_start_up_logs(n, offline_hub):
    from kvplan.planning.explain import explain, log_formats
    from kvplan.sources.startlog import read_log

    formats = log_formats()
    full = [0]

    def body(text: str) -> None:
        expect_result_or_kvplan_error(lambda: read_log(text, formats))
        if full[0] < n // 10:  # the whole explain for a tenth of the cases (it plans)
            full[0] += 1
            expect_result_or_kvplan_error(lambda: explain(text))

    run_cases(body, logs(), n)


# --- 4. the Hub path, against a server that misbehaves --------------------------------------

LLAMA2 = (FIXTURES / "hub" / "meta-llama--Llama-2-7b-hf.json"
          ).read_bytes()
HOSTILE_NAMES = st.sampled_from([
    '"../../../../../escaped"', "../../../../../escaped", '"/ABS/escaped"', 'W/"a/b"', '"."',
    '".."', '"a\\\\b"', '"' + "a" * 200 + '"', "", '""', '"\u00e9"', "0" * 40, "f" * 64])
REVISIONS = st.one_of(
    st.sampled_from(["main", "v1.0", "refs/pr/1", "../../../../escaped", "/ABS/escaped", "..",
                     ".git", "a/b", "x" * 300, "main\n", "%2e%2e", "a\\..\\b", "refs/pr/../x"]),
    st.text(max_size=12))


@st.composite
def misbehaviours(draw: st.DrawFn) -> dict[str, Any]:
    from fakehub import Blob, Misbehave

    body = draw(st.sampled_from(["llama", "junk", "deep", "big", "gzip-llama", "gzip-bomb",
                                 "gzip-broken", "empty"]))
    bad = Misbehave(any_revision=True)
    files: dict[str, Any] = {"config.json": LLAMA2}
    if body == "junk":
        files["config.json"] = draw(st.binary(max_size=64))
    elif body == "deep":
        files["config.json"] = b"[" * 100_000
    elif body == "big":
        files["config.json"] = Blob(b'{"x": "', draw(st.sampled_from([17, 40])) * 2**20)
    elif body == "gzip-llama":
        bad.gzip["config.json"] = gzip.compress(LLAMA2)
    elif body == "gzip-bomb":
        bad.gzip["config.json"] = GZIP_BOMB
    elif body == "gzip-broken":
        bad.gzip["config.json"] = b"\x1f\x8b\x08\x00broken" + draw(st.binary(max_size=16))
    elif body == "empty":
        files["config.json"] = b""
    if draw(st.booleans()):
        bad.etag = draw(HOSTILE_NAMES)
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        bad.commit_header = draw(HOSTILE_NAMES)
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        bad.api_sha = draw(HOSTILE_NAMES)
    return {"files": files, "misbehave": bad, "revision": draw(REVISIONS),
            "safetensors": draw(st.booleans())}


GZIP_BOMB = gzip.compress(bytes(48 * 2**20), compresslevel=9)  # 48 MiB of zeros in ~48 KB


def _files_outside(root: Path, home: Path) -> list[Path]:
    return [p for p in root.rglob("*") if (p.is_file() or p.is_symlink())
            and home not in p.parents]


@sizes(default=20, slow=400)
def test_hub_path_against_a_misbehaving_server(n, tmp_path, monkeypatch):
    from fakehub import FakeHub

    from kvplan.sources import hub
    from kvplan.sources.hub import (
        fetch_config,
        parse_hub_ref,
        safetensors_tensors,
        spec_from_hub_config,
    )

    server = FakeHub(lifetime_s=max(600.0, 5.0 * n)).start()
    # HF_HOME five levels down, so ../../../../../x from the cache's blobs lands in root
    root = tmp_path / "root"
    home = root / "a" / "b" / "c" / "d" / "hf"
    home.mkdir(parents=True)
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HF_HUB_OFFLINE",
                 "HF_HUB_ETAG_TIMEOUT", "KVPLAN_DEBUG", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setattr(hub, "HUB_TIME_LIMIT_S", 4.0)
    _reload_client()
    counter = [0]

    def body(case: dict[str, Any]) -> None:
        counter[0] += 1
        bad = case["misbehave"]
        for attr in ("etag", "commit_header", "api_sha"):
            value = getattr(bad, attr)
            if value is not None:
                setattr(bad, attr, value.replace("/ABS", str(root)))
        repo_id = f"org/r{counter[0]}"
        files = dict(case["files"])
        if case["safetensors"]:
            files["model.safetensors"] = (8).to_bytes(8, "little") + b'{      }'
        server.add(repo_id, files, misbehave=bad)
        revision = case["revision"].replace("/ABS", str(root))

        def fetch() -> Any:
            fetched = fetch_config(parse_hub_ref(f"hf:{repo_id}@{revision}"))
            spec_from_hub_config(fetched)  # config.json read as `kvplan size` reads it
            return safetensors_tensors(fetched)

        expect_result_or_kvplan_error(fetch)
        outside = _files_outside(root, home)
        assert outside == [], outside
        cache = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
        assert cache < 20 * 2**20, cache  # never more than a config's limit a case

    try:
        run_cases(body, misbehaviours(), n)
    finally:
        server.stop()
        monkeypatch.undo()
        _reload_client()
    assert hashlib.sha256(LLAMA2).hexdigest()  # the seed is intact
