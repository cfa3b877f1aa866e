"""Models from the Hugging Face Hub, through the real huggingface_hub client talking HTTP to a
fake Hub on 127.0.0.1 (tests/fakehub.py). Nothing of kvplan's is mocked: the client reads
HF_ENDPOINT / HF_HOME / HF_TOKEN / HF_HUB_OFFLINE from the environment, as a user's would."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import sys
from pathlib import Path

import paths
import pytest
from fakehub import Blob, FakeHub
from probes import probe
from safetensors_files import header_prefix, llama2_7b_tensors
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.sources.hub import HubRef, bare_hub_ref, parse_hub_ref

pytest.importorskip("huggingface_hub")

FIXTURES = paths.FIXTURES / "hub"
LLAMA2 = (FIXTURES / "meta-llama--Llama-2-7b-hf.json").read_bytes()
GEMMA2 = (FIXTURES / "google--gemma-2-9b.json").read_bytes()
runner = CliRunner()

# Llama-2-7B: 32 layers x 32 KV heads x head_dim 128, K and V, fp16 (2 bytes).
LLAMA2_TOKEN_BYTES = 2 * 32 * 32 * 128 * 2
# Its weights, by hand: embeddings and LM head (untied), per layer q/k/v/o (4 x 4096^2),
# gate/up/down (3 x 4096 x 11008) and two norms, and the final norm.
LLAMA2_PARAMS = (2 * 32000 * 4096 + 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096)
                 + 4096)
assert LLAMA2_PARAMS == 6_738_415_616  # the published count of Llama-2-7b


def _reload_client() -> None:
    """huggingface_hub reads its environment variables once, at import (constants.py), as it
    would at the start of each `kvplan` process; re-read them for this test's environment."""
    import huggingface_hub
    from huggingface_hub import constants

    importlib.reload(constants)
    huggingface_hub.close_session()


def _sharded_llama2() -> dict[str, bytes | Blob]:
    tensors = llama2_7b_tensors()
    names = list(tensors)
    half = names.index("model.layers.16.self_attn.q_proj.weight")
    shards = {"model-00001-of-00002.safetensors": dict((n, tensors[n]) for n in names[:half]),
              "model-00002-of-00002.safetensors": dict((n, tensors[n]) for n in names[half:])}
    files: dict[str, bytes | Blob] = {"config.json": LLAMA2}
    weight_map = {}
    for shard, part in shards.items():
        prefix, data_bytes = header_prefix(part, {"format": "pt"})
        files[shard] = Blob(prefix, len(prefix) + data_bytes)  # headers only: 13 GB of zeros
        weight_map.update(dict.fromkeys(part, shard))
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": 2 * LLAMA2_PARAMS}, "weight_map": weight_map}).encode()
    return files


@pytest.fixture
def hub(tmp_path, monkeypatch):
    server = FakeHub().start()
    server.add("meta-llama/Llama-2-7b-hf", _sharded_llama2(), tags=("v1.0",))
    server.add("acme/Llama-2-7b-ft", {"config.json": LLAMA2})  # in no library alias
    server.add("google/gemma-2-9b", {"config.json": GEMMA2, "README.md": b"# gemma"})
    server.add("org/gated", {"config.json": LLAMA2}, gated=True, allowed_token="hf_granted")
    server.add("org/gguf-only", {"model-q4_k_m.gguf": b"GGUF", "README.md": b"# gguf"})
    server.add("org/flaky", {"config.json": LLAMA2 * 40}, drop_mid_body={"config.json"})
    server.add("org/corrupt", {"config.json": LLAMA2,  # length 64, then not JSON
                               "model.safetensors": (64).to_bytes(8, "little")
                               + b"{not json at all" + bytes(200)})
    small, data_bytes = header_prefix({"w": ("F16", [4, 4])})
    server.add("org/small", {"config.json": LLAMA2, "model.safetensors": small + bytes(32)})
    server.add("org/headless", {"config.json": LLAMA2, "model.safetensors": small + bytes(32)},
               drop_mid_body={"model.safetensors"})
    # shards whose headers cannot be read (the connection drops), beside a readable index
    server.add("org/sharded-headless", _sharded_llama2(),
               drop_mid_body={"model-00001-of-00002.safetensors",
                              "model-00002-of-00002.safetensors"})
    lying = json.dumps({"w": {"dtype": "F16", "shape": [4, 4], "data_offsets": [0, 30]}})
    server.add("org/lying", {"config.json": LLAMA2, "model.safetensors":
                             len(lying).to_bytes(8, "little") + lying.encode() + bytes(30)})
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS",
                 "HF_HUB_ETAG_TIMEOUT", "KVPLAN_DEBUG", "HF_TOKEN_PATH", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    _reload_client()
    yield server
    server.stop()
    monkeypatch.undo()
    _reload_client()


