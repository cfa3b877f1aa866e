#!/usr/bin/env bash
# The differential test against transformers 5.24.0's own cache objects: builds its
# environment (setup.sh) and runs the harness; prints the count of equal cases and fails on
# any unexplained difference. Arguments go to run_oracle.py (--quick, --model NAME, --json F).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/oracle_hf/setup.sh
PYTHONWARNINGS=ignore .oracle-hf-venv/bin/python tests/oracle_hf/run_oracle.py "$@"
