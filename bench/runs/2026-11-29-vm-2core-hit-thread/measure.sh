# measure.sh, sourced by copyexp.sh and floorexp.sh: with the server's PID in $PID on CPU 0 and $PORT, a load of
# 64 connections from CPU 1 for 14 s (closed loop; RATE=N: open loop), `perf record` of the server for 8 s in its
# middle; sets $rate (hits/s), $ns (CPU ns per hit: perf's cpu-clock event count over the hits in the window) and
# $copy (% of samples in _copy_from_iter).
taskset -c 1 /tmp/prof/QUIRE_b bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 14 ${RATE:+--rate $RATE} --accept-encoding gzip > /tmp/prof/load-$PORT.out 2>&1 &
sleep 3
perf record -F 4999 -o /tmp/prof/rec-$PORT.data -p $PID -- sleep 8 > /dev/null 2>&1
sleep 4
kill $PID
rate=$(python3 -c "import json;d=json.loads(open('/tmp/prof/load-$PORT.out').read().split('QUIRE-LOAD ',1)[1]);print(d['requests']/d['duration_us']*1e6)")
ev=$(perf report -i /tmp/prof/rec-$PORT.data --stdio --no-children --sort dso 2>&1 | grep -oP "Event count \(approx.\): \K[0-9]+")
ns=$(python3 -c "print($ev/($rate*8))")
copy=$(perf report -i /tmp/prof/rec-$PORT.data --stdio --no-children --sort sym 2>/dev/null | grep "_copy_from_iter" | grep -oE "^ *[0-9.]+")
