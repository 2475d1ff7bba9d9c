#!/bin/bash
# usertime.sh BIN LABEL PORT COUNT SARGS; the load generator in $LOAD (default /tmp/bin-head/bench-load)
BIN=$1; LABEL=$2; PORT=$3; COUNT=$4; SARGS=$5
# one server, pinned
taskset -c 0 $BIN/bench-ours --port $PORT $SARGS > /dev/null 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64"
taskset -c 1 ${LOAD:-/tmp/bin-head/bench-load} --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count 2000 --duration-secs 120 --warmup 0 --sleep-ms 0 $ARGS > /dev/null 2>&1
read -a A < /proc/$SPID/stat
taskset -c 1 ${LOAD:-/tmp/bin-head/bench-load} --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count $COUNT --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS > /tmp/us-$LABEL.json 2>/dev/null
read -a B < /proc/$SPID/stat
RSS=$(grep VmRSS /proc/$SPID/status | awk '{print $2}')
kill $SPID; wait $SPID 2>/dev/null
python3 -c "
import json; r=json.load(open('/tmp/us-$LABEL.json')); n=r['tasks']
ut=(${B[13]}-${A[13]})*1e4/n; st=(${B[14]}-${A[14]})*1e4/n; mf=(${B[9]}-${A[9]})/n
print('$LABEL tasks/s %.0f user us/task %.1f sys us/task %.1f minflt/task %.3f rss_kb %s'%(r['tasks_per_s'],ut,st,mf,'$RSS'))"
