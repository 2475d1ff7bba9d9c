#!/usr/bin/env bash
# Side-by-side benchmarks (issue 7): mcp-tasks vs rmcp 3.11's TaskManager vs fastmcp-tasks
# 4.1.4, next to a bare HTTP+JSON echo (the transport ceiling). One run, interleaved servers,
# every measurement repeated (BENCH_REPS, default 3) on a freshly started server; medians and
# ratios at the end. Everything binds and talks to 127.0.0.1 only.
#
#   scripts/bench.sh                 # the whole comparison (about 15 minutes)
#   BENCH_REPS=1 BENCH_SECS=2 scripts/bench.sh      # a quick smoke run
#   BENCH_ONLY=sqlite scripts/bench.sh              # only ours, SQLite store / memory store
#   BENCH_ONLY=inline scripts/bench.sh              # only inline tools/call: ours, rmcp, echo
#   BENCH_ONLY=rmcp scripts/bench.sh                # every ours-vs-rmcp measurement, no fastmcp
#   BENCH_ONLY=postgres scripts/bench.sh            # ours on Postgres vs ours in memory (issue 11)
#   BENCH_ONLY=metrics scripts/bench.sh             # ours with a Prometheus recorder vs none (issue 23)
#   BENCH_BIN=/some/dir scripts/bench.sh          # binaries built elsewhere, not rebuilt
#   BENCH_ONLY=ab BENCH_AB_BIN=/work/wt-ab/target/release scripts/bench.sh
#                                  # A/B: ours, ours of another build (its bench-ours, same
#                                  # bench-load) and rmcp, interleaved: tasks at 64 clients,
#                                  # inline at 16
#   BENCH_OURS_ARGS="--keep-finished 1000000" ...   # more arguments for ours (not ours-ab):
#                                  # here, keep every finished task for its TTL, as builds
#                                  # before the finished-task bound (wave 4) did
#   BENCH_AB_ARGS="--keep-finished 1000000" ...     # more arguments for ours-ab, when the
#                                  # other build takes them too
#
# The Postgres servers use MCP_TASKS_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test)
# and a schema of their own, dropped (psql) before each measurement. Postgres itself is not
# pinned: it runs on whichever CPU is free, as it would beside a real server.
#
# Pins the server to CPU 0 and the load generator to CPU 1 with taskset when the machine has
# two or more CPUs. Results: $OUT/results.jsonl (one JSON line per measurement) and
# $OUT/summary.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"   # the venv and results go here too
BIN="$TARGET/release"
VENV="$TARGET/bench-venv"
REPS="${BENCH_REPS:-3}"
SECS="${BENCH_SECS:-5}"
OUT="${BENCH_OUT:-$TARGET/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}"
CLIENT_COUNTS="${BENCH_CLIENTS:-1 16 64}"
ONLY="${BENCH_ONLY:-}"   # "sqlite": only the task throughput of ours at 64 clients, memory and SQLite store
case "$ONLY" in
  "" | sqlite | inline | rmcp | postgres | metrics) ;;
  ab)
    if [[ ! -x "${BENCH_AB_BIN:-}/bench-ours" ]]; then
      echo "BENCH_ONLY=ab needs BENCH_AB_BIN, a directory with the other build's bench-ours" >&2
      exit 2
    fi
    ;;
  *) echo "BENCH_ONLY=$ONLY: expected sqlite, inline, rmcp, postgres, metrics or ab (or unset for the whole comparison)" >&2; exit 2 ;;
esac
# fastmcp-tasks (a Python venv) only takes part in the whole comparison.
WITH_FASTMCP=$([[ -z "$ONLY" ]] && echo 1 || echo 0)
RETAINED="${BENCH_RETAINED:-100 10000 100000}"
# rmcp's TaskManager sweeps every task on every call, so creating K tasks costs O(K^2): on
# this 2-CPU machine 100,000 took more than 15 minutes (one repetition). Above this many it
# is measured at this many instead; its gets/s only falls as K grows, so that figure is an
# upper bound of its rate at the larger K (and a ratio against it a lower bound).
RMCP_RETAINED_MAX="${BENCH_RMCP_RETAINED_MAX:-30000}"
MAX_OPS=5000000   # every load loop is bounded in count as well as in time
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"

log() { printf '[bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# --- build ------------------------------------------------------------------------------
if [[ -n "${BENCH_BIN:-}" ]]; then
  # Binaries built earlier (e.g. copied out of a build while the tree moved on): no build.
  BIN="$BENCH_BIN"
  log "using the benchmark binaries in $BIN (not rebuilt)"
else
  log "building the benchmark binaries (release)"
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release -p mcp-tasks-bench)
fi

