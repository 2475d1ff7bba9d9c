"""sqsum.py FILE...: one line a run of sqsteady.sh: label, rows left, file size, peak RSS,
tasks done, tasks/s, create p99 (us), get p99 (us), server CPU a task (us), and the anonymous
memory at the end where the run recorded it (ab2.txt and rss.txt)."""
import re, sys

for f in sys.argv[1:]:
    for line in open(f):
        m = re.match(r"(\S+) rows=(\d+) size=(\S+) peakRSS=(\d+)kB (?:\[(.*?)\] )?(\{.*\})", line)
        if not m:
            continue
        d = eval(m.group(6))
        anon = re.search(r"Anonymous: (\d+) kB", m.group(5) or "")
        print(m.group(1), "rows", m.group(2), m.group(3), "peak", int(m.group(4)) // 1024, "MB",
              "tasks", d["tasks"], "tasks/s", d["tasks_per_s"], "create_p99", d["create_p99_us"],
              "get_p99", d["get_p99_us"], "cpu/task", round(d["server_cpu_s"] / d["tasks"] * 1e6, 1),
              ("anon %d MB" % (int(anon.group(1)) // 1024)) if anon else "")
