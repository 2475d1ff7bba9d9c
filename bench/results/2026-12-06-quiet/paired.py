import json,statistics,sys
for d in sys.argv[1:]:
    rows=[json.loads(l) for l in open(d+'/results.jsonl') if 'run' in l]
    for label,key in [('task-c64','tasks_per_s'),('inline-c16','requests_per_s')]:
        v={}
        for r in rows:
            if r['label']!=label: continue
            v.setdefault(r['server'],{})[r['rep']]=r['run'][key]
        a,b=v['ours'],v['ours-ab']
        ratios=[a[i]/b[i] for i in sorted(a) if i in b]
        cpu={}
        for r in rows:
            if r['label']==label: cpu.setdefault(r['server'],[]).append(r['run']['server_cpu_s']/max(r['run'][key]*r['run']['secs'],1)*1e6)
        print(d,label,'median ours',round(statistics.median(a.values())),'ab',round(statistics.median(b.values())),'ratio-of-medians',round(statistics.median(a.values())/statistics.median(b.values()),3),'paired median',round(statistics.median(ratios),3),'paired',[round(x,2) for x in ratios],
              'server cpu us/op ours %.1f ab %.1f'%(statistics.median(cpu['ours']),statistics.median(cpu['ours-ab'])))
