#!/usr/bin/env bash
# Profiles bench-ours under the task workload (issue 7) with valgrind's callgrind (this
# machine's perf has no hardware counters: `perf stat -e instructions true` says
# "not supported"). Bounded: BENCH_PROFILE_TASKS tasks (default 2000) at 16 clients, at most
# 120 s, loopback only. Prints the top functions by inclusive and by self cost.
# BENCH_PROFILE_MODE=inline profiles that many inline tools/call instead: a fixed number of
# requests, so two builds' instruction totals compare exactly (a task's polls vary).
#
#   CARGO_TARGET_DIR=... scripts/profile.sh [server-binary-name]   # default bench-ours
#   BENCH_BIN=/some/dir scripts/profile.sh   # profile binaries built elsewhere (no build), e.g.
#                                           # an older commit's bench-ours next to today's bench-load
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="${BENCH_BIN:-$TARGET/release}"
SERVER="${1:-bench-ours}"
TASKS="${BENCH_PROFILE_TASKS:-2000}"
MODE="${BENCH_PROFILE_MODE:-task}"
OUT="${BENCH_OUT:-$TARGET/bench-results/profile-$(date -u +%Y%m%dT%H%M%SZ)}"
PORT=18790
mkdir -p "$OUT"
if [[ -z "${BENCH_BIN:-}" ]]; then
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release -p mcp-tasks-bench)
fi

CG="$OUT/callgrind.$SERVER.out"
valgrind --tool=callgrind --callgrind-out-file="$CG" "$BIN/$SERVER" --port "$PORT" \
  >"$OUT/server.log" 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.2
done
# Warm up, then count only the measured phase.
"$BIN/bench-load" --url "http://127.0.0.1:$PORT/mcp" --mode inline --clients 16 \
  --count 200 --duration-secs 60 --warmup 0 >/dev/null
callgrind_control -z "$VPID" >/dev/null
"$BIN/bench-load" --url "http://127.0.0.1:$PORT/mcp" --mode "$MODE" --clients 16 \
  --count "$TASKS" --duration-secs 120 --warmup 0 --poll-first-ms 0 --poll-every-ms 1 \
  | tee "$OUT/load.json"
callgrind_control -d "$VPID" >/dev/null
sleep 1
kill "$VPID"
wait "$VPID" 2>/dev/null || true
DUMP="$CG.1"  # the dump taken after the measured phase
echo "callgrind dump: $DUMP"
echo "server: $BIN/$SERVER" >"$OUT/binary.txt"
callgrind_annotate --inclusive=yes "$DUMP" 2>/dev/null | head -80 >"$OUT/inclusive.txt"
callgrind_annotate "$DUMP" 2>/dev/null | head -60 >"$OUT/self.txt"
cat "$OUT/inclusive.txt" "$OUT/self.txt"
