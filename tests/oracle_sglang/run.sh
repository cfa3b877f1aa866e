#!/usr/bin/env bash
# The differential test against SGLang 0.5.23's own KV-pool sizing: builds its environment
# (setup.sh) and runs the harness; prints the count of equal cases and fails on any
# unexplained difference. Arguments go to run_oracle.py (--quick, --model NAME, --json F).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/oracle_sglang/setup.sh
PYTHONPATH="$PWD/.oracle-sglang" .oracle-sglang-venv/bin/python tests/oracle_sglang/run_oracle.py "$@"
