#!/usr/bin/env bash
# copyexp.sh CONFIG PORT: quire proxy (QUIRE_b, one worker, CPU 0) with CONFIG, warmed; closed loop 64 conns from CPU 1;
# perf record 8 s; prints hits/s, samples per 1000 hits in all and in _copy_from_iter
CFG=$1; PORT=$2
rm -rf /tmp/prof/volx-$PORT
taskset -c 0 /tmp/prof/QUIRE_b proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:$PORT --cache /tmp/prof/volx-$PORT --cache-size 1GiB --workers 1 --config $CFG > /tmp/prof/px-$PORT.log 2>&1 &
PID=$!
sleep 1
for i in 1 2 3; do /tmp/prof/QUIRE_b bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 10 --accept-encoding gzip > /dev/null; done
taskset -c 1 /tmp/prof/QUIRE_b bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 14 --rate 95000 --accept-encoding gzip > /tmp/prof/lx-$PORT.out 2>&1 &
sleep 3
perf record -F 4999 -o /tmp/prof/x-$PORT.data -p $PID -- sleep 8 > /dev/null 2>&1
sleep 4
kill $PID
rate=$(python3 -c "import json;d=json.loads(open('/tmp/prof/lx-$PORT.out').read().split('QUIRE-LOAD ',1)[1]);print(d['requests']/d['duration_us']*1e6)")
perf report -i /tmp/prof/x-$PORT.data --no-children --sort sym 2>/dev/null | grep -v "^#" | grep -v "^$" > /tmp/prof/x-$PORT.syms
total=$(perf report -i /tmp/prof/x-$PORT.data --no-children --sort sym --stdio 2>/dev/null | grep -m1 "of event" | grep -oE "[0-9]+ of event" | head -1)
python3 - "$rate" /tmp/prof/x-$PORT.syms /tmp/prof/x-$PORT.data <<'PY'
import sys,re,subprocess
rate=float(sys.argv[1]); syms=sys.argv[2]
out=subprocess.run(['perf','report','-i',sys.argv[3],'--stdio','--no-children','--sort','dso'],capture_output=True,text=True).stdout
m=re.search(r'Samples: (\d+)([KM]?)',out); n=float(m.group(1))*{'':1,'K':1e3,'M':1e6}[m.group(2)]
copy=0
for l in open(syms):
    if '_copy_from_iter' in l: copy=float(l.split('%')[0])
hits=rate*8
print(f"hits/s {rate:.0f}  samples/1000 hits {n/hits*1000:.1f}  _copy_from_iter {copy*n/100/hits*1000:.2f}")
PY
