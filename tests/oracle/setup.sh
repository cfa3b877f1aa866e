#!/usr/bin/env bash
# Build the vLLM oracle's own environment (never the project's): .oracle-venv with torch and
# the pure-Python packages vLLM's imports need, and .oracle-vllm with only the *.py files of
# vLLM 0.33.0's wheel (downloaded here, never committed). Idempotent: a finished environment
# is kept. ORACLE_DOWNLOAD_DIR reuses a download folder (default .oracle-download).
set -euo pipefail
cd "$(dirname "$0")/../.."
VLLM_VERSION=0.33.0
FLASHINFER_VERSION=0.7.2.post1
DL=${ORACLE_DOWNLOAD_DIR:-.oracle-download}
PY=${PYTHON:-python3}

if [ ! -f .oracle-venv/.ready ]; then
  rm -rf .oracle-venv
  "$PY" -m venv .oracle-venv
  .oracle-venv/bin/pip install --quiet -r tests/oracle/requirements.txt \
    -c tests/oracle/constraints.txt
  touch .oracle-venv/.ready
fi

mkdir -p "$DL"
WHEEL="$DL/vllm-$VLLM_VERSION-cp38-abi3-manylinux_2_28_x86_64.whl"
[ -f "$WHEEL" ] || .oracle-venv/bin/pip download --quiet --no-deps -d "$DL" "vllm==$VLLM_VERSION"
FI="$DL/flashinfer_python-$FLASHINFER_VERSION-py3-none-any.whl"
[ -f "$FI" ] || .oracle-venv/bin/pip download --quiet --no-deps -d "$DL" \
  "flashinfer-python==$FLASHINFER_VERSION"
if ! .oracle-venv/bin/python -c "import flashinfer" 2>/dev/null; then
  .oracle-venv/bin/pip install --quiet --no-deps "$FI"
fi

if [ ! -f .oracle-vllm/.ready ]; then
  rm -rf .oracle-vllm
  .oracle-venv/bin/python - "$WHEEL" .oracle-vllm <<'PY'
import sys
import zipfile

wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".py") and n.startswith("vllm/")]
    z.extractall(out, members=names)
print(f"{len(names)} vLLM .py files in {out}")
PY
  touch .oracle-vllm/.ready
fi
