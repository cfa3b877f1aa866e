"""Small real GGUF files for tests, written with llama.cpp's own writer (the gguf package):
the keys a test names, under the architecture's prefix, and two tensors (an f16 embedding
and one Q8_0 projection) so that a weight inventory can be read from the tensor infos."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def write_gguf(path: Path, arch: str, keys: dict[str, Any], tensors: bool = True,
               tokenizer: bool = False, name: str | None = None) -> Path:
    """A GGUF file at `path`: each key `name: value` as `{arch}.{name}` (a `general.*` key as
    it is), a list as an array, text as a string, a number as uint32; `tokenizer` adds a
    four-token llama vocabulary, `name` the general.name key."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    w = gguf.GGUFWriter(str(path), arch)
    if name is not None:
        w.add_name(name)
    for key, value in keys.items():
        full = key if key.startswith("general.") else f"{arch}.{key}"
        if isinstance(value, list):
            w.add_array(full, value)
        elif isinstance(value, str):
            w.add_string(full, value)
        else:
            w.add_uint32(full, int(value))
    if tokenizer:
        w.add_tokenizer_model("llama")
        w.add_token_list([b"<s>", b"</s>", b"a", b"b"])
        w.add_token_scores([0.0, 0.0, -1.0, -2.0])
    if tensors:
        w.add_tensor("token_embd.weight", np.zeros((8, 64), dtype=np.float16))
        q = gguf.quants.quantize(np.zeros((4, 64), dtype=np.float32),
                                 gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("blk.0.attn_q.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
