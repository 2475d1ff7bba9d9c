#!/bin/bash
# callgrind.sh BIN_DIR LABEL PORT MODE COUNT; the server's own arguments, if any, in $SARGS;
# more valgrind options in $CGOPTS (e.g. --cache-sim=yes)
BIN=$1; LABEL=$2; PORT=$3; MODE=$4; COUNT=$5
rm -f /tmp/cg-$LABEL.out*
valgrind --tool=callgrind --callgrind-out-file=/tmp/cg-$LABEL.out --dump-instr=no --collect-atstart=yes $CGOPTS $BIN/bench-ours --port $PORT $SARGS > /tmp/cg-$LABEL.server.log 2>&1 &
SPID=$!
for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
if [ "$MODE" = task ]; then ARGS="--mode task --poll-first-ms 0 --poll-every-ms 1 --clients 64"; else ARGS="--mode inline --clients 16"; fi
/tmp/bin-head/bench-load --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count 500 --duration-secs 120 --warmup 0 --sleep-ms 0 $ARGS > /dev/null 2>&1
callgrind_control -z $SPID > /dev/null
OUT=$(/tmp/bin-head/bench-load --url http://127.0.0.1:$PORT/mcp --server-pid $SPID --count $COUNT --duration-secs 600 --warmup 0 --sleep-ms 0 $ARGS 2>/dev/null)
callgrind_control -d $SPID > /dev/null
sleep 1
kill $SPID; wait $SPID 2>/dev/null
IR=$(cat /tmp/cg-$LABEL.out.* 2>/dev/null | grep -h "^summary:\|^totals:" | head -1 | awk '{print $2}')
python3 -c "
import json,sys
r=json.loads('''$OUT'''); ops=r['tasks'] if r['mode']=='task' else r['requests']
ir=int('$IR' or 0)
print('$LABEL','ops',ops,'reqs',r['requests'],'Ir/op',f'{ir/ops:,.0f}','Ir/req',f'{ir/r[\"requests\"]:,.0f}')
"
