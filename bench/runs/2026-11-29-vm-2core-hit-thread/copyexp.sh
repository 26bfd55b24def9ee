#!/usr/bin/env bash
# copyexp.sh CONFIG PORT: quire proxy (QUIRE_b, one worker, CPU 0) with CONFIG, warmed; closed loop 64 conns from CPU 1;
# perf record 8 s; prints hits/s, CPU ns per hit (perf's cpu-clock event count over the hits) and in _copy_from_iter
# RATE=N: open loop at N requests/s (closed loop without it)
CFG=$1; PORT=$2
rm -rf /tmp/prof/volx-$PORT
taskset -c 0 /tmp/prof/QUIRE_b proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:$PORT --cache /tmp/prof/volx-$PORT --cache-size 1GiB --workers 1 --config $CFG > /tmp/prof/px-$PORT.log 2>&1 &
PID=$!
sleep 1
for i in 1 2 3; do /tmp/prof/QUIRE_b bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 10 --accept-encoding gzip > /dev/null; done
taskset -c 1 /tmp/prof/QUIRE_b bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 14 ${RATE:+--rate $RATE} --accept-encoding gzip > /tmp/prof/lx-$PORT.out 2>&1 &
sleep 3
perf record -F 4999 -o /tmp/prof/x-$PORT.data -p $PID -- sleep 8 > /dev/null 2>&1
sleep 4
kill $PID
rate=$(python3 -c "import json;d=json.loads(open('/tmp/prof/lx-$PORT.out').read().split('QUIRE-LOAD ',1)[1]);print(d['requests']/d['duration_us']*1e6)")
ev=$(perf report -i /tmp/prof/x-$PORT.data --stdio --no-children --sort dso 2>&1 | grep -oP "Event count \(approx.\): \K[0-9]+")
cp=$(perf report -i /tmp/prof/x-$PORT.data --stdio --no-children --sort sym 2>/dev/null | grep "_copy_from_iter" | grep -oE "^ *[0-9.]+")
python3 -c "ev=$ev; r=$rate; c=$cp; ns=ev/(r*8); print('hits/s %.0f'%r, 'ns/hit %.0f'%ns, 'copy ns/hit %.0f'%(ns*c/100))"
