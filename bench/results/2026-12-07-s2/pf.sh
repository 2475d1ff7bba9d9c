BIN=$1; LABEL=$2; PORT=$3; COUNT=$4; shift 4
taskset -c 0 $BIN/bench-ours --port $PORT "$@" > /dev/null 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64"
taskset -c 1 /tmp/bin-head/bench-load --url http://127.0.0.1:$PORT/mcp --count 2000 --duration-secs 120 --warmup 0 --sleep-ms 0 $ARGS > /dev/null 2>&1
perf record -e cpu-clock -F 4000 -p $SPID -o /tmp/pf-$LABEL.data > /dev/null 2>&1 &
PP=$!; sleep 0.5
OUT=$(taskset -c 1 /tmp/bin-head/bench-load --url http://127.0.0.1:$PORT/mcp --count $COUNT --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS 2>/dev/null)
kill -INT $PP; wait $PP 2>/dev/null; kill $SPID; wait $SPID 2>/dev/null
echo "$LABEL $(echo "$OUT" | python3 -c "import json,sys; print(json.load(sys.stdin)['tasks_per_s'])")"
