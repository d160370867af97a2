#!/usr/bin/env bash
# The embedded model (issue 5): load time, prompt tokens/s, cold and warm decision latency,
# peak RSS, and the demo model's P(allow) on a few benign and harmful calls; then a trained-head
# decision (issue 18) at about 150 and 350 prompt tokens with examples/head-smollm2-135m.json.
# PERMIT_BENCH_MODEL=path.gguf measures another model (PERMIT_BENCH_HEAD=head.json its head).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PERMIT_BENCH_MODEL:-}" ]]; then
  scripts/fetch-model.sh
fi
cargo bench --bench local_model 2>&1 | tee target/bench-local.txt | grep -vE "^\s+(Compiling|Finished|Running)"