def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "hf-home" / "hub"


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "100"})


def size_json(model: str):
    return invoke("size", model, "--tokens", "4096", "--format", "json")


# --- MODEL syntax ---------------------------------------------------------------------------

def test_parse_hub_ref():
    assert parse_hub_ref("hf:org/name") == HubRef("org/name", None)
    assert parse_hub_ref("hf:org/name@v1.0") == HubRef("org/name", "v1.0")
    assert parse_hub_ref("org/name@refs/pr/1") == HubRef("org/name", "refs/pr/1")
    assert parse_hub_ref("hf:gpt2") == HubRef("gpt2", None)  # legacy repos have no org
    assert parse_hub_ref("hf:org/name").rev == "main"
    assert str(parse_hub_ref("hf:Org/My_Model-1.5B@abc")) == "hf:Org/My_Model-1.5B@abc"
    assert parse_hub_ref("org/Name-1.5B").name == "name-1.5b"
    assert bare_hub_ref("org/name@v1") == HubRef("org/name", "v1")
    for not_hub in ("gpt2", "./x/y", "../a/b", "/abs/path", "a/b/c", "org/name@", "hf:org/x"):
        assert bare_hub_ref(not_hub) is None
    for bad in ("hf:", "hf:a--b/c", "hf:org/../x", "hf:org/name@", "hf:org/name.git"):
        with pytest.raises(BadInputError, match="not a Hugging Face Hub model id"):
            parse_hub_ref(bad)


# --- end to end through the CLI -------------------------------------------------------------

def test_size_hf_repo_at_tag_end_to_end(hub, tmp_path):
    res = size_json("hf:meta-llama/Llama-2-7b-hf@v1.0")
    assert res.exit_code == 0, res.output
    assert res.stderr == ""  # nothing to report: no notice, and no progress bar off a terminal
    doc = json.loads(res.stdout)
    assert doc["per_token_bytes"] == LLAMA2_TOKEN_BYTES
    assert doc["request_bytes"] == 4096 * LLAMA2_TOKEN_BYTES
    sha = hub.repos["meta-llama/Llama-2-7b-hf"].sha
    assert doc["model"]["source"] == f"hf:meta-llama/Llama-2-7b-hf@{sha} (config.json)"
    assert doc["model"]["name"] == "llama-2-7b-hf"
    assert hub.paths("GET")[0] == "/api/models/meta-llama/Llama-2-7b-hf/revision/v1.0"
    # the file is fetched at the commit the API named, so a branch moving in between cannot
    # mix two commits
    assert f"/meta-llama/Llama-2-7b-hf/resolve/{sha}/config.json" in hub.paths("GET")
    # it landed in the client's cache under HF_HOME, keyed by the commit
    snapshot = cache_dir(tmp_path) / "models--meta-llama--Llama-2-7b-hf" / "snapshots" / sha
    assert (snapshot / "config.json").read_bytes() == LLAMA2


ALIASED = """\
schema: kvplan.model/1
name: aliased-7b
aliases: [acme/Aliased-7B]
source: {repo: acme/Aliased-7B, revision: v2}
layers:
  - {kind: full, count: 2, num_kv_heads: 2, head_dim: 64}
"""


def test_bare_repo_id_prefers_library_alias_then_hub(hub, tmp_path, monkeypatch):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "aliased-7b.yaml").write_text(ALIASED)
    monkeypatch.setenv("KVPLAN_MODEL_PATH", str(tmp_path / "lib"))
    for model in ("acme/Aliased-7B", "ACME/aliased-7b", "acme/Aliased-7B@v2"):
        res = size_json(model)
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["model"]["name"] == "aliased-7b"
    assert hub.seen == []  # resolved offline, no request at all
    res = size_json("acme/Aliased-7B@v3")  # the library spec is pinned to v2: ask the Hub
    assert res.exit_code == 2 and "no model repo 'acme/Aliased-7B'" in res.stderr
    res = size_json("acme/Llama-2-7b-ft")  # no library model lists it: the Hub
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["model"]["name"] == "llama-2-7b-ft"
    assert "/api/models/acme/Llama-2-7b-ft/revision/main" in hub.paths("GET")


