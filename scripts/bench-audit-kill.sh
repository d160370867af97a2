#!/usr/bin/env bash
# kill -9 under load, per `server.audit_sync` mode (issue 14, item 6): how many decisions a client
# got an answer for are missing from the audit log, and what each mode costs in throughput.
#
# Gate-only requests (a Read call in mode auto: no model needed), release build, loopback, wrk
# (Debian package `wrk`). Per mode:
#   - throughput: wrk for $DURATION at $CONNECTIONS connections; requests/s and p99;
#   - loss: $KILLS times, start `permit serve`, load it with wrk (every request has its own call
#     id, and wrk's Lua records the id of every answered request), kill -9 the server after
#     $KILL_AFTER seconds, then count answered ids with no line in the log, and check that the
#     log ends at a line boundary.
# A kill -9 tests the process dying, not the machine: what write(2) handed to the kernel
# survives it. `decision` also fsyncs before answering, for power loss, which this cannot show.
# Knobs (environment): DURATION, CONNECTIONS, KILLS, KILL_AFTER, MODES, PERMIT (another binary,
# e.g. a build from before a change, with MODES=default).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
  if [[ "$(id -u)" == 0 ]]; then apt-get update -qq && apt-get install -y -qq wrk >/dev/null; else
    echo "bench-audit-kill: needs wrk (apt-get install wrk)" >&2; exit 1; fi
fi
DURATION="${DURATION:-10}"       # seconds of the throughput run
CONNECTIONS="${CONNECTIONS:-64}"
KILLS="${KILLS:-5}"              # kill -9 runs per mode
KILL_AFTER="${KILL_AFTER:-2}"    # seconds of load before the kill
# `default` writes no audit_sync key: the mode a binary uses by default (for an older binary).
MODES="${MODES:-interval decision}"
# Another binary to measure (a build from before a change); by default this tree's release build.
PERMIT="${PERMIT:-}"
if [[ -z "$PERMIT" ]]; then cargo build --release --quiet --bin permit; PERMIT=target/release/permit; fi
work="target/bench-audit-kill"
rm -rf "$work" && mkdir -p "$work"
server_pid=""
cleanup() { if [[ -n "$server_pid" ]]; then kill -9 "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

# Every request gets a fresh call id (thread-counter); every answered one is appended to the
# thread's ids file, line-buffered so the file is complete however the run ends.
cat > "$work/ids.lua" <<'LUA'
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
function init(args)
  counter = 0
  ids = io.open(args[1] .. "/answered-" .. tid .. ".txt", "w")
  ids:setvbuf("line")
end
function request()
  counter = counter + 1
  local body = '{"session_id":"bench","cwd":"/workspace","pending":[{"id":"t' .. tid .. '-' .. counter ..
    '","name":"Read","input":{"file_path":"/workspace/src/lib.rs"}}]}'
  return wrk.format("POST", "/v1/decide", {["Content-Type"] = "application/json"}, body)
end
function response(status, headers, body)
  if status == 200 then
    local id = string.match(body, '"id":"(t[0-9]+%-[0-9]+)"')
    if id then ids:write(id, "\n") end
  end
end
LUA

# Starts the server for $1 = mode with its log in $2 = directory; sets server_pid and address.
start_server() {
  cat > "$2/permit.toml" <<TOML
mode = "auto"
[server]
audit_log = "$2/audit.jsonl"
max_concurrency = 256
TOML
  if [[ "$1" != default ]]; then echo "audit_sync = \"$1\"" >> "$2/permit.toml"; fi
  : > "$2/server.log"
  "$PERMIT" serve --config "$2/permit.toml" --bind 127.0.0.1:0 2> "$2/server.log" &
  server_pid=$!
  address=""
  for _ in $(seq 1 200); do
    address=$(sed -n 's/^permit: listening on //p' "$2/server.log" | head -n1)
    [[ -n "$address" ]] && return 0
    sleep 0.05
  done
  echo "bench-audit-kill: the server did not start:" >&2; cat "$2/server.log" >&2; exit 1
}

echo "audit log on $(df -T "$work" | awk 'NR==2 {print $2}'), $(nproc) cores, $CONNECTIONS connections"
for mode in $MODES; do
  echo "== audit_sync = \"$mode\""
  run="$work/$mode-throughput"; mkdir -p "$run"
  start_server "$mode" "$run"
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$work/ids.lua" "$address/v1/decide" -- "$run" > "$run/wrk.txt"
  kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
  awk -v lines="$(cat "$run"/audit.jsonl* | wc -l)" -v answers="$(cat "$run"/answered-*.txt | wc -l)" '
    /Requests\/sec/ {rate = $2} /^ +99%/ {p99 = $2} /Non-2xx/ {errors = $NF}
    END {printf "  throughput: %s requests/s, p99 %s, non-2xx %d; %d lines in the log for %d answers\n",
         rate, p99, errors, lines, answers}' "$run/wrk.txt"

  total_answered=0; total_lost=0; losses=()
  for kill_run in $(seq 1 "$KILLS"); do
    run="$work/$mode-kill-$kill_run"; mkdir -p "$run"
    start_server "$mode" "$run"
    # wrk outlives the server: after the kill its connections fail until the run ends.
    wrk -t2 -c"$CONNECTIONS" -d"$((KILL_AFTER + 1))s" -s "$work/ids.lua" "$address/v1/decide" -- "$run" > "$run/wrk.txt" 2>&1 &
    wrk_pid=$!
    sleep "$KILL_AFTER"
    kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
    wait "$wrk_pid" || true
    sort -u "$run"/answered-*.txt > "$run/answered.txt"
    # The call ids of the log's whole lines (a torn last line is no record).
    python3 - "$run/audit.jsonl" > "$run/logged.txt" <<'PY'
import json, sys
with open(sys.argv[1], "rb") as log:
    for line in log:
        if line.endswith(b"\n"):
            record = json.loads(line).get("record")
            if record:
                print(record["decision"]["id"])
PY
    sort -u -o "$run/logged.txt" "$run/logged.txt"
    answered=$(wc -l < "$run/answered.txt")
    lost=$(comm -23 "$run/answered.txt" "$run/logged.txt" | wc -l)
    if [[ ! -s "$run/audit.jsonl" || "$(tail -c1 "$run/audit.jsonl" | od -An -c | tr -d ' ')" == '\n' ]]; then
      torn=""; else torn=" (the log ends in a torn line: cut at the next start)"; fi
    total_answered=$((total_answered + answered)); total_lost=$((total_lost + lost)); losses+=("$lost")
    echo "  kill -9 #$kill_run: $answered answered, $lost answered but not in the log$torn"
  done
  echo "  loss per kill: ${losses[*]} (total $total_lost of $total_answered answered)"
done
