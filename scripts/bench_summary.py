#!/usr/bin/env python3
"""Medians and ratios of a scripts/bench.sh run: python3 bench_summary.py results.jsonl machine.txt

Each figure is the median over the repetitions of one (server, measurement); a ratio is the
ratio of two medians, with the range of the per-repetition ratios (servers were measured
interleaved, so repetition i of two servers ran minutes apart) in brackets.
"""

import json
import statistics
import sys
from collections import defaultdict

results, machine = sys.argv[1], sys.argv[2]
runs = defaultdict(dict)  # (server, label) -> rep -> run
skipped = defaultdict(set)
for line in open(results):
    row = json.loads(line)
    key = (row["server"], row["label"])
    if "run" in row:
        runs[key][row["rep"]] = row["run"]
    else:
        skipped[key].add(row["skipped"])


def values(server, label, field):
    return [r[field] for r in runs[(server, label)].values() if r.get(field) is not None]


def med(server, label, field):
    v = values(server, label, field)
    return statistics.median(v) if v else None


def per_op_cpu_us(run, ops_field):
    ops = run.get(ops_field) or 0
    if not ops or run.get("server_cpu_s") is None:
        return None
    return run["server_cpu_s"] / ops * 1e6


def med_cpu(server, label, ops_field):
    v = [per_op_cpu_us(r, ops_field) for r in runs[(server, label)].values()]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def ratio(a_server, a_label, b_server, b_label, field):
    a, b = med(a_server, a_label, field), med(b_server, b_label, field)
    if a is None or b is None or b == 0:
        return None, ""
    reps = sorted(set(runs[(a_server, a_label)]) & set(runs[(b_server, b_label)]))
    per = [
        runs[(a_server, a_label)][i][field] / runs[(b_server, b_label)][i][field]
        for i in reps
        if runs[(b_server, b_label)][i].get(field)
        and runs[(a_server, a_label)][i].get(field) is not None
    ]
    rng = f" [{min(per):.2f}-{max(per):.2f}]" if len(per) > 1 else ""
    return a / b, rng


def fmt(x, digits=0):
    if x is None:
        return "n/a"
    return f"{x:,.{digits}f}"


def fr(r):
    x, rng = r
    return "n/a" if x is None else f"{x:.2f}x{rng}"


print("# Benchmark summary\n")
print("```")
print(open(machine).read().rstrip())
print("```\n")
nreps = max((len(v) for v in runs.values()), default=0)
print(f"Medians over up to {nreps} repetitions; each measurement on a freshly started server.\n")

