#!/bin/bash
# sqrate.sh BIN LABEL PORT OWNERS KEEP SECS: one server of BIN on a fresh SQLite file, pinned
# to CPU 0, each bearer token its own owner and KEEP finished tasks kept an owner; 64 clients
# spread over OWNERS owners create tasks for SECS seconds; every 30 s the file's task count is
# printed (tasks done so far, and the rate over the last 30 s). The load generator is $LOAD
# (default /tmp/bin-new/bench-load), the same for every build.
BIN=$1; LABEL=$2; PORT=$3; OWNERS=$4; KEEP=$5; SECS=$6
LOAD=${LOAD:-/tmp/bin-new/bench-load}
DB=/tmp/mcp-tasks-bench-$PORT.db
taskset -c 0 $BIN/bench-ours --port $PORT --store sqlite --owner-per-token yes --keep-finished $KEEP > /dev/null 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64 --owners $OWNERS"
taskset -c 1 $LOAD --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count 100000000 --duration-secs $SECS --warmup 0 --sleep-ms 0 $ARGS > /tmp/sq-$LABEL.json 2>/dev/null &
LPID=$!
LAST=0
for t in $(seq 30 30 $SECS); do
  sleep 30
  N=$(sqlite3 -readonly $DB "select count(*) from tasks" 2>/dev/null || echo "$LAST")
  echo "$LABEL t=${t}s rows=$N rate=$(( (N - LAST) / 30 ))/s"
  LAST=$N
done
wait $LPID
kill $SPID; wait $SPID 2>/dev/null