FASTMCP="not run (BENCH_ONLY=$ONLY)"
if [[ "$WITH_FASTMCP" == 1 ]]; then
  if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import fastmcp_tasks' 2>/dev/null; then
    log "installing fastmcp-tasks==4.1.4 into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "fastmcp-tasks==4.1.4"
  fi
  FASTMCP="$("$VENV/bin/python" --version 2>&1), fastmcp-tasks $("$VENV/bin/python" -c 'import fastmcp_tasks; print(fastmcp_tasks.__version__)')"
fi

# --- pinning ----------------------------------------------------------------------------
SERVER_PIN=()
LOAD_PIN=()
if [[ "$(nproc)" -ge 2 ]] && taskset -c 0 true 2>/dev/null; then
  SERVER_PIN=(taskset -c 0)
  LOAD_PIN=(taskset -c 1)
fi

# --- servers ----------------------------------------------------------------------------
PORT=18700
SPID=""
server_cmd() { # name port
  case "$1" in
    ours) echo "$BIN/bench-ours --port $2 ${BENCH_OURS_ARGS:-}" ;;
    ours-sqlite) echo "$BIN/bench-ours --port $2 --store sqlite" ;;
    ours-postgres) echo "$BIN/bench-ours --port $2 --store postgres" ;;
    ours-ab) echo "$BENCH_AB_BIN/bench-ours --port $2 ${BENCH_AB_ARGS:-}" ;;
    ours-metrics) echo "$BIN/bench-ours --port $2 --metrics prometheus" ;;
    rmcp) echo "$BIN/bench-rmcp --port $2" ;;
    echo) echo "$BIN/bench-echo --port $2" ;;
    fastmcp) echo "$VENV/bin/python $ROOT/bench/python/fastmcp_server.py $2" ;;
  esac
}

PG_URL="${MCP_TASKS_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
start_server() { # name -> sets SPID and PORT, or returns 1
  PORT=$((PORT + 1))
  local name="$1" cmd
  if [[ "$name" == ours-postgres* ]]; then
    psql -q -d "$PG_URL" -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS bench_ours_$PORT CASCADE" >>"$OUT/psql.log" 2>&1 || return 1
  fi
  cmd="$(server_cmd "$name" "$PORT")"
  # shellcheck disable=SC2086
  "${SERVER_PIN[@]}" $cmd >"$OUT/server-$name.log" 2>&1 &
  SPID=$!
  local i
  for i in $(seq 1 300); do
    if ! kill -0 "$SPID" 2>/dev/null; then
      SPID=""
      return 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  stop_server
  return 1
}

stop_server() {
  if [[ -n "$SPID" ]]; then
    kill "$SPID" 2>/dev/null || true
    wait "$SPID" 2>/dev/null || true
    SPID=""
  fi
}
trap stop_server EXIT

# measure SERVER LABEL REP LOADGEN-ARGS...: one measurement on a fresh server.
measure() {
  local server="$1" label="$2" rep="$3"
  shift 3
  if ! start_server "$server"; then
    log "$server did not start: $(tail -n 3 "$OUT/server-$server.log" | tr '\n' ' ')"
    printf '{"server":"%s","label":"%s","rep":%s,"skipped":"server did not start"}\n' \
      "$server" "$label" "$rep" >>"$RESULTS"
    return 0
  fi
  local line
  if line="$(timeout 1200 "${LOAD_PIN[@]}" "$BIN/bench-load" \
      --url "http://127.0.0.1:$PORT/mcp" --server-pid "$SPID" --count "$MAX_OPS" "$@" \
      2>>"$OUT/load.log")"; then
    printf '{"server":"%s","label":"%s","rep":%s,"run":%s}\n' "$server" "$label" "$rep" "$line" >>"$RESULTS"
    log "$server $label #$rep: $(echo "$line" | cut -c1-160)"
  else
    log "$server $label #$rep: load generator failed (see $OUT/load.log)"
    printf '{"server":"%s","label":"%s","rep":%s,"skipped":"load generator failed"}\n' \
      "$server" "$label" "$rep" >>"$RESULTS"
  fi
  stop_server
}

# --- the machine ------------------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo ' (dirty)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
  echo "memory: $(grep MemTotal /proc/meminfo | awk '{print $2 " kB"}')"
  echo "kernel: $(uname -r)"
  echo "rustc: $(rustc --version)"
  echo "python: $FASTMCP"
  echo "pinning: server ${SERVER_PIN[*]:-none}, load generator ${LOAD_PIN[*]:-none}"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "reps: $REPS, seconds per measurement: $SECS"
  echo "ours arguments: ${BENCH_OURS_ARGS:-none}"
  echo "ours-ab arguments: ${BENCH_AB_ARGS:-none}"
  if [[ "$ONLY" == ab ]]; then
    echo "ours-ab: $BENCH_AB_BIN/bench-ours (commit $(git -C "$BENCH_AB_BIN/../.." rev-parse --short HEAD 2>/dev/null || echo unknown))"
  fi
  if [[ "$ONLY" == postgres ]]; then
    echo "postgres: $(psql -At -d "$PG_URL" -c "SELECT version()" | cut -d, -f1), synchronous_commit $(psql -At -d "$PG_URL" -c "SHOW synchronous_commit"), fsync $(psql -At -d "$PG_URL" -c "SHOW fsync"), on $PG_URL (unpinned)"
  fi
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

COMMON=(--duration-secs "$SECS" --warmup 1000 --sleep-ms 0)
TASK=(--mode task --poll-first-ms 0 --poll-every-ms 1)

for rep in $(seq 1 "$REPS"); do
  log "=== repetition $rep of $REPS ==="
  if [[ "$ONLY" == postgres ]]; then
    # End-to-end task throughput, then tasks/get against K retained tasks, each next to the
    # memory store in the same repetition.
    for server in ours ours-postgres; do
      measure "$server" "task-c64" "$rep" "${COMMON[@]}" "${TASK[@]}" --clients 64
    done
    for k in $RETAINED; do
      for server in ours ours-postgres; do
        measure "$server" "get-k$k" "$rep" "${COMMON[@]}" --mode get --prefill "$k" --clients 16
      done
    done
    continue
  fi
  if [[ "$ONLY" == ab ]]; then
    # Which build goes first alternates, so whatever the server before leaves behind (and a
    # load that drifts during a repetition) favours neither.
    order=(ours ours-ab rmcp)
    if (( rep % 2 == 0 )); then order=(ours-ab ours rmcp); fi
    for server in "${order[@]}"; do
      measure "$server" "task-c64" "$rep" "${COMMON[@]}" "${TASK[@]}" --clients 64
    done
    for server in "${order[@]}"; do
      measure "$server" "inline-c16" "$rep" "${COMMON[@]}" --mode inline --clients 16
    done
    continue
  fi
  if [[ "$ONLY" == metrics ]]; then
    # The same build with and without a Prometheus recorder, interleaved; which goes first
    # alternates, so a load that drifts during a repetition favours neither.
    order=(ours ours-metrics)
    if (( rep % 2 == 0 )); then order=(ours-metrics ours); fi
    for server in "${order[@]}"; do
      measure "$server" "task-c64" "$rep" "${COMMON[@]}" "${TASK[@]}" --clients 64
    done
    continue
  fi
  if [[ "$ONLY" == sqlite ]]; then
    measure ours "task-c64" "$rep" "${COMMON[@]}" "${TASK[@]}" --clients 64
    measure ours-sqlite "task-c64" "$rep" "${COMMON[@]}" "${TASK[@]}" --clients 64
    continue
  fi
  PEERS=(ours rmcp)
  INLINE=(ours rmcp echo)
  if [[ "$WITH_FASTMCP" == 1 ]]; then
    PEERS+=(fastmcp)
    INLINE+=(fastmcp)
  fi
  if [[ "$ONLY" == inline ]]; then
    for server in "${INLINE[@]}"; do
      measure "$server" "inline-c16" "$rep" "${COMMON[@]}" --mode inline --clients 16
    done
    continue
  fi
  # Task throughput (create + poll at once, then every 1 ms, until completed); tasks are
  # retained for an hour (15 minutes for fastmcp-tasks, its fixed Docket execution_ttl:
  # longer than any run either way).
  for clients in $CLIENT_COUNTS; do
    for server in "${PEERS[@]}"; do
      measure "$server" "task-c$clients" "$rep" "${COMMON[@]}" "${TASK[@]}" --clients "$clients"
    done
  done
  # tasks/get on random ids among K retained completed tasks (16 clients); the 100,000 run
  # also gives resident bytes per retained task.
  for k in $RETAINED; do
    measure ours "get-k$k" "$rep" "${COMMON[@]}" --mode get --prefill "$k" --clients 16
    kr=$((k < RMCP_RETAINED_MAX ? k : RMCP_RETAINED_MAX))
    measure rmcp "get-k$kr" "$rep" "${COMMON[@]}" --mode get --prefill "$kr" --clients 16
  done
  # Inline tools/call (no extension declared) next to the transport ceiling.
  for server in "${INLINE[@]}"; do
    measure "$server" "inline-c16" "$rep" "${COMMON[@]}" --mode inline --clients 16
  done
  # The SQLite store (the server says whether it exists yet).
  if [[ -z "$ONLY" ]]; then
    measure ours-sqlite "task-c64" "$rep" "${COMMON[@]}" "${TASK[@]}" --clients 64
  fi
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
if [[ "$ONLY" == postgres ]]; then
  for port in $(seq 18701 "$PORT"); do
    psql -q -d "$PG_URL" -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS bench_ours_$port CASCADE" >>"$OUT/psql.log" 2>&1 || true
  done
fi

python3 "$ROOT/scripts/bench_summary.py" "$RESULTS" "$OUT/machine.txt" | tee "$OUT/summary.md"
log "results in $OUT"
