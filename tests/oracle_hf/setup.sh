#!/usr/bin/env bash
# Build the transformers oracle's own environment (never the project's): .oracle-hf-venv with
# torch 2.13.0 CPU, transformers 5.24.0 and the QuantizedCache backends (optimum-quanto, hqq),
# plus kvplan's own dependencies (the harness imports kvplan from this tree). Idempotent: a
# finished environment is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
start=$SECONDS
if [ ! -f .oracle-hf-venv/.ready ]; then
  rm -rf .oracle-hf-venv
  "$PY" -m venv .oracle-hf-venv
  .oracle-hf-venv/bin/pip install --quiet -r tests/oracle_hf/requirements.txt
  touch .oracle-hf-venv/.ready
fi
echo "transformers oracle: environment ready in $((SECONDS - start)) s"
