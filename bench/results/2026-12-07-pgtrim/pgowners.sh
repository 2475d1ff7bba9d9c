#!/bin/bash
# pgowners.sh BIN LABEL PORT OWNERS KEEP WARM COUNT: one server of BIN (--store $STORE,
# schema bench_ours_PORT dropped first) pinned to CPU 0, each bearer token its own owner and
# KEEP finished tasks kept an owner; WARM tasks at 64 clients spread over OWNERS owners
# (bench-load --owners) fill every owner to its bound, then COUNT tasks are measured: tasks/s,
# the server's CPU a task, the CPU a task of every Postgres process (from /proc), and the
# index entries read a task from tasks_owner_finished (the trims' index,
# pg_stat_user_indexes.idx_tup_read). STORE=sqlite (default postgres) runs the SQLite store
# instead (its figures for Postgres then read 0). The load generator is $LOAD (default
# /tmp/bin-new/bench-load), the same for every build.
BIN=$1; LABEL=$2; PORT=$3; OWNERS=$4; KEEP=$5; WARM=$6; COUNT=$7
STORE=${STORE:-postgres}
LOAD=${LOAD:-/tmp/bin-new/bench-load}
PSQL="psql -h 127.0.0.1 -U postgres -d test -qAt"
$PSQL -c "DROP SCHEMA IF EXISTS bench_ours_$PORT CASCADE" > /dev/null 2>&1
taskset -c 0 $BIN/bench-ours --port $PORT --store $STORE --owner-per-token yes --keep-finished $KEEP > /tmp/pgow-$LABEL.server.log 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64 --owners $OWNERS"
taskset -c 1 $LOAD --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count $WARM --duration-secs 1200 --warmup 0 --sleep-ms 0 $ARGS > /dev/null 2>&1
sleep 2
pgcpu() { for p in $(pgrep -x postgres); do awk '{print $14+$15}' /proc/$p/stat 2>/dev/null; done | paste -sd+ | bc; }
idx() { $PSQL -c "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = 'bench_ours_$PORT' AND indexrelname = 'tasks_owner_finished'"; }
read -a A < /proc/$SPID/stat; PA=$(pgcpu); IA=$(idx)
taskset -c 1 $LOAD --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count $COUNT --duration-secs 1200 --warmup 0 --sleep-ms 0 $ARGS > /tmp/pgow-$LABEL.json 2>/dev/null
read -a B < /proc/$SPID/stat; PB=$(pgcpu); sleep 1; IB=$(idx)
kill $SPID; wait $SPID 2>/dev/null
python3 -c "
import json; r=json.load(open('/tmp/pgow-$LABEL.json')); n=r['tasks']
ut=(${B[13]}+${B[14]}-${A[13]}-${A[14]})*1e4/n; pg=($PB-$PA)*1e4/n; ix=($IB-$IA)/n
print('$LABEL tasks/s %.0f server us/task %.1f postgres us/task %.1f trim index entries/task %.0f errors %s'%(r['tasks_per_s'],ut,pg,ix,r.get('errors')))"
