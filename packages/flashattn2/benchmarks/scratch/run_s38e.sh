#!/usr/bin/env bash
# Session 38, call 5: the forward's local-memory test and the head-dim-256 tests at the final code.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
PYTHONPATH=packages/flashattn2/src timeout 300 python -m pytest packages/flashattn2/tests/test_gpu.py -m gpu -n 4 -q -p no:cacheprovider \
  -k "registers or 256" 2>&1 | tail -8 | tee "$OUT/tests-final.log"
