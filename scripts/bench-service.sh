#!/usr/bin/env bash
# The service under load (issue 6), with wrk (Debian package `wrk`) on this machine:
#   (a) gate-only decisions (a Read call, a safe shell command) at 64 connections;
#   (b) classified calls screened by an instant fake model server on loopback, reporting the
#       service's own overhead: end-to-end latency minus the screen stage's model time.
# Prints requests/s, p50, p99 and errors per case. The audit log is on, as in production.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
  if [[ "$(id -u)" == 0 ]]; then apt-get update -qq && apt-get install -y -qq wrk >/dev/null; else
    echo "bench-service: needs wrk (apt-get install wrk)" >&2; exit 1; fi
fi
DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-64}"
cargo build --release --quiet --bin permit --example fake_model
work="target/bench-service"
rm -rf "$work" && mkdir -p "$work"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_for() { for _ in $(seq 1 100); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; echo "not up: $1" >&2; exit 1; }

lua() { # $1 = request body (JSON)
  cat <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[$1]]
LUA
}

run_case() { # $1 = name, $2 = port, $3 = body
  lua "$3" > "$work/$1.lua"
  echo "== $1 ($CONNECTIONS connections, $DURATION)"
  wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -s "$work/$1.lua" "http://127.0.0.1:$2/v1/decide" > "$work/$1.txt"
  awk '/Requests\/sec/ {print "  requests/s: " $2}
       /^ +50%/ {print "  p50: " $2}
       /^ +99%/ {print "  p99: " $2}
       /Non-2xx/ {print "  non-2xx responses: " $NF}
       /Socket errors/ {print "  socket errors: " $0}' "$work/$1.txt"
  grep -q "Non-2xx" "$work/$1.txt" || echo "  non-2xx responses: 0"
  grep -q "Socket errors" "$work/$1.txt" || echo "  socket errors: none"
}

# (a) gate only.
cat > "$work/gate.toml" <<TOML
[server]
bind = "127.0.0.1:18801"
audit_log = "$work/gate-audit.jsonl"
max_concurrency = 256
TOML
target/release/permit serve --config "$work/gate.toml" 2> "$work/gate.log" & pids+=($!)
wait_for http://127.0.0.1:18801/healthz
run_case gate-read 18801 '{"session_id":"b","cwd":"/workspace","pending":[{"id":"c1","name":"Read","input":{"file_path":"/workspace/src/lib.rs"}}]}'
run_case gate-shell 18801 '{"session_id":"b","cwd":"/workspace","pending":[{"id":"c1","name":"Bash","input":{"command":"git status && ls -la src"}}]}'
echo "  audit lines written: $(cat "$work"/gate-audit.jsonl* | wc -l)"

# (b) classified, against an instant fake model: at 64 connections (saturated: latency is mostly
# queueing, concurrency / throughput) and at 4 (unsaturated: the service's own cost).
target/release/examples/fake_model 127.0.0.1:18803 2> "$work/fake.log" & pids+=($!)
port=18810
for connections in 64 4; do
  port=$((port + 1))
  cat > "$work/screen-$connections.toml" <<TOML
[screen]
allow_threshold_percent = 95
[screen.model]
backend = "openai"
base_url = "http://127.0.0.1:18803/v1"
model = "bench"
[server]
bind = "127.0.0.1:$port"
audit_log = "$work/screen-$connections/audit.jsonl"
max_concurrency = 256
TOML
  target/release/permit serve --config "$work/screen-$connections.toml" 2> "$work/screen-$connections.log" & pids+=($!)
  wait_for "http://127.0.0.1:$port/healthz"
  CONNECTIONS=$connections run_case "screened-c$connections" "$port" '{"session_id":"b","cwd":"/workspace","transcript":[{"type":"user","text":"run the tests"}],"pending":[{"id":"c1","name":"Bash","input":{"command":"cargo test"}}]}'
  kill -TERM "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
  # Model time per call, from the audit log: the screen stage's own latency (HTTP round trip
  # to the fake included). Overhead = the end-to-end p50 minus the median model time.
  p50_ms=$(awk '/^ +50%/ {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; print v}' "$work/screened-c$connections.txt")
  python3 - "$work/screen-$connections" "$p50_ms" <<'PY'
import json, pathlib, statistics, sys
directory, p50 = pathlib.Path(sys.argv[1]), float(sys.argv[2])
model = [json.loads(line)["record"]["screen"]["latency_ms"] for f in sorted(directory.glob("audit.jsonl*")) for line in f.open()]
median = statistics.median(model)
allowed = sum(1 for _ in model)
print(f"  screened calls: {len(model)}; median model time {median:.3f} ms; overhead p50 = {p50:.3f} - {median:.3f} = {p50 - median:.3f} ms")
PY
done
