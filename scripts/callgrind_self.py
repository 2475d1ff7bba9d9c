#!/usr/bin/env python3
"""Self cost (instructions spent in a function itself, not in what it calls) of two
callgrind dumps, function by function, divided by N (the tasks or calls profiled), and the
functions whose cost differs most. For the dumps of `scripts/profile.sh`, where
callgrind_annotate's own self listing charges everything to the thread's entry point.

    python3 scripts/callgrind_self.py BASE.out.1 HEAD.out.1 [N]   # N: 2000 by default
"""

import collections
import re
import sys

# A compressed name: `(12) name` defines id 12, `(12)` refers to it.
COMPRESSED = re.compile(r"\((\d+)\)(?: (.*))?")


def self_cost(path):
    """Instructions per function name, leaving out the cost lines of calls (the line after
    each `calls=` line is the callee's inclusive cost)."""
    names = {}

    def name(text):
        match = COMPRESSED.match(text)
        if not match:
            return text
        if match.group(2):
            names[match.group(1)] = match.group(2)
        return names.get(match.group(1), text)

    cost = collections.Counter()
    function = None
    call_cost_next = False
    with open(path, errors="replace") as dump:
        for line in dump:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                function = name(line[3:])
            elif line.startswith("cfn="):
                name(line[4:])  # defines the id for later references
            elif line.startswith(("cfi=", "cfl=", "fl=", "fi=", "fe=")):
                pass
            elif line.startswith("calls="):
                call_cost_next = True
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                parts = line.split()
                if len(parts) < 2:
                    continue
                if call_cost_next:
                    call_cost_next = False
                    continue
                try:
                    cost[function] += int(parts[1])
                except ValueError:
                    pass  # a position-only line
    return cost


def main():
    base = self_cost(sys.argv[1])
    head = self_cost(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    print("totals", sum(base.values()) / n, sum(head.values()) / n)
    diff = sorted(((head[k] - base[k]) / n, k) for k in set(base) | set(head))
    print("head more:")
    for d, k in diff[::-1][:40]:
        print(f"{d:8.0f} {head[k] / n:8.0f} {k[:150]}")
    print("head less:")
    for d, k in diff[:30]:
        print(f"{d:8.0f} {base[k] / n:8.0f} {k[:150]}")


if __name__ == "__main__":
    main()
