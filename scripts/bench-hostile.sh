#!/usr/bin/env bash
# Hostile load on loopback (issue 14): each case attacks `permit serve` the way the reliability
# review did, with bounded loops, and prints one figure (a few for context):
#   outage     gate-only p99 (and 503s) while every model slot hangs on a model that never answers
#   slow       gate-only p99 (and 503s) while slow clients trickle their bodies at 1 byte/s
#   ids        RSS after a flood of requests with 1.9 MB session ids
#   headers    RSS and open files while thousands of clients hold half-sent headers; an oversized
#              x-request-id is not echoed
#   transcript end-to-end time of one decision with a 2 MiB transcript (instant model)
#   readyz     /readyz flood: requests/s and connections opened to the model endpoint
#   panics     flood of `<<$(( )`, which panicked brush-parser (now refused before the parser):
#              requests/s, stderr bytes per request, permit_parser_panics_total
#   strict     trailing data and top-level arrays: statuses
#   audit      kill -9 under load: answered decisions missing from the audit log, per audit mode
# Usage: scripts/bench-hostile.sh [case …]   (all cases by default)
# PERMIT=path/to/permit runs another build (e.g. the one before a fix); FAKE_MODEL likewise.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PERMIT:-}" || -z "${FAKE_MODEL:-}" ]]; then
  cargo build --release --quiet --bin permit --example fake_model
fi
PERMIT="${PERMIT:-target/release/permit}"
FAKE_MODEL="${FAKE_MODEL:-target/release/examples/fake_model}"
if ! command -v wrk >/dev/null; then
  if [[ "$(id -u)" == 0 ]]; then apt-get update -qq && apt-get install -y -qq wrk >/dev/null; else
    echo "bench-hostile: needs wrk (apt-get install wrk)" >&2; exit 1; fi
fi
work="target/bench-hostile"
rm -rf "$work" && mkdir -p "$work"
work="$(cd "$work" && pwd)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
ulimit -n 20000 2>/dev/null || true

# The load generator: Python's standard library only, so nothing is installed.
cat > "$work/hostile.py" <<'PY'
import http.client, json, os, socket, statistics, sys, threading, time

def post(conn, path, body, headers=None, timeout=None):
    all_headers = {"content-type": "application/json"}
    all_headers.update(headers or {})
    conn.request("POST", path, body=body, headers=all_headers)
    response = conn.getresponse()
    return response.status, response.read(), response

def connection(port, timeout=120):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

READ = json.dumps({"session_id": "probe", "cwd": "/workspace",
                   "pending": [{"id": "c1", "name": "Read", "input": {"file_path": "/workspace/src/lib.rs"}}]})
CLASSIFIED = json.dumps({"session_id": "hang", "cwd": "/workspace",
                         "transcript": [{"type": "user", "text": "run the tests"}],
                         "pending": [{"id": "c1", "name": "Bash", "input": {"command": "cargo test"}}]})

def probe(port, count):
    """Sequential gate-only decisions on one keep-alive connection: latencies (ms) and statuses."""
    latencies, statuses = [], {}
    conn = connection(port, timeout=60)
    for _ in range(count):
        started = time.perf_counter()
        try:
            status, _, _ = post(conn, "/v1/decide", READ)
        except (OSError, http.client.HTTPException):
            conn.close(); conn = connection(port, timeout=60); status = "error"
        latencies.append((time.perf_counter() - started) * 1000)
        statuses[status] = statuses.get(status, 0) + 1
        time.sleep(0.002)
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    return p(0.5), p(0.99), statuses

def report_probe(name, port, count):
    p50, p99, statuses = probe(port, count)
    bad = sum(n for s, n in statuses.items() if s != 200)
    print(f"  gate-only {name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms; non-200: {bad} of {count} {statuses}")

def hang_model(port, count_file):
    """A model endpoint that accepts connections and never answers; counts accepted connections."""
    server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port)); server.listen(4096)
    held, accepted = [], 0
    def write():
        while True:
            with open(count_file + ".tmp", "w") as f: f.write(str(accepted))
            os.replace(count_file + ".tmp", count_file); time.sleep(0.1)
    threading.Thread(target=write, daemon=True).start()
    while True:
        sock, _ = server.accept(); held.append(sock); accepted += 1

