#!/usr/bin/env bash
# Gate throughput on one core (criterion). Prints decisions/s for each case.
set -euo pipefail
cd "$(dirname "$0")/.."
taskset -c 0 cargo bench --bench gate -- --warm-up-time 2 --measurement-time 5 "$@" 2>&1 | tee "${CARGO_TARGET_DIR:-target}/bench-gate.txt" | grep -E "^gate/|thrpt|time:"
