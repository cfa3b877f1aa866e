#!/usr/bin/env bash
# Build the SGLang oracle's own environment (never the project's): .oracle-sglang-venv with
# torch (CPU) and the packages SGLang's imports need, and .oracle-sglang with SGLang 0.5.23's
# whole wheel unpacked (its jit package looks for non-.py files at import; downloaded here,
# never committed). Idempotent: a finished environment is kept. ORACLE_DOWNLOAD_DIR reuses a
# download folder (default .oracle-download, shared with the vLLM oracle).
set -euo pipefail
cd "$(dirname "$0")/../.."
SGLANG_VERSION=0.5.23
DL=${ORACLE_DOWNLOAD_DIR:-.oracle-download}
PY=${PYTHON:-python3}

if [ ! -f .oracle-sglang-venv/.ready ]; then
  rm -rf .oracle-sglang-venv
  "$PY" -m venv .oracle-sglang-venv
  .oracle-sglang-venv/bin/pip install --quiet -r tests/oracle_sglang/requirements.txt \
    -c tests/oracle_sglang/constraints.txt
  touch .oracle-sglang-venv/.ready
fi

mkdir -p "$DL"
WHEEL=$(ls "$DL"/sglang-$SGLANG_VERSION-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$WHEEL" ]; then
  .oracle-sglang-venv/bin/pip download --quiet --no-deps -d "$DL" "sglang==$SGLANG_VERSION"
  WHEEL=$(ls "$DL"/sglang-$SGLANG_VERSION-*.whl | head -n 1)
fi

if [ ! -f .oracle-sglang/.ready ]; then
  rm -rf .oracle-sglang
  .oracle-sglang-venv/bin/python -m zipfile -e "$WHEEL" .oracle-sglang
  touch .oracle-sglang/.ready
fi
