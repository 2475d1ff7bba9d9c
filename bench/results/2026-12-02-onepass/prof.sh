#!/usr/bin/env bash
# usage: prof_inline.sh BIN_DIR SERVER OUT [mode] [count]
set -euo pipefail
BIN=$1; SERVER=$2; OUT=$3; MODE=${4:-inline}; N=${5:-3000}
PORT=$((18800 + RANDOM % 500))
mkdir -p "$OUT"
CG="$OUT/cg.$SERVER.$MODE.out"
valgrind --tool=callgrind --callgrind-out-file="$CG" "$BIN/$SERVER" --port "$PORT" >"$OUT/server.log" 2>&1 &
VPID=$!
for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.2; done
"${LOAD:-$BIN/bench-load}" --url "http://127.0.0.1:$PORT/mcp" --mode $MODE --clients 16 --count 300 --duration-secs 60 --warmup 0 >/dev/null
callgrind_control -z "$VPID" >/dev/null
if [ $MODE = task ]; then EXTRA="--poll-first-ms 0 --poll-every-ms 1"; else EXTRA=""; fi
"${LOAD:-$BIN/bench-load}" --url "http://127.0.0.1:$PORT/mcp" --mode $MODE --clients 16 --count "$N" --duration-secs 120 --warmup 0 $EXTRA > "$OUT/load.$SERVER.$MODE.json"
callgrind_control -d "$VPID" >/dev/null
sleep 1; kill "$VPID"; wait "$VPID" 2>/dev/null || true
callgrind_annotate --inclusive=yes "$CG.1" 2>/dev/null | head -120 > "$OUT/incl.$SERVER.$MODE.txt"
callgrind_annotate "$CG.1" 2>/dev/null | head -80 > "$OUT/self.$SERVER.$MODE.txt"
grep -m1 "PROGRAM TOTALS" "$OUT/incl.$SERVER.$MODE.txt"
cat "$OUT/load.$SERVER.$MODE.json"
