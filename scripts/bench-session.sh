#!/usr/bin/env bash
# What the session store costs (issue 17), on loopback, with wrk and redis-server (Debian packages
# `wrk` and `redis-server`; installed if missing and running as root):
#   (a) the cost per classified decision, memory vs Redis: a classified call screened by an
#       instant fake model (examples/fake_model.rs), at 1 and 8 connections; p50/p99 of each
#       store, their difference, and the Redis store's own mean time per operation from
#       /metrics (a screened allow does two: read the session's counts, reset its streak);
#   (b) throughput of two replicas sharing one Redis (one wrk each, at once) against one replica
#       with the same total connections.
# A benchmark, not a test: it prints figures and asserts nothing. DURATION and CONNECTIONS
# (for b) may be set; PERMIT=… runs another build.
set -euo pipefail
cd "$(dirname "$0")/.."
need() { # $1 = command, $2 = Debian package
  command -v "$1" >/dev/null && return 0
  if [[ "$(id -u)" == 0 ]]; then apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; else
    echo "bench-session: needs $1 (apt-get install $2)" >&2; exit 1; fi
}
need wrk wrk
need redis-server redis-server
DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-64}"
if [[ -z "${PERMIT:-}" ]]; then
  cargo build --release --quiet --bin permit --example fake_model
  PERMIT=target/release/permit
elif [[ ! -x target/release/examples/fake_model ]]; then
  cargo build --release --quiet --example fake_model
fi
work="target/bench-session"
rm -rf "$work" && mkdir -p "$work"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_for() { for _ in $(seq 1 100); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; echo "not up: $1" >&2; exit 1; }

REDIS_PORT=18960
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --daemonize no \
  > "$work/redis.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
target/release/examples/fake_model 127.0.0.1:18961 2> "$work/fake.log" & pids+=($!)

# wrk varies the session id per request (so Redis sees many keys, as in production) and sends
# a classified call the fake screen allows.
cat > "$work/classified.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
counter = 0
request = function()
  counter = counter + 1
  local body = '{"session_id":"bench-' .. (counter % 1000) .. '","cwd":"/workspace",' ..
    '"transcript":[{"type":"user","text":"run the tests"}],' ..
    '"pending":[{"id":"c1","name":"Bash","input":{"command":"cargo test"}}]}'
  return wrk.format(nil, nil, nil, body)
end
LUA

serve() { # $1 = name, $2 = port, $3 = store; starts a replica
  local session="store = \"memory\""
  if [[ "$3" == redis ]]; then
    session="store = \"redis\"
redis_url = \"redis://127.0.0.1:$REDIS_PORT\"
key_prefix = \"bench:\""
  fi
  cat > "$work/$1.toml" <<TOML
[screen]
allow_threshold_percent = 95
[screen.model]
backend = "openai"
base_url = "http://127.0.0.1:18961/v1"
model = "bench"
[session]
$session
[server]
bind = "127.0.0.1:$2"
max_concurrency = 256
max_model_concurrency = 256
[classifier]
max_concurrent_model_calls = 256
TOML
  "$PERMIT" serve --config "$work/$1.toml" 2> "$work/$1.log" & pids+=($!)
  wait_for "http://127.0.0.1:$2/healthz"
}

to_ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; printf "%.3f", v}'; }

run() { # $1 = name, $2 = port, $3 = connections; prints "requests/s p50_ms p99_ms non2xx"
  wrk -t1 -c"$3" -d"$DURATION" --latency -s "$work/classified.lua" "http://127.0.0.1:$2/v1/decide" > "$work/$1.txt"
  local rps p50 p99 bad
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/$1.txt")
  p50=$(awk '/^ +50%/ {print $2}' "$work/$1.txt" | to_ms)
  p99=$(awk '/^ +99%/ {print $2}' "$work/$1.txt" | to_ms)
  bad=$(awk '/Non-2xx/ {print $NF}' "$work/$1.txt"); bad=${bad:-0}
  echo "$rps $p50 $p99 $bad"
}

# (a) per-decision cost.
serve memory 18962 memory
serve redis 18963 redis
echo "== (a) a classified decision (instant screen, allow), memory vs Redis on loopback, $DURATION each"
for connections in 1 8; do
  read -r m_rps m_p50 m_p99 m_bad < <(run "memory-c$connections" 18962 "$connections")
  read -r r_rps r_p50 r_p99 r_bad < <(run "redis-c$connections" 18963 "$connections")
  echo "  $connections connection(s):"
  echo "    memory: $m_rps req/s, p50 $m_p50 ms, p99 $m_p99 ms, non-2xx $m_bad"
  echo "    redis:  $r_rps req/s, p50 $r_p50 ms, p99 $r_p99 ms, non-2xx $r_bad"
  awk -v a="$m_p50" -v b="$r_p50" -v c="$m_p99" -v d="$r_p99" \
    'BEGIN {printf "    Redis adds: p50 %+.3f ms, p99 %+.3f ms per decision\n", b - a, d - c}'
done
curl -s "http://127.0.0.1:18963/metrics" | python3 -c '
import re, sys
sums, counts = {}, {}
for line in sys.stdin:
    match = re.match(r"permit_session_store_latency_seconds_(sum|count)\{operation=\"(\w+)\"\} ([0-9.e+-]+)", line)
    if match:
        (sums if match[1] == "sum" else counts)[match[2]] = float(match[3])
    if line.startswith("permit_session_store_errors_total"):
        print("    store errors:", line.strip())
for operation in sorted(counts):
    if counts[operation]:
        print(f"    redis {operation}: {int(counts[operation])} calls, mean {1000 * sums[operation] / counts[operation]:.3f} ms")
'
echo "    keys in Redis: $(redis-cli -p "$REDIS_PORT" dbsize)"
kill -TERM "${pids[-1]}" "${pids[-2]}"; wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true

# (b) throughput: one replica vs two sharing Redis, same total connections.
serve one 18964 redis
echo "== (b) throughput with Redis, $CONNECTIONS connections in all, $DURATION"
read -r o_rps o_p50 o_p99 o_bad < <(run one 18964 "$CONNECTIONS")
echo "  one replica:  $o_rps req/s (p50 $o_p50 ms, p99 $o_p99 ms, non-2xx $o_bad)"
kill -TERM "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
serve two-a 18965 redis
serve two-b 18966 redis
half=$((CONNECTIONS / 2))
run two-a 18965 "$half" > "$work/two-a.sum" &
first=$!
run two-b 18966 "$half" > "$work/two-b.sum"
wait "$first"
read -r a_rps a_p50 a_p99 a_bad < "$work/two-a.sum"
read -r b_rps b_p50 b_p99 b_bad < "$work/two-b.sum"
echo "  two replicas: $a_rps + $b_rps req/s (p99 $a_p99 / $b_p99 ms, non-2xx $a_bad / $b_bad)"
awk -v a="$a_rps" -v b="$b_rps" 'BEGIN {printf "  two replicas in all: %.0f req/s\n", a + b}'
echo "  cores on this machine: $(nproc) (the replicas, wrk, Redis and the fake model share them)"
