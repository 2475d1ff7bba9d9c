#!/usr/bin/env bash
# A/B of the memory prototype: bytes per retained task and gets/s at 100,000 retained.
set -euo pipefail
L=/work/wt-bench/target/release/bench-load
for rep in 1 2 3; do
  for v in base proto; do
    if [ $v = base ]; then B=/tmp/bench-ours-base; else B=/work/wt-bench/target/release/bench-ours; fi
    taskset -c 0 $B --port 18801 2>/dev/null & P=$!
    sleep 0.5
    echo "$v $rep $(taskset -c 1 $L --url http://127.0.0.1:18801/mcp --mode get --prefill 100000 --clients 16 --duration-secs 3 --warmup 1000 --server-pid $P)"
    kill $P; wait $P 2>/dev/null || true
  done
done