print("## Task throughput (create, then tasks/get at once and every 1 ms until completed)\n")
print("| server | clients | tasks/s | requests/s | create p50/p99 us | end-to-end p50/p99 us | get p50/p99 us | server CPU us/task | errors |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
clients = sorted({int(l[6:]) for (_, l) in runs if l.startswith("task-c")})
for c in clients:
    label = f"task-c{c}"
    for s in ("ours", "ours-metrics", "ours-ab", "ours-postgres", "rmcp", "fastmcp"):
        if (s, label) not in runs:
            continue
        print(
            f"| {s} | {c} | {fmt(med(s, label, 'tasks_per_s'))} | {fmt(med(s, label, 'requests_per_s'))} "
            f"| {fmt(med(s, label, 'create_p50_us'))} / {fmt(med(s, label, 'create_p99_us'))} "
            f"| {fmt(med(s, label, 'e2e_p50_us'))} / {fmt(med(s, label, 'e2e_p99_us'))} "
            f"| {fmt(med(s, label, 'get_p50_us'))} / {fmt(med(s, label, 'get_p99_us'))} "
            f"| {fmt(med_cpu(s, label, 'tasks'), 1)} | {sum(values(s, label, 'errors'))} |"
        )
print()
for c in clients:
    label = f"task-c{c}"
    print(
        f"- {c} clients: ours / rmcp = {fr(ratio('ours', label, 'rmcp', label, 'tasks_per_s'))}, "
        f"ours / fastmcp-tasks = {fr(ratio('ours', label, 'fastmcp', label, 'tasks_per_s'))}"
    )
print()

print("## tasks/get on random ids among K retained completed tasks (16 clients)\n")
print("| server | retained | gets/s | get p50 us | get p99 us | server CPU us/get | bytes/task (RSS) | prefill s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
ks_of = {
    s: sorted({int(l[5:]) for (srv, l) in runs if srv == s and l.startswith("get-k")})
    for s in ("ours", "rmcp")
}
ks = sorted(set(ks_of["ours"]) | set(ks_of["rmcp"]))
for k in ks:
    label = f"get-k{k}"
    for s in ("ours", "rmcp"):
        if (s, label) not in runs:
            continue
        print(
            f"| {s} | {k:,} | {fmt(med(s, label, 'requests_per_s'))} | {fmt(med(s, label, 'get_p50_us'))} "
            f"| {fmt(med(s, label, 'get_p99_us'))} | {fmt(med_cpu(s, label, 'requests'), 1)} "
            f"| {fmt(med(s, label, 'bytes_per_task'))} | {fmt(med(s, label, 'prefill_secs'), 1)} |"
        )
print()
o_lo = o_hi = r_lo = r_hi = None
if ks_of["ours"] and ks_of["rmcp"]:
    o_lo, o_hi = f"get-k{ks_of['ours'][0]}", f"get-k{ks_of['ours'][-1]}"
    r_lo, r_hi = f"get-k{ks_of['rmcp'][0]}", f"get-k{ks_of['rmcp'][-1]}"
    print(f"- ours at {o_hi[5:]} / ours at {o_lo[5:]} (gets/s) = {fr(ratio('ours', o_hi, 'ours', o_lo, 'requests_per_s'))}")
    print(f"- rmcp at {r_hi[5:]} / rmcp at {r_lo[5:]} (gets/s) = {fr(ratio('rmcp', r_hi, 'rmcp', r_lo, 'requests_per_s'))}")
    for k in ks:
        label = f"get-k{k}"
        if ("ours", label) in runs and ("rmcp", label) in runs:
            print(f"- at {k:,} retained: ours / rmcp (gets/s) = {fr(ratio('ours', label, 'rmcp', label, 'requests_per_s'))}")
    if o_hi != r_hi:
        print(
            f"- ours at {o_hi[5:]} / rmcp at {r_hi[5:]} (gets/s) = {fr(ratio('ours', o_hi, 'rmcp', r_hi, 'requests_per_s'))}"
            f" (rmcp was not run at {o_hi[5:]}; its rate there is lower still, so this ratio is a lower bound)"
        )
    print(
        f"- bytes per retained task: ours at {o_hi[5:]} / rmcp at {r_hi[5:]} = "
        f"{fr(ratio('ours', o_hi, 'rmcp', r_hi, 'bytes_per_task'))}"
    )
print()

print("## Inline tools/call (extension not declared, 16 clients)\n")
print("| server | calls/s | p50 us | p99 us | server CPU us/call |")
print("| --- | --- | --- | --- | --- |")
for s in ("ours", "ours-ab", "rmcp", "fastmcp", "echo"):
    if (s, "inline-c16") in runs:
        print(
            f"| {s} | {fmt(med(s, 'inline-c16', 'requests_per_s'))} | {fmt(med(s, 'inline-c16', 'create_p50_us'))} "
            f"| {fmt(med(s, 'inline-c16', 'create_p99_us'))} | {fmt(med_cpu(s, 'inline-c16', 'requests'), 1)} |"
        )
print()
print(f"- ours / rmcp inline = {fr(ratio('ours', 'inline-c16', 'rmcp', 'inline-c16', 'requests_per_s'))}")
print(f"- ours / echo ceiling = {fr(ratio('ours', 'inline-c16', 'echo', 'inline-c16', 'requests_per_s'))}")
if ("ours-ab", "inline-c16") in runs:
    print(f"- ours / ours-ab (the other build) inline = {fr(ratio('ours', 'inline-c16', 'ours-ab', 'inline-c16', 'requests_per_s'))}")
    print(f"- ours-ab / rmcp inline = {fr(ratio('ours-ab', 'inline-c16', 'rmcp', 'inline-c16', 'requests_per_s'))}")
print(f"- rmcp / echo ceiling = {fr(ratio('rmcp', 'inline-c16', 'echo', 'inline-c16', 'requests_per_s'))}")
print()

print("## SQLite store\n")
if ("ours-sqlite", "task-c64") in runs:
    print(f"- ours (SQLite) / ours (memory), 64 clients = {fr(ratio('ours-sqlite', 'task-c64', 'ours', 'task-c64', 'tasks_per_s'))}")
else:
    why = ", ".join(sorted(skipped.get(("ours-sqlite", "task-c64"), {"not measured"})))
    print(f"- not measured: {why} (see server-ours-sqlite.log)")
print()

PG = [s for s in ("ours-postgres",) if any(k[0] == s for k in runs)]
if PG:
    print("## Postgres store (issue 11)\n")
    for s in PG:
        if (s, "task-c64") in runs:
            print(f"- {s} / ours (memory), tasks/s at 64 clients = {fr(ratio(s, 'task-c64', 'ours', 'task-c64', 'tasks_per_s'))}")
    pg_ks = sorted(int(l[5:]) for (sv, l) in runs if sv == "ours-postgres" and l.startswith("get-k"))
    if pg_ks:
        print()
        print("| server | retained | gets/s | get p50/p99 us | server CPU us/get | errors |")
        print("| --- | --- | --- | --- | --- | --- |")
        for k in pg_ks:
            for sv in ("ours", "ours-postgres"):
                label = f"get-k{k}"
                if (sv, label) not in runs:
                    continue
                print(
                    f"| {sv} | {k:,} | {fmt(med(sv, label, 'requests_per_s'))} "
                    f"| {fmt(med(sv, label, 'get_p50_us'))} / {fmt(med(sv, label, 'get_p99_us'))} "
                    f"| {fmt(med_cpu(sv, label, 'requests'), 1)} | {sum(values(sv, label, 'errors'))} |"
                )
        print()
        lo, hi = f"get-k{pg_ks[0]}", f"get-k{pg_ks[-1]}"
        print(f"- ours-postgres at {pg_ks[-1]:,} / at {pg_ks[0]:,} (gets/s) = {fr(ratio('ours-postgres', hi, 'ours-postgres', lo, 'requests_per_s'))}")
        for k in pg_ks:
            label = f"get-k{k}"
            print(f"- at {k:,} retained: ours-postgres / ours (memory) (gets/s) = {fr(ratio('ours-postgres', label, 'ours', label, 'requests_per_s'))}")
    print()

print("## Targets (issue 7)\n")


def check(name, r, op, target):
    x, rng = r
    if x is None:
        print(f"- {name}: n/a")
        return
    ok = x >= target if op == ">=" else x <= target
    verdict = "MET" if ok else f"MISSED ({x / target:.2f} of the target)"
    print(f"- {name}: {x:.2f}x{rng} (target {op} {target}x): {verdict}")


top = f"task-c{clients[-1]}" if clients else "task-c64"
if ("ours-ab", top) in runs:
    print(f"- task throughput at {top[6:]} clients, ours / ours-ab (the other build): {fr(ratio('ours', top, 'ours-ab', top, 'tasks_per_s'))}")
    print(f"- task throughput at {top[6:]} clients, ours-ab / rmcp: {fr(ratio('ours-ab', top, 'rmcp', top, 'tasks_per_s'))}")
check(f"task throughput at {top[6:]} clients, ours / rmcp", ratio("ours", top, "rmcp", top, "tasks_per_s"), ">=", 8)
check(f"task throughput at {top[6:]} clients, ours / fastmcp-tasks", ratio("ours", top, "fastmcp", top, "tasks_per_s"), ">=", 50)
if o_hi:
    check(f"gets/s flat: ours at {o_hi[5:]} / ours at {o_lo[5:]}", ratio("ours", o_hi, "ours", o_lo, "requests_per_s"), ">=", 0.8)
    bound = "" if o_hi == r_hi else " (lower bound)"
    check(f"gets/s: ours at {o_hi[5:]} / rmcp at {r_hi[5:]}{bound}", ratio("ours", o_hi, "rmcp", r_hi, "requests_per_s"), ">=", 50)
    check(f"bytes per retained task: ours ({o_hi[5:]}) / rmcp ({r_hi[5:]})", ratio("ours", o_hi, "rmcp", r_hi, "bytes_per_task"), "<=", 0.5)
check("inline throughput: ours / rmcp", ratio("ours", "inline-c16", "rmcp", "inline-c16", "requests_per_s"), ">=", 0.95)
if ("ours-metrics", "task-c64") in runs:
    check("metrics on (Prometheus recorder) / off, task throughput at 64 clients", ratio("ours-metrics", "task-c64", "ours", "task-c64", "tasks_per_s"), ">=", 0.95)
if ("ours-postgres", "task-c64") in runs:
    check("Postgres (one cluster instance) / memory task throughput at 64 clients", ratio("ours-postgres", "task-c64", "ours", "task-c64", "tasks_per_s"), ">=", 0.5)
if PG and pg_ks:
    check(f"Postgres gets/s flat: at {pg_ks[-1]:,} / at {pg_ks[0]:,}", ratio("ours-postgres", f"get-k{pg_ks[-1]}", "ours-postgres", f"get-k{pg_ks[0]}", "requests_per_s"), ">=", 0.8)
if ("ours-sqlite", "task-c64") in runs:
    check("SQLite / memory task throughput at 64 clients", ratio("ours-sqlite", "task-c64", "ours", "task-c64", "tasks_per_s"), ">=", 0.8)
else:
    print("- SQLite / memory task throughput at 64 clients: not measurable (no SQLite store in the SDK yet)")
