import json,sys,statistics as st
for label,key in [('task-c64','tasks_per_s'),('inline-c16','requests_per_s')]:
    ratios=[];cpu_o=[];cpu_a=[]
    for d in sys.argv[1:]:
        rows=[json.loads(l) for l in open(d+'/results.jsonl')]
        by={}
        for r in rows:
            if r.get('label')==label and 'run' in r: by[(r['server'],r['rep'])]=r['run']
        for (s,rep),run in by.items():
            if s=='ours' and ('ours-ab',rep) in by:
                a=by[('ours-ab',rep)]
                ratios.append(run[key]/a[key])
                n_o=run['tasks'] if label.startswith('task') else run['requests']
                n_a=a['tasks'] if label.startswith('task') else a['requests']
                cpu_o.append(run['server_cpu_s']/n_o*1e6); cpu_a.append(a['server_cpu_s']/n_a*1e6)
    print(label,'pairs',len(ratios),'paired median %.3f'%st.median(ratios),'mean %.3f'%st.mean(ratios),'under 1: %d'%sum(r<1 for r in ratios),'cpu us/op %.1f / %.1f (%.3fx)'%(st.mean(cpu_o),st.mean(cpu_a),st.mean(cpu_o)/st.mean(cpu_a)))
