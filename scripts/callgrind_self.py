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


def selfcost(path):
    names={}; cur=None; skip=False; cost=collections.Counter()
    def nm(s):
        m=re.match(r'\((\d+)\)(?: (.*))?',s)
        if m:
            if m.group(2): names[m.group(1)]=m.group(2)
            return names.get(m.group(1),s)
        return s
    for line in open(path,errors='replace'):
        line=line.rstrip('\n')
        if line.startswith('fn='): cur=nm(line[3:]); continue
        if line.startswith(('cfn=','cfi=','cfl=')):
            if line.startswith('cfn='): nm(line[4:])
            continue
        if line.startswith(('fl=','fi=','fe=')): continue
        if line.startswith('calls='): skip=True; continue
        if line and (line[0].isdigit() or line[0] in '+-*'):
            parts=line.split()
            if len(parts)>=2:
                if skip: skip=False; continue
                try: cost[cur]+=int(parts[1])
                except: pass
            continue
    return cost
b=selfcost(sys.argv[1]); h=selfcost(sys.argv[2]); n=int(sys.argv[3]) if len(sys.argv)>3 else 2000
print("totals", sum(b.values())/n, sum(h.values())/n)
keys=set(b)|set(h)
diff=sorted(((h[k]-b[k])/n,k) for k in keys)
print("head more:")
for d,k in diff[::-1][:40]: print(f"{d:8.0f} {h[k]/n:8.0f} {k[:150]}")
print("head less:")
for d,k in diff[:30]: print(f"{d:8.0f} {b[k]/n:8.0f} {k[:150]}")
