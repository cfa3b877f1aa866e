#!/usr/bin/env bash
# The differential test against llama.cpp's own binaries: builds them once (setup.sh) and runs
# the harness with the project's environment (PYTHON, default .venv/bin/python: kvplan and the
# gguf package); prints the count of equal runs and fails on any unexplained difference.
# Arguments go to run_oracle.py (--quick, --model NAME, --json F).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/oracle_llamacpp/setup.sh
"${PYTHON:-.venv/bin/python}" tests/oracle_llamacpp/run_oracle.py "$@"
