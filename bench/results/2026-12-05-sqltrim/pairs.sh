#!/bin/bash
# usage: ctx.sh BINDIR label
B=$1; PORT=18800
taskset -c 0 $B/bench-ours --port $PORT > /tmp/ctx-server.log 2>&1 &
SP=$!
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
taskset -c 1 $B/bench-load --url http://127.0.0.1:$PORT/mcp --mode task --clients 64 --count 2000 --duration-secs 30 --warmup 0 --poll-first-ms 0 --poll-every-ms 1 > /dev/null
sum() { cat /proc/$SP/task/*/status | awk '/voluntary_ctxt_switches/{if($1 ~ /^nonv/) n+=$2; else v+=$2} END{print v, n}'; }
read v0 n0 < <(sum); t0=$(awk '{print $14+$15}' /proc/$SP/stat)
taskset -c 1 $B/bench-load --url http://127.0.0.1:$PORT/mcp --mode task --clients 64 --count 40000 --duration-secs 60 --warmup 0 --poll-first-ms 0 --poll-every-ms 1 > /tmp/ctx-load.json
read v1 n1 < <(sum); t1=$(awk '{print $14+$15}' /proc/$SP/stat)
threads=$(ls /proc/$SP/task | wc -l)
echo "$2 threads=$threads vol/task=$(echo "scale=3;($v1-$v0)/40000"|bc) nonvol/task=$(echo "scale=3;($n1-$n0)/40000"|bc) cpu_ticks=$((t1-t0)) $(python3 -c "import json;d=json.load(open('/tmp/ctx-load.json'));print(d['tasks_per_s'], d['requests'])")"
kill $SP; wait $SP 2>/dev/null