def accepted(count_file):
    try: return int(open(count_file).read() or 0)
    except (OSError, ValueError): return 0

def outage(port, hang, probes, count_file):
    outcomes, lock = {}, threading.Lock()
    def hang_client():
        conn = connection(port, timeout=300)
        while True:
            try:
                status, body, _ = post(conn, "/v1/decide", CLASSIFIED)
                key = str(status) if status != 200 else json.loads(body)["decisions"][0]["reason_code"]
            except (OSError, http.client.HTTPException, ValueError):
                conn.close(); conn = connection(port, timeout=300); key = "error"
            with lock: outcomes[key] = outcomes.get(key, 0) + 1
            time.sleep(0.05)
    for _ in range(hang):
        threading.Thread(target=hang_client, daemon=True).start()
    # Wait until the model holds every connection it will get (stable for 1 s, at most 8 s).
    last, stable, deadline = -1, 0, time.time() + 8
    while time.time() < deadline and stable < 10:
        now = accepted(count_file); stable = stable + 1 if now == last and now > 0 else 0; last = now
        time.sleep(0.1)
    print(f"  model connections held: {accepted(count_file)}")
    report_probe("under a model outage", port, probes)
    with lock: print(f"  classified requests answered meanwhile: {dict(outcomes) or 'none'}")
    # One more classified request while every slot is held: how it is answered, and how fast.
    answers = []
    for _ in range(5):
        started = time.perf_counter()
        try:
            status, body, _ = post(connection(port, timeout=300), "/v1/decide", CLASSIFIED)
            reply = json.loads(body)
            code = reply["decisions"][0]["reason_code"] if status == 200 else reply["error"]["code"]
        except (OSError, http.client.HTTPException, ValueError) as problem:
            status, code = "error", type(problem).__name__
        answers.append(f"{status} {code} in {(time.perf_counter() - started) * 1000:.1f} ms")
    print(f"  5 more classified requests: {'; '.join(answers)}")

def slow(port, clients, probes):
    body = CLASSIFIED.encode()
    def trickle():
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode())
        try:
            for byte in body:
                sock.sendall(bytes([byte])); time.sleep(1)
        except OSError:
            pass
    for _ in range(clients):
        threading.Thread(target=trickle, daemon=True).start()
    time.sleep(1.5)
    report_probe(f"with {clients} clients sending 1 byte/s", port, probes)

