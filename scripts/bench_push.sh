#!/usr/bin/env bash
# The push benchmark (issue 22), one instance, memory store: push latency at N open listen
# streams, requests and server CPU per completed task polled vs listened, memory per open
# stream. Each measurement on a freshly started `bench-ours --owner-per-token 1` (server on
# CPU 0, `bench-push` on CPU 1). Results: $OUT/results.jsonl and machine.txt.
#
#   bash scripts/bench_push.sh            # release build first; about 2 minutes of measuring
#   PUSH_STREAMS=100 bash scripts/bench_push.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release"
STREAMS="${PUSH_STREAMS:-1000}"
OUT="${BENCH_OUT:-$TARGET/bench-results/push-$(date -u +%Y%m%dT%H%M%SZ)}"
PORT="${PUSH_PORT:-8131}"
mkdir -p "$OUT"

if [[ -z "${BENCH_BIN:-}" ]]; then
  (cd "$ROOT" && cargo build --release -p mcp-tasks-bench --bin bench-ours --bin bench-push)
else
  BIN="$BENCH_BIN"
fi

PIN_SERVER=(); PIN_LOAD=()
if [[ "$(nproc)" -ge 2 ]] && command -v taskset >/dev/null; then
  PIN_SERVER=(taskset -c 0); PIN_LOAD=(taskset -c 1)
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- mcp-tasks bench || echo ' (dirty)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) x $(nproc)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "streams: $STREAMS"
} > "$OUT/machine.txt"

measure() {
  "${PIN_SERVER[@]}" "$BIN/bench-ours" --port "$PORT" --owner-per-token 1 2>>"$OUT/server.log" &
  local pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
  done
  "${PIN_LOAD[@]}" "$BIN/bench-push" --url "http://127.0.0.1:$PORT/mcp" --server-pid "$pid" "$@" \
    | tee -a "$OUT/results.jsonl"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

measure --mode latency --streams "$STREAMS" --ticks 10 --every-ms 1000
measure --mode follow --how poll --streams "$STREAMS" --sleep-ms 10000 --poll-ms 1000
measure --mode follow --how listen --streams "$STREAMS" --sleep-ms 10000
measure --mode memory --streams "$STREAMS" --sleep-ms 60000
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
echo "results in $OUT"
