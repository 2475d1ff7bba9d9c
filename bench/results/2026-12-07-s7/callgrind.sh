#!/bin/bash
# usage: cg.sh BIN label mode clients count
B=$1; L=/work/main/target/release; MODE=$3; C=$4; N=$5
ARGS=""; [ "$2" != old ] && ARGS="--keep-finished 1000000"
rm -f /tmp/cg-$2-$MODE.out*
valgrind --tool=callgrind --callgrind-out-file=/tmp/cg-$2-$MODE.out $B/bench-ours --port 8203 $ARGS > /tmp/cg-srv-$2.log 2>&1 & VP=$!
for i in $(seq 1 60); do curl -s -o /dev/null http://127.0.0.1:8203/mcp && break; sleep 1; done
if [ "$MODE" = task ]; then EXTRA="--mode task --poll-first-ms 0 --poll-every-ms 1"; else EXTRA="--mode inline"; fi
taskset -c 1 $L/bench-load --url http://127.0.0.1:8203/mcp --count 500 --duration-secs 300 --warmup 100 --sleep-ms 0 $EXTRA --clients $C > /dev/null
callgrind_control -z $VP > /dev/null
taskset -c 1 $L/bench-load --url http://127.0.0.1:8203/mcp --count $N --duration-secs 300 --warmup 0 --sleep-ms 0 $EXTRA --clients $C | cut -c1-60
callgrind_control -d $VP > /dev/null
kill -TERM $VP; wait $VP
