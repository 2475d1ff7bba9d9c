#!/usr/bin/env bash
# tasks/get at 100,000 retained tasks, ours and rmcp's TaskManager side by side (the figure
# scripts/bench.sh leaves out because rmcp's prefill is O(K^2): about 5 minutes here).
# Run after scripts/bench.sh has built the release binaries:
#   bash scripts/bench_rmcp_100k.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release"
PIN_SERVER=(taskset -c 0)
PIN_LOAD=(taskset -c 1)
run() { # server-binary port
  "${PIN_SERVER[@]}" "$BIN/$1" --port "$2" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && break; sleep 0.1; done
  local line
  line="$(timeout 1500 "${PIN_LOAD[@]}" "$BIN/bench-load" --url "http://127.0.0.1:$2/mcp" \
    --server-pid "$pid" --count 5000000 --duration-secs 5 --warmup 1000 --sleep-ms 0 \
    --mode get --prefill 100000 --clients 16)"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "{\"server\":\"$1\",\"run\":$line}"
}
run bench-ours 18901
run bench-rmcp 18902