def test_hf_prefix_always_goes_to_the_hub(hub):
    res = size_json("hf:meta-llama/Llama-2-7b-hf")  # an alias, but hf: means the Hub
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["model"]["name"] == "llama-2-7b-hf"
    assert hub.paths("GET")[0] == "/api/models/meta-llama/Llama-2-7b-hf/revision/main"


# --- offline and unreachable -------------------------------------------------------------------

def _one_notice(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("kvplan: notice: ")
    return lines[0]


def test_server_gone_uses_cache_with_one_line_notice(hub):
    first = size_json("hf:meta-llama/Llama-2-7b-hf@v1.0")
    assert first.exit_code == 0, first.output
    url = hub.url
    hub.stop()
    again = size_json("hf:meta-llama/Llama-2-7b-hf@v1.0")
    assert again.exit_code == 0, again.output
    assert again.stdout == first.stdout
    line = _one_notice(again.stderr)
    sha = hub.repos["meta-llama/Llama-2-7b-hf"].sha
    assert f"cannot reach the Hugging Face Hub at {url}" in line
    assert f"using the cached config.json of hf:meta-llama/Llama-2-7b-hf@v1.0 " \
           f"(commit {sha[:12]})" in line


def test_offline_mode_uses_cache_without_a_request(hub, monkeypatch):
    assert size_json("hf:google/gemma-2-9b").exit_code == 0
    requests = len(hub.seen)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _reload_client()
    res = size_json("hf:google/gemma-2-9b")
    assert res.exit_code == 0, res.output
    assert len(hub.seen) == requests  # not one request
    assert "offline mode is on (HF_HUB_OFFLINE)" in _one_notice(res.stderr)


def test_pinned_commit_in_cache_needs_no_network_and_no_notice(hub):
    sha = hub.repos["google/gemma-2-9b"].sha
    assert size_json(f"hf:google/gemma-2-9b@{sha}").exit_code == 0
    hub.stop()
    res = size_json(f"hf:google/gemma-2-9b@{sha}")
    assert res.exit_code == 0, res.output
    assert res.stderr == ""  # a commit never changes: the cached file is the answer


def test_unreachable_without_cache_exits_3(hub):
    url = hub.url
    hub.stop()
    res = size_json("hf:meta-llama/Llama-2-7b-hf")
    assert res.exit_code == 3
    assert res.stdout == ""
    assert res.stderr.startswith(
        f"kvplan: error: cannot reach the Hugging Face Hub at {url} (")
    assert "there is no cached config.json of hf:meta-llama/Llama-2-7b-hf@main" in res.stderr
    assert "hint:" in res.stderr and "Traceback" not in res.stderr


def test_offline_mode_without_cache_exits_3(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _reload_client()
    res = size_json("hf:google/gemma-2-9b")
    assert res.exit_code == 3
    assert "offline mode is on (HF_HUB_OFFLINE), and there is no cached config.json" in res.stderr
    assert hub.seen == []


# --- what the Hub can answer -------------------------------------------------------------------

def test_gated_repo_without_token(hub):
    res = size_json("hf:org/gated")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        "kvplan: error: org/gated is a gated repo and no Hugging Face token is set, so its "
        "config.json cannot be read")
    assert f"accept the model's terms at {hub.url}/org/gated" in res.stderr
    assert "HF_TOKEN" in res.stderr


def test_gated_repo_with_a_token_not_granted(hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_not_granted")
    res = size_json("hf:org/gated")
    assert res.exit_code == 2
    assert "org/gated is a gated repo and the Hugging Face token in use has not been granted " \
           "access" in res.stderr
    # HF_TOKEN reached the server through the client
    gets = [s for s in hub.seen if "/resolve/" in s.path]
    assert gets and gets[0].headers["authorization"] == "Bearer hf_not_granted"


def test_gated_repo_with_a_granted_token(hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_granted")
    res = size_json("hf:org/gated")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["per_token_bytes"] == LLAMA2_TOKEN_BYTES


def test_missing_repo(hub):
    res = size_json("hf:org/does-not-exist")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        f"kvplan: error: no model repo 'org/does-not-exist' on {hub.url}")
    assert "gated" not in res.stderr


def test_missing_revision(hub):
    res = size_json("hf:google/gemma-2-9b@v9")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        f"kvplan: error: google/gemma-2-9b has no revision 'v9' on {hub.url}")


def test_repo_without_config_json(hub):
    res = size_json("hf:org/gguf-only")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        "kvplan: error: hf:org/gguf-only@main has no config.json "
        "(its files: README.md, model-q4_k_m.gguf)")


