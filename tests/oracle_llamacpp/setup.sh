#!/usr/bin/env bash
# Build llama.cpp's llama-completion and llama-perplexity for the CPU, once and minimally: the
# llama library, ggml's CPU backend and the two tools (no server, tests, examples, shared
# libraries or network code). llama-perplexity is there for `--kv-unified`, which
# llama-completion does not take (common/arg.cpp). The source is llama.cpp as vendored by the
# llama-cpp-python sdist pinned below (llama.cpp commit 0c1e57098bba, 2026-10-01). Prints the
# build time. Idempotent: a finished build (.oracle-llamacpp/.ready) is kept, and an
# interrupted one resumes. ORACLE_DOWNLOAD_DIR reuses a download folder.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLAMA_CPP_PYTHON_VERSION=0.3.36
DL=${ORACLE_DOWNLOAD_DIR:-.oracle-download}
PY=${PYTHON:-python3}
OUT=.oracle-llamacpp
JOBS=${ORACLE_JOBS:-$(nproc)}

if [ -f "$OUT/.ready" ]; then
  exit 0
fi
start=$SECONDS
mkdir -p "$DL"
SDIST="$DL/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
  "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-python -d "$DL" \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
fi
if [ ! -d "$OUT/src/vendor/llama.cpp" ]; then
  mkdir -p "$OUT/src"
  tar -xzf "$SDIST" -C "$OUT/src" --strip-components=1 \
    "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  rm -f "$OUT/src/vendor/llama.cpp/.git"  # a submodule pointer to a repository not here
fi
cmake -S "$OUT/src/vendor/llama.cpp" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
  > "$OUT/cmake.log" 2>&1
cmake --build "$OUT/build" -j"$JOBS" --target llama-completion llama-perplexity \
  > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
cp "$OUT/build/bin/llama-completion" "$OUT/build/bin/llama-perplexity" "$OUT/"
touch "$OUT/.ready"
echo "llama.cpp oracle: llama-completion and llama-perplexity built in $((SECONDS - start)) s" \
  "($JOBS jobs)"
