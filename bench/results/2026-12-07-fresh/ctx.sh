#!/bin/bash
# ctx.sh BIN_DIR LABEL PORT COUNT : server pinned to CPU0, load on CPU1; perf stat of the server over COUNT tasks after 2000 warm-up
BIN=$1; LABEL=$2; PORT=$3; COUNT=$4
taskset -c 0 $BIN/bench-ours --port $PORT $SARGS > /tmp/ctx-$LABEL.log 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64"
taskset -c 1 /tmp/bin-new/bench-load --url http://127.0.0.1:$PORT/mcp --count 2000 --duration-secs 120 --warmup 0 --sleep-ms 0 $ARGS > /dev/null 2>&1
perf stat -e task-clock,context-switches,cpu-migrations,page-faults -x, -o /tmp/ctx-$LABEL.perf -p $SPID &
PPID2=$!
sleep 0.3
OUT=$(taskset -c 1 /tmp/bin-new/bench-load --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count $COUNT --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS 2>/dev/null)
kill -INT $PPID2; wait $PPID2 2>/dev/null
THREADS=$(ls /proc/$SPID/task | wc -l)
kill $SPID; wait $SPID 2>/dev/null
python3 - "$LABEL" "$OUT" "$THREADS" <<'PY'
import json,sys
label,out,threads=sys.argv[1],json.loads(sys.argv[2]),sys.argv[3]
ops=out['tasks']
vals={}
for line in open(f'/tmp/ctx-{label}.perf'):
    p=line.strip().split(',')
    if len(p)>3 and p[0] and p[0][0].isdigit(): vals[p[2]]=float(p[0])
print(label,'tasks',ops,'rate',round(out['tasks_per_s']),'threads',threads,
  'ms-cpu/ktask',round(vals.get('task-clock',0)/ops*1000,1),'ctxsw/task',round(vals.get('context-switches',0)/ops,2),
  'migr',vals.get('cpu-migrations'),'faults/task',round(vals.get('page-faults',0)/ops,3), 'srvcpu', out['server_cpu_s'], 'reqs', out['requests'], 'clientcpu', out['client_cpu_s'])
PY
