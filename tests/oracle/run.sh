#!/usr/bin/env bash
# The differential test against vLLM 0.33.0's own KV-cache planner: builds its environment
# (setup.sh) and runs the harness; prints the count of equal cases and fails on any
# unexplained difference. Arguments go to run_oracle.py (--quick, --model NAME, --json F).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/oracle/setup.sh
# kvplan's reach over the wheel's generation registry ("N of 274 architectures read, ...")
python3 tests/oracle/registry.py
PYTHONPATH="$PWD/.oracle-vllm" .oracle-venv/bin/python tests/oracle/run_oracle.py "$@" \
  2> >(grep -v -e "vLLM package was not found" -e "Triton is installed" \
             -e "Failed to import from vllm._C" >&2)
