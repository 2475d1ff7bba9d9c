# ut.sh BIN LABEL PORT COUNT [server args]
BIN=$1; LABEL=$2; PORT=$3; COUNT=$4; shift 4
$PRE taskset -c 0 $BIN/bench-ours --port $PORT "$@" > /dev/null 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64"
taskset -c 1 /tmp/bin-head/bench-load --url http://127.0.0.1:$PORT/mcp --count 2000 --duration-secs 120 --warmup 0 --sleep-ms 0 $ARGS > /dev/null 2>&1
read -a A < /proc/$SPID/stat
OUT=$(taskset -c 1 /tmp/bin-head/bench-load --url http://127.0.0.1:$PORT/mcp --count $COUNT --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS 2>/dev/null)
read -a B < /proc/$SPID/stat
RSS=$(grep VmRSS /proc/$SPID/status | awk '{print $2}')
kill $SPID; wait $SPID 2>/dev/null
TPS=$(echo "$OUT" | python3 -c "import json,sys; print(json.load(sys.stdin)['tasks_per_s'])")
echo "$LABEL tps $TPS utime $(( ${B[13]}-${A[13]} )) stime $(( ${B[14]}-${A[14]} )) minflt $(( ${B[9]}-${A[9]} )) rss_kb $RSS"
