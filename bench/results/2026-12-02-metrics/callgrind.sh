#!/usr/bin/env bash
# callgrind instructions per task: bench-ours with and without --metrics prometheus
set -euo pipefail
BIN=/work/wt-metrics/target/release
OUT=/work/wt-metrics/target/bench-results/metrics-callgrind
mkdir -p "$OUT"
PORT=18790
for mode in off prometheus; do
  PORT=$((PORT+1))
  CG="$OUT/callgrind.$mode.out"
  valgrind --tool=callgrind --callgrind-out-file="$CG" "$BIN/bench-ours" --port "$PORT" --metrics "$mode" >"$OUT/server-$mode.log" 2>&1 &
  VPID=$!
  for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.2; done
  "$BIN/bench-load" --url "http://127.0.0.1:$PORT/mcp" --mode task --clients 16 --count 300 --duration-secs 60 --warmup 0 --poll-first-ms 0 --poll-every-ms 1 >/dev/null
  callgrind_control -z "$VPID" >/dev/null
  "$BIN/bench-load" --url "http://127.0.0.1:$PORT/mcp" --mode task --clients 16 --count 2000 --duration-secs 120 --warmup 0 --poll-first-ms 0 --poll-every-ms 1 > "$OUT/load-$mode.json"
  callgrind_control -d "$VPID" >/dev/null
  sleep 1
  kill "$VPID"; wait "$VPID" 2>/dev/null || true
  tasks=$(python3 -c "import json;print(json.load(open('$OUT/load-$mode.json'))['tasks'])")
  ir=$(cat "$CG".* 2>/dev/null "$CG" | grep -E '^(summary|totals):' | awk '{print $2}' | sort -n | tail -1)
  echo "$mode tasks=$tasks Ir=$ir per_task=$(python3 -c "print(round($ir/$tasks))")"
done
