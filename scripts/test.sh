#!/usr/bin/env bash
# The test command (README): formatting, lints, then every test (unit, property, integration,
# doc). Runs on a fresh machine with only the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked
