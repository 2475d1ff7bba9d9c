#!/usr/bin/env bash
# Task throughput at 64 clients, `bench-ours --store memory` against `--store sqlite`: the
# measurement of scripts/bench.sh (same load-generator arguments, server pinned to CPU 0,
# load generator to CPU 1, a fresh server per measurement), for these two only, interleaved,
# BENCH_REPS (default 3) repetitions of BENCH_SECS (default 5) seconds. One JSON line per
# measurement in $OUT/sqlite_vs_memory.jsonl, then the medians and their ratio.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release"
REPS="${BENCH_REPS:-3}"
SECS="${BENCH_SECS:-5}"
OUT="${BENCH_OUT:-$TARGET/bench-results/sqlite-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
RESULTS="$OUT/sqlite_vs_memory.jsonl"
: >"$RESULTS"

(cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release -p mcp-tasks-bench)

SERVER_PIN=() LOAD_PIN=()
if [[ "$(nproc)" -ge 2 ]] && command -v taskset >/dev/null; then
  SERVER_PIN=(taskset -c 0) LOAD_PIN=(taskset -c 1)
fi

PORT=18800
SPID=""
stop_server() {
  if [[ -n "$SPID" ]]; then
    kill "$SPID" 2>/dev/null || true
    wait "$SPID" 2>/dev/null || true
    SPID=""
  fi
}
trap stop_server EXIT

for rep in $(seq 1 "$REPS"); do
  for store in memory sqlite; do
    PORT=$((PORT + 1))
    "${SERVER_PIN[@]}" "$BIN/bench-ours" --port "$PORT" --store "$store" >"$OUT/server-$store.log" 2>&1 &
    SPID=$!
    for _ in $(seq 1 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
      sleep 0.1
    done
    line="$("${LOAD_PIN[@]}" "$BIN/bench-load" --url "http://127.0.0.1:$PORT/mcp" \
      --server-pid "$SPID" --count 5000000 --duration-secs "$SECS" --warmup 1000 --sleep-ms 0 \
      --mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64 2>>"$OUT/load.log")"
    printf '{"store":"%s","rep":%s,"run":%s}\n' "$store" "$rep" "$line" >>"$RESULTS"
    stop_server
  done
done

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    row = json.loads(line)
    runs.setdefault(row["store"], []).append(row["run"])
median = {s: statistics.median(r["tasks_per_s"] for r in rs) for s, rs in runs.items()}
for store, rs in runs.items():
    each = ", ".join(format(r["tasks_per_s"], ",.0f") for r in rs)
    cpu = ", ".join(str(r["server_cpu_s"]) for r in rs)
    print(f"{store}: {median[store]:,.0f} tasks/s (runs: {each}; server CPU s: {cpu})")
print(f"sqlite / memory: {median['sqlite'] / median['memory']:.2f}x")
PY
echo "results in $OUT" >&2
