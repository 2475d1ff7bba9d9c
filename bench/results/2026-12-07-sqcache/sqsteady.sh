#!/bin/bash
# sqsteady.sh BIN LABEL PORT OWNERS KEEP SECS [ENV...]: one pinned server of BIN on a fresh SQLite
# file (extra env for the server after SECS), 64 clients over OWNERS owners for SECS seconds.
# Prints the load generator's summary, the file's size and the peak and final memory of the
# server (before ab2.txt, the same script printed only the peak).
BIN=$1; LABEL=$2; PORT=$3; OWNERS=$4; KEEP=$5; SECS=$6; shift 6
LOAD=${LOAD:-$BIN/bench-load}
DB=/tmp/mcp-tasks-bench-$PORT.db
rm -f $DB $DB-wal $DB-shm
env "$@" taskset -c 0 $BIN/bench-ours --port $PORT --store sqlite --owner-per-token yes --keep-finished $KEEP > /dev/null 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64 --owners $OWNERS"
taskset -c 1 $LOAD --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count 100000000 --duration-secs $SECS --warmup 0 --sleep-ms 0 $ARGS > /tmp/sqs-$LABEL.json 2>/dev/null
RSS=$(grep VmHWM /proc/$SPID/status | awk "{print \$2}"); SM=$(grep -E "^(Rss|Anonymous|Shared_Clean|Private_Clean)" /proc/$SPID/smaps_rollup | tr -s " " | tr "\n" " ")
kill $SPID; wait $SPID 2>/dev/null
echo "$LABEL rows=$(sqlite3 -readonly $DB 'select count(*) from tasks') size=$(du -m $DB | cut -f1)MB peakRSS=${RSS}kB [$SM] $(python3 -c "import json;d=json.load(open('/tmp/sqs-$LABEL.json'));print({k:v for k,v in d.items() if not isinstance(v,(list,dict))})")"
