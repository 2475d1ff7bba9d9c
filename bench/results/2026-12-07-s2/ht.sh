#!/bin/bash
# ht.sh BIN_DIR LABEL PORT COUNT ; server args in $SARGS
BIN=$1; LABEL=$2; PORT=$3; COUNT=$4
rm -f /tmp/ht/$LABEL.*
heaptrack -o /tmp/ht/$LABEL $BIN/bench-ours --port $PORT $SARGS > /tmp/ht/$LABEL.server.log 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
sleep 1
RPID=$(pgrep -f "^$BIN/bench-ours --port $PORT" | head -1)
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64"
/tmp/bin-head/bench-load --url http://127.0.0.1:$PORT/mcp --server-pid $RPID --count $COUNT --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS > /tmp/ht/$LABEL.load.json 2>/dev/null
kill $(pgrep -f "^$BIN/bench-ours --port $PORT") 2>/dev/null; wait $SPID 2>/dev/null
sleep 2
ls /tmp/ht/$LABEL*