def flood_ids(port, count, size, threads):
    statuses, lock = {}, threading.Lock()
    def worker(n):
        conn = connection(port)
        for i in range(n):
            body = json.dumps({"session_id": f"{i}-{threading.get_ident()}-" + "s" * size, "cwd": "/workspace",
                               "transcript": [{"type": "user", "text": "run the tests"}],
                               "pending": [{"id": "c1", "name": "Bash", "input": {"command": "cargo test"}}]})
            try: status, _, _ = post(conn, "/v1/decide", body)
            except (OSError, http.client.HTTPException): conn.close(); conn = connection(port); status = "error"
            with lock: statuses[status] = statuses.get(status, 0) + 1
    workers = [threading.Thread(target=worker, args=(count // threads,)) for _ in range(threads)]
    for w in workers: w.start()
    for w in workers: w.join()
    print(f"  {count} requests with {size / 1e6:.1f} MB session ids: {statuses}")

def half_headers(port, count, size, hold):
    socks, refused = [], 0
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            sock.setblocking(False)
            try: sock.send(b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * size)
            except BlockingIOError: pass
            socks.append(sock)
        except OSError:
            refused += 1
    print(f"  {len(socks)} connections opened, each with {size // 1024} KiB of unfinished headers ({refused} failed)")
    time.sleep(hold)
    return socks

def request_id(port, size):
    # A raw socket: http.client refuses to read a response header over 64 KiB.
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    body = READ.encode()
    sock.sendall(b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + b"x-request-id: " + b"r" * size + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(65536)
        if not chunk: break
        reply += chunk
    head = reply.split(b"\r\n\r\n")[0].split(b"\r\n")
    status = head[0].decode(errors="replace")
    echoed = next((len(line.split(b":", 1)[1].strip()) for line in head[1:] if line.lower().startswith(b"x-request-id:")), 0)
    print(f"  a {size // 1000} KB x-request-id: {status}, echoed id of {echoed} bytes")

def transcript(port, target_bytes, runs):
    events, i = [{"type": "user", "text": "tidy the repository"}], 0
    size = 0
    while size < target_bytes:
        call = {"type": "tool_call", "id": f"t{i}", "name": "Bash", "input": {"command": f"ls dir{i}"}}
        result = {"type": "tool_result", "id": f"t{i}", "content": f"file{i}.txt"}
        events += [call, result]; size += len(json.dumps(call)) + len(json.dumps(result)) + 4; i += 1
    body = json.dumps({"session_id": "big", "cwd": "/workspace", "transcript": events,
                       "pending": [{"id": "c1", "name": "Bash", "input": {"command": "cargo test"}}]})
    times = []
    for _ in range(runs):
        conn = connection(port, timeout=600)
        started = time.perf_counter()
        status, reply, _ = post(conn, "/v1/decide", body)
        times.append((time.perf_counter() - started) * 1000)
        decision = json.loads(reply)["decisions"][0] if status == 200 else {}
    print(f"  {len(body) / 1048576:.2f} MiB request, {i} tool calls: median {statistics.median(times):.0f} ms "
          f"(runs {', '.join(f'{t:.0f}' for t in times)} ms); status {status}, "
          f"{decision.get('decision')} / {decision.get('reason_code')}")

def strict(port):
    read = json.loads(READ)
    bad = dict(read, pending=[{"id": "c2", "name": "Bash", "input": {"command": "rm -rf ~"}}])
    for name, body in [("object then a second object", READ + json.dumps(bad)),
                       ("top-level array", json.dumps([None, "/workspace", [], read["pending"]])),
                       ("a lone `{`", "{")]:
        conn = connection(port)
        status, reply, _ = post(conn, "/v1/decide", body)
        message = json.loads(reply).get("error", {}).get("message", "") if status != 200 else reply.decode()[:80]
        print(f"  {name}: {status} {message}")

if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "hang-model": hang_model(int(args[0]), args[1])
    elif command == "outage": outage(int(args[0]), int(args[1]), int(args[2]), args[3])
    elif command == "slow": slow(int(args[0]), int(args[1]), int(args[2]))
    elif command == "flood-ids": flood_ids(int(args[0]), int(args[1]), int(args[2]), int(args[3]))
    elif command == "half-headers":
        socks = half_headers(int(args[0]), int(args[1]), int(args[2]), float(args[3]))
        # Report from the shell while the connections are held, then release them.
        open(args[4], "w").write("held"); time.sleep(float(args[5]))
    elif command == "request-id": request_id(int(args[0]), int(args[1]))
    elif command == "transcript": transcript(int(args[0]), int(args[1]), int(args[2]))
    elif command == "strict": strict(int(args[0]))
PY
PY=(python3 "$work/hostile.py")

wait_file() { for _ in $(seq 1 100); do [[ -s "$1" ]] && return 0; sleep 0.1; done; echo "not written: $1" >&2; exit 1; }
wait_for() { for _ in $(seq 1 200); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; echo "not up: $1" >&2; exit 1; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
open_files() { ls "/proc/$1/fd" | wc -l; }

# serve NAME PORT [TOML…]: starts permit with the given config text plus a [server] table.
serve() {
  local name=$1 port=$2; shift 2
  { printf '%s\n' "$@"; } > "$work/$name.toml"
  if ! grep -q '^\[server\]' "$work/$name.toml"; then printf '[server]\n' >> "$work/$name.toml"; fi
  printf 'bind = "127.0.0.1:%s"\n' "$port" >> "$work/$name.toml"
  "$PERMIT" serve --config "$work/$name.toml" 2> "$work/$name.log" & pids+=($!)
  server_pid=$!
  wait_for "http://127.0.0.1:$port/healthz"
}
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

screen_toml() { # $1 = model base URL, $2 = screen timeout (ms)
  printf '[screen]\nallow_threshold_percent = 95\ntimeout_ms = %s\n[screen.model]\nbackend = "openai"\nbase_url = "%s"\nmodel = "bench"\n[screen.model.http]\nmax_attempts = 1\nrequest_timeout_ms = %s\n' "$2" "$1" "$2"
}

bench_outage() {
  echo "== outage: gate-only decisions while every model slot hangs (64 classified requests in flight)"
  "${PY[@]}" hang-model 18901 "$work/hang.count" & pids+=($!)
  local model=$!
  wait_file "$work/hang.count"
  serve outage 18902 "$(screen_toml http://127.0.0.1:18901/v1 30000)" "[server]" "audit_log = \"$work/outage-audit.jsonl\""
  "${PY[@]}" outage 18902 64 400 "$work/hang.count"
  stop "$server_pid"; { kill -9 "$model"; wait "$model"; } 2>/dev/null || true
}

bench_slow() {
  echo "== slow clients: gate-only decisions while 4 clients send their bodies at 1 byte/s (max_concurrency = 4)"
  serve slow 18903 "[server]" "max_concurrency = 4"
  "${PY[@]}" slow 18903 4 200
  stop "$server_pid"
}

bench_ids() {
  echo "== ids: RSS after classified requests with 1.9 MB session ids (instant model)"
  "$FAKE_MODEL" 127.0.0.1:18904 2> "$work/fake-ids.log" & pids+=($!)
  local fake=$!
  serve ids 18905 "$(screen_toml http://127.0.0.1:18904/v1 5000)"
  local before; before=$(rss_mb "$server_pid")
  "${PY[@]}" flood-ids 18905 600 1900000 4
  echo "  RSS: $before MB before, $(rss_mb "$server_pid") MB after"
  stop "$server_pid"; kill "$fake" 2>/dev/null || true
}

bench_headers() {
  echo "== headers: 4000 clients hold half-sent headers (32 KiB each) for 12 s"
  serve headers 18906
  local before; before=$(rss_mb "$server_pid")
  rm -f "$work/held"
  "${PY[@]}" half-headers 18906 4000 32768 1 "$work/held" 12 & local flood=$!
  while [[ ! -e "$work/held" ]]; do sleep 0.2; done
  echo "  server while held: RSS $before MB -> $(rss_mb "$server_pid") MB, open files $(open_files "$server_pid")"
  local started ended; started=$(date +%s%N)
  local status; status=$(curl -s -o /dev/null -w '%{http_code}' -m 30 http://127.0.0.1:18906/v1/decide \
    -H 'content-type: application/json' \
    -d '{"cwd":"/workspace","pending":[{"id":"c1","name":"Read","input":{"file_path":"/workspace/a"}}]}' || true)
  ended=$(date +%s%N)
  echo "  a gate-only decision meanwhile: status $status in $(( (ended - started) / 1000000 )) ms"
  sleep 11
  echo "  server after 12 s: RSS $(rss_mb "$server_pid") MB, open files $(open_files "$server_pid")"
  wait "$flood" 2>/dev/null || true
  "${PY[@]}" request-id 18906 10000
  "${PY[@]}" request-id 18906 100000
  echo "  RSS after the clients left: $(rss_mb "$server_pid") MB"
  "${PY[@]}" half-headers 18906 20 1000 0.1 "$work/held2" 60 & local holders=$!
  while [[ ! -e "$work/held2" ]]; do sleep 0.1; done
  local stop_started; stop_started=$(date +%s%N)
  stop "$server_pid"
  echo "  shutdown with 20 clients holding half-sent headers: $(( ($(date +%s%N) - stop_started) / 1000000 )) ms (grace 30 s)"
  kill "$holders" 2>/dev/null || true
}

bench_transcript() {
  echo "== transcript: one decision with a 2 MiB transcript of small tool calls (instant model)"
  "$FAKE_MODEL" 127.0.0.1:18907 2> "$work/fake-transcript.log" & pids+=($!)
  local fake=$!
  serve transcript 18908 "$(screen_toml http://127.0.0.1:18907/v1 60000)" "[server]" "body_limit_bytes = 8388608"
  "${PY[@]}" transcript 18908 2097152 3
  stop "$server_pid"; kill "$fake" 2>/dev/null || true
}

bench_readyz() {
  echo "== readyz: 8 connections for 5 s against /readyz (remote screen model, audit log on)"
  "${PY[@]}" hang-model 18909 "$work/readyz.count" & pids+=($!)
  local model=$!
  wait_file "$work/readyz.count"
  serve readyz 18910 "$(screen_toml http://127.0.0.1:18909/v1 5000)" "[server]" "audit_log = \"$work/readyz-audit.jsonl\""
  wrk -t2 -c8 -d5s --latency "http://127.0.0.1:18910/readyz" > "$work/readyz.txt"
  sleep 0.3
  awk '/Requests\/sec/ {print "  requests/s: " $2} /^ +99%/ {print "  p99: " $2} /Non-2xx/ {print "  non-2xx: " $NF}' "$work/readyz.txt"
  echo "  connections opened to the model endpoint: $(cat "$work/readyz.count")"
  stop "$server_pid"; { kill -9 "$model"; wait "$model"; } 2>/dev/null || true
}

bench_panics() {
  echo "== panics: 8 connections for 5 s of a command that panics brush-parser (RUST_BACKTRACE=1)"
  cat > "$work/panic.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[{"cwd":"/workspace","pending":[{"id":"c1","name":"Bash","input":{"command":"<<$(( )"}}]}]]
LUA
  RUST_BACKTRACE=1 serve panics 18911
  wrk -t2 -c8 -d5s --latency -s "$work/panic.lua" "http://127.0.0.1:18911/v1/decide" > "$work/panics.txt"
  local requests; requests=$(awk '/requests in/ {print $1}' "$work/panics.txt")
  awk '/Requests\/sec/ {print "  requests/s: " $2} /^ +99%/ {print "  p99: " $2} /Non-2xx/ {print "  non-2xx: " $NF}' "$work/panics.txt"
  local bytes; bytes=$(wc -c < "$work/panics.log")
  echo "  stderr: $bytes bytes for $requests requests ($(( bytes / (requests > 0 ? requests : 1) )) bytes per request)"
  local counted; counted=$(curl -s http://127.0.0.1:18911/metrics | awk '/^permit_parser_panics_total/ {print $2}')
  echo "  permit_parser_panics_total: ${counted:-absent}"
  stop "$server_pid"
}

bench_strict() {
  echo "== strict: what the request parser does with trailing data and arrays"
  serve strict 18912
  "${PY[@]}" strict 18912
  stop "$server_pid"
}

# kill -9 under load, per `server.audit_sync` mode: answered decisions missing from the log, and
# each mode's throughput. The audit work (issue 14, item 6) keeps the measurement in its own
# script; this case runs it on the same build.
bench_audit_kill() {
  echo "== audit: kill -9 loss per audit mode"
  if [[ -x scripts/bench-audit-kill.sh ]]; then
    PERMIT="$PERMIT" scripts/bench-audit-kill.sh | sed 's/^/  /'
  else
    echo "  (not measured: scripts/bench-audit-kill.sh is missing)"
  fi
}

cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(outage slow ids headers transcript readyz panics strict audit)
for case in "${cases[@]}"; do
  case "$case" in
    outage) bench_outage ;; slow) bench_slow ;; ids) bench_ids ;; headers) bench_headers ;;
    transcript) bench_transcript ;; readyz) bench_readyz ;; panics) bench_panics ;;
    strict) bench_strict ;; audit) bench_audit_kill ;;
    *) echo "unknown case: $case" >&2; exit 2 ;;
  esac
done
