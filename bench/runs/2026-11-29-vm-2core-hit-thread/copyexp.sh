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
. "$(dirname "$0")/measure.sh"
python3 -c "r=$rate; ns=$ns; c=$copy; print('hits/s %.0f'%r, 'ns/hit %.0f'%ns, 'copy ns/hit %.0f'%(ns*c/100))"