def test_connection_dropped_mid_download(hub, tmp_path):
    out = tmp_path / "flaky.yaml"
    res = invoke("import", "hf:org/flaky", "-o", str(out))
    assert res.exit_code == 3
    line, hint = res.stderr.splitlines()  # the client's retry warnings stay quiet
    assert hint.startswith("  hint: try again")
    assert line.startswith(f"kvplan: error: lost the connection to the Hugging Face Hub at "
                           f"{hub.url} while downloading config.json of hf:org/flaky@main (")
    assert line.endswith("; nothing was written to the cache")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".flaky")] == []
    blobs = cache_dir(tmp_path) / "models--org--flaky" / "blobs"
    assert not blobs.exists() or list(blobs.iterdir()) == []  # no partial file left behind
    assert len([p for p in hub.paths("GET") if p.endswith("/config.json")]) == 1


# --- kvplan import ---------------------------------------------------------------------------

def test_import_writes_yaml_that_loads_back(hub, tmp_path):
    from kvplan.sources.library import resolve
    from kvplan.sources.yamlspec import load_yaml_file

    out = tmp_path / "gemma-2-9b.yaml"
    res = invoke("import", "hf:google/gemma-2-9b", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert res.stdout == ""
    loaded = load_yaml_file(out)
    fetched = resolve("hf:google/gemma-2-9b")
    assert loaded.layers == fetched.layers
    assert loaded.kind_counts() == {"sliding": 21, "full": 21}
    assert loaded.source.repo == "google/gemma-2-9b"
    assert loaded.source.revision == hub.repos["google/gemma-2-9b"].sha
    assert loaded.source.sha256 == hashlib.sha256(GEMMA2).hexdigest()
    assert loaded.aliases == ("google/gemma-2-9b",)
    # no safetensors in that repo: an estimate, printed, but not recorded as num_params
    assert loaded.num_params is None
    assert "(an estimate from config.json" in res.stderr
    assert f"kvplan: wrote {out} (gemma-2-9b, 42 layers)" in res.stderr


def test_import_counts_weights_from_sharded_safetensors_headers(hub):
    res = invoke("import", "hf:meta-llama/Llama-2-7b-hf@v1.0")
    assert res.exit_code == 0, res.output
    import yaml

    doc = yaml.safe_load(res.stdout)
    assert doc["num_params"] == LLAMA2_PARAMS
    assert doc["source"]["revision"] == hub.repos["meta-llama/Llama-2-7b-hf"].sha
    assert doc["source"]["file"] == "config.json"
    assert (f"Weights: {LLAMA2_PARAMS:,} parameters, {2 * LLAMA2_PARAMS:,} bytes"
            in res.stderr)
    assert "exact, from the safetensors headers of 2 files" in res.stderr
    # the published checkpoint block: bytes per dtype summed from the two headers (all fp16:
    # 2 bytes per parameter), with where they were read
    sha = hub.repos["meta-llama/Llama-2-7b-hf"].sha
    assert doc["checkpoint"] == {
        "bytes": {"F16": 2 * LLAMA2_PARAMS},
        "source": f"the safetensors headers of 2 files of hf:meta-llama/Llama-2-7b-hf@{sha}"}
    # headers were read with HTTP range requests, never the 13 GB of weights
    ranged = [s for s in hub.seen if s.path.endswith(".safetensors") and s.method == "GET"]
    assert ranged and all(s.headers.get("range", "").startswith("bytes=") for s in ranged)


def test_import_corrupt_safetensors_header(hub, tmp_path):
    out = tmp_path / "corrupt.yaml"
    res = invoke("import", "hf:org/corrupt", "-o", str(out))
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        "kvplan: error: hf:org/corrupt@main model.safetensors: has a corrupt safetensors "
        "header: header is not json-encoded string")
    assert not out.exists()


