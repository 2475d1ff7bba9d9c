#!/usr/bin/env bash
# The parked-task benchmark (issue 33): memory per waiting task parked and live, wake latency
# parked and live (one instance; across instances on Postgres), timer lateness with many
# timers armed, and start-up on a million parked tasks. Each measure is a fresh process of
# `examples/park_bench.rs` (a real server on 127.0.0.1, driven over the wire); parked and live
# run one after the other, and the ratios are printed at the end.
#
#   bash scripts/bench_park.sh                 # release build first; about 15 minutes
#   PARK_TASKS=20000 PARK_TIMERS=20000 PARK_MILLION=100000 bash scripts/bench_park.sh
#
# Postgres: MCP_TASKS_BENCH_PG (default postgres://postgres@127.0.0.1:5432/test); the
# Postgres measures are skipped when it does not answer.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
TASKS="${PARK_TASKS:-100000}"
PG_TASKS="${PARK_PG_TASKS:-20000}"
WAKES="${PARK_WAKES:-500}"
TIMERS="${PARK_TIMERS:-100000}"
MILLION="${PARK_MILLION:-1000000}"
OUT="${BENCH_OUT:-$TARGET/bench-results/park-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"

(cd "$ROOT" && cargo build --release --example park_bench)
BENCH="$TARGET/release/examples/park_bench"
cd "$ROOT"

run() {
  echo "+ park_bench $*" >&2
  "$BENCH" "$@" 2>>"$OUT/stderr.txt" | tee -a "$OUT/results.txt"
}

pg_up() {
  psql "${MCP_TASKS_BENCH_PG:-postgres://postgres@127.0.0.1:5432/test}" -c 'SELECT 1' \
    >/dev/null 2>&1
}

{ uname -a; nproc; uptime; git -C "$ROOT" rev-parse --short HEAD; } >"$OUT/machine.txt"

run memory --tasks "$TASKS" --park parked
run memory --tasks "$TASKS" --park live
run wake --tasks "$WAKES" --park parked
run wake --tasks "$WAKES" --park live
if pg_up; then
  run memory --tasks "$PG_TASKS" --park parked --store postgres
  run memory --tasks "$PG_TASKS" --park live --store postgres
  run wake --tasks "$WAKES" --park parked --store postgres
  run wake --tasks "$WAKES" --park live --store postgres
  run wake --tasks "$WAKES" --park parked --store postgres --across
fi
run timers --tasks "$TIMERS" --spread-s 60
run million --tasks "$MILLION"

python3 - "$OUT/results.txt" <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
def figure(pattern, line):
    m = re.search(pattern, line)
    return float(m.group(1)) if m else None
for store in ("sqlite", "postgres"):
    mem = {l.split()[2].rstrip(":"): l for l in lines if l.startswith(f"memory {store} ")}
    if "parked" in mem and "live" in mem:
        heap = [figure(r"heap \S+ -> \S+ bytes: (\S+) bytes", mem[k]) for k in ("parked", "live")]
        rss = [figure(r"RSS \S+ -> \S+ bytes: (\S+) bytes", mem[k]) for k in ("parked", "live")]
        print(f"{store}: heap per waiting task parked/live {heap[0]:.0f}/{heap[1]:.0f} B "
              f"({heap[1]/heap[0]:.1f}x less); RSS {rss[0]:.0f}/{rss[1]:.0f} B ({rss[1]/rss[0]:.1f}x less)")
    wake = {l.split(":")[0]: l for l in lines if l.startswith(f"wake {store} ")}
    parked, live = wake.get(f"wake {store} parked"), wake.get(f"wake {store} live")
    if parked and live:
        p99 = [figure(r"p99 (\S+) ms", x) for x in (parked, live)]
        print(f"{store}: wake p99 parked/live {p99[0]:.2f}/{p99[1]:.2f} ms ({p99[0]/p99[1]:.1f}x)")
EOF
echo "results: $OUT/results.txt" >&2
