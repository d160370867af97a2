#!/usr/bin/env bash
# The test command (README): formatting, lints, then every test (unit, property, integration,
# doc). Runs on a fresh machine with the Rust toolchain, Python's pip and apt: the tests run the
# real demo model, which scripts/fetch-model.sh fetches once (and verifies) before they start,
# and real shells, which scripts/install-test-deps.sh installs when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
scripts/fetch-model.sh
scripts/install-test-deps.sh
cargo test --locked