def test_import_single_file_header(hub):
    res = invoke("import", "hf:org/small")
    assert res.exit_code == 0, res.output
    assert "Weights: 16 parameters, 32 bytes" in res.stderr  # 4 x 4 fp16


def test_import_estimates_when_the_headers_cannot_be_read(hub):
    res = invoke("import", "hf:org/headless")
    assert res.exit_code == 0, res.output
    notice, weights = res.stderr.splitlines()
    assert notice == ("kvplan: notice: could not read the safetensors headers of "
                      "hf:org/headless@main (Server disconnected without sending a response.); "
                      "weights are estimated from config.json")
    assert weights.startswith(f"kvplan: Weights: {LLAMA2_PARAMS:,} parameters")
    assert "num_params" not in res.stdout


def test_import_records_the_index_total_when_the_headers_cannot_be_read(hub):
    """The shard headers are unreadable but model.safetensors.index.json is there: its
    metadata.total_size (2 x the Llama-2-7B parameters above, all fp16) is recorded as the
    published checkpoint's total; num_params stays unknown (an estimate is only printed)."""
    import yaml

    res = invoke("import", "hf:org/sharded-headless")
    assert res.exit_code == 0, res.output
    assert "could not read the safetensors headers" in res.stderr
    doc = yaml.safe_load(res.stdout)
    sha = hub.repos["org/sharded-headless"].sha
    assert doc["checkpoint"] == {
        "bytes": {"total": 2 * LLAMA2_PARAMS},
        "source": f"model.safetensors.index.json metadata.total_size of "
                  f"hf:org/sharded-headless@{sha}"}
    assert "num_params" not in doc


def test_import_without_headers_or_index_records_no_checkpoint(hub):
    res = invoke("import", "hf:org/headless")  # one unreadable file, no index
    assert res.exit_code == 0, res.output
    assert "checkpoint" not in res.stdout


def test_import_header_whose_offsets_do_not_match_the_shape(hub):
    res = invoke("import", "hf:org/lying")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        "kvplan: error: hf:org/lying@main model.safetensors: field 'w.data_offsets': span 30 "
        "bytes but shape [4, 4] of F16 needs 32")


# --- no Hub client unless a Hub model is asked for ---------------------------------------------

HUB_MODULES = ("huggingface_hub", "httpx2", "httpx", "kvplan.sources.hub")


def _loaded(*argv: str, env: dict[str, str] | None = None) -> tuple[list[str], str]:
    result = probe(list(argv), HUB_MODULES, env)
    return result.loaded, result.stdout


@pytest.mark.parametrize("argv", [
    ("--help",), ("size", "llama-3.1-8b"), ("size", "meta-llama/Llama-3.1-8B", "-f", "json"),
    ("show", "llama-3.1-8b"), ("import", "--help"),
])
def test_library_models_and_help_never_import_the_hub_client(argv):
    loaded, stdout = _loaded(*argv)
    assert "huggingface_hub" not in loaded and "httpx" not in loaded, loaded
    assert stdout.strip()  # the command ran: an early error would import nothing either


def test_a_fresh_process_takes_the_hub_settings_from_its_environment(hub, tmp_path):
    # No reload here: a new `kvplan` process reads HF_ENDPOINT and HF_HOME like any Hub tool.
    home = tmp_path / "other-home"
    loaded, stdout = _loaded("size", "hf:google/gemma-2-9b", "-t", "8k", "-f", "json",
                             env={"HF_ENDPOINT": hub.url, "HF_HOME": str(home)})
    assert "huggingface_hub" in loaded
    assert json.loads(stdout)["model"]["name"] == "gemma-2-9b"
    assert list((home / "hub").glob("models--google--gemma-2-9b/snapshots/*/config.json"))


def test_progress_spinner_only_on_a_terminal(hub, monkeypatch, capsys):
    from kvplan.sources.hub import fetch_config

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    fetched = fetch_config(HubRef("google/gemma-2-9b"))
    assert fetched.data == GEMMA2
    assert "Fetching config.json of hf:google/gemma-2-9b@main" in tty.getvalue()
    assert capsys.readouterr().out == ""  # never on stdout
