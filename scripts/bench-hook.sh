#!/usr/bin/env bash
# The hook's cost for calls the gate settles, with the embedded default (no config file): wall
# time per hook process and its peak RSS, for a Claude Code `PreToolUse` the gate allows
# (`git status`) and one it denies (`rm -rf ~`).
#
# No model may be loaded for such a call, so the model directory is pointed at an empty one: had
# the hook needed the model, it would answer "could not decide" instead, and this script stops.
#
#   scripts/bench-hook.sh                       # builds the release binary, 200 timed runs per call
#   PERMIT_BIN=target/release/permit RUNS=500 scripts/bench-hook.sh
#
# Timing: a loop timing each hook process with bash's `$EPOCHREALTIME` (bash 5), and hyperfine
# too when it is installed (Debian: `apt-get install hyperfine`; it runs the command through a
# shell for the stdin redirect and subtracts the shell's start-up). Peak RSS comes from GNU time
# (`/usr/bin/time -v`, Debian package `time`).
# Benchmarks measure; nothing here asserts a speed.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${RUNS:-200}"
if [[ -z "${PERMIT_BIN:-}" ]]; then
  cargo build --release --bin permit >&2
  target_dir="$(cargo metadata --format-version 1 --no-deps | grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)"
  PERMIT_BIN="$target_dir/release/permit"
fi
if [[ ! -x /usr/bin/time ]]; then
  echo "bench-hook: needs GNU time at /usr/bin/time (apt-get install time)" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/no-models"
export PERMIT_MODEL_DIR="$work/no-models"
unset PERMIT_CONFIG PERMIT_TOKEN

transcript="$PWD/tests/fixtures/claude-code/intent.jsonl"
input_for() {
  printf '{"session_id":"bench","transcript_path":"%s","cwd":"/workspace","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"%s","description":"bench"},"tool_use_id":"toolu_bench"}' \
    "$transcript" "$1"
}
input_for "git status" >"$work/allow.json"
input_for "rm -rf ~" >"$work/deny.json"

echo "binary: $PERMIT_BIN"
echo "config: embedded default; model directory: empty ($PERMIT_MODEL_DIR)"
for call in allow deny; do
  answer="$("$PERMIT_BIN" hook claude-code <"$work/$call.json")"
  echo "$call: $answer"
  if ! grep -q "\"permissionDecision\":\"$call\"" <<<"$answer" || grep -q "could not decide" <<<"$answer"; then
    echo "bench-hook: the gate did not settle the $call call on its own" >&2
    exit 1
  fi
done

peak_rss_kib() {
  local worst=0 rss
  for _ in $(seq 20); do
    rss="$(/usr/bin/time -v "$PERMIT_BIN" hook claude-code <"$1" 2>&1 >/dev/null | awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}')"
    ((rss > worst)) && worst="$rss"
  done
  echo "$worst"
}

# Wall time of each hook process (fork, exec, read stdin, decide, print), measured here with no
# other process in the span: mean, median, 95th percentile and maximum.
time_runs() {
  local samples="$work/$2-samples.txt" start
  : >"$samples"
  for _ in $(seq 5); do "$PERMIT_BIN" hook claude-code <"$1" >/dev/null; done
  for _ in $(seq "$runs"); do
    # bash's own clock (microseconds): no extra process inside the measured span.
    start="${EPOCHREALTIME/[.,]/}"
    "$PERMIT_BIN" hook claude-code <"$1" >/dev/null
    echo $((${EPOCHREALTIME/[.,]/} - start)) >>"$samples"
  done
  sort -n "$samples" | awk '{ t[NR] = $1; sum += $1 } END {
    printf "wall time per hook process (%d runs): mean %.2f ms, median %.2f ms, p95 %.2f ms, max %.2f ms\n",
      NR, sum / NR / 1e3, t[int((NR + 1) / 2)] / 1e3, t[int(NR * 0.95)] / 1e3, t[NR] / 1e3 }'
}

for call in allow deny; do
  echo
  echo "== $call call"
  time_runs "$work/$call.json" "$call"
  rss="$(peak_rss_kib "$work/$call.json")"
  awk -v rss="$rss" 'BEGIN { printf "peak RSS (worst of 20 runs, /usr/bin/time -v): %d KiB (%.1f MiB)\n", rss, rss / 1024 }'
  if command -v hyperfine >/dev/null 2>&1; then
    hyperfine --warmup 20 --runs "$runs" "$PERMIT_BIN hook claude-code < $work/$call.json"
  fi
done
