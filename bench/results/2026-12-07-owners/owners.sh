#!/bin/bash
# owners.sh BIN LABEL PORT OWNERS KEEP WARM COUNT: one server of BIN pinned to CPU 0, each
# bearer token its own owner and KEEP finished tasks kept an owner; WARM tasks at 64 clients
# spread over OWNERS owners (bench-load --owners) fill every owner past its bound, then
# COUNT tasks are measured: the server's user and system CPU a task (clock ticks of
# /proc/PID/stat), its minor faults a task and its RSS at the end. The load generator is
# $LOAD (default /tmp/bin-new/bench-load), the same for every build.
BIN=$1; LABEL=$2; PORT=$3; OWNERS=$4; KEEP=$5; WARM=$6; COUNT=$7
LOAD=${LOAD:-/tmp/bin-new/bench-load}
taskset -c 0 $BIN/bench-ours --port $PORT --owner-per-token yes --keep-finished $KEEP > /dev/null 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64 --owners $OWNERS"
taskset -c 1 $LOAD --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count $WARM --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS > /dev/null 2>&1
read -a A < /proc/$SPID/stat
taskset -c 1 $LOAD --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count $COUNT --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS > /tmp/ow-$LABEL.json 2>/dev/null
read -a B < /proc/$SPID/stat
RSS=$(grep VmRSS /proc/$SPID/status | awk '{print $2}')
kill $SPID; wait $SPID 2>/dev/null
python3 -c "
import json; r=json.load(open('/tmp/ow-$LABEL.json')); n=r['tasks']
ut=(${B[13]}-${A[13]})*1e4/n; st=(${B[14]}-${A[14]})*1e4/n; mf=(${B[9]}-${A[9]})/n
print('$LABEL tasks/s %.0f user us/task %.1f sys us/task %.1f minflt/task %.3f rss_kb %s errors %s'%(r['tasks_per_s'],ut,st,mf,'$RSS',r.get('errors')))"
