#!/usr/bin/env bash
# round1-sched.sh PORT (B=quire binary, CONFIG=its --config): quire proxy on CPU 0 in front of the corpus's origin
# on 127.0.0.1:9000, warmed by two 5 s closed loops with Accept-Encoding $WARM_AE (default "gzip, br": other
# request heads than the run's), 5 s idle, then `perf record -e sched:sched_switch` on CPU 0 for 2 s across the
# start of an 80,000/s run of 3 s with Accept-Encoding: gzip. Prints the run's p99, p99.99 and max, and
# /proc/vmstat's compaction, huge-page and major-fault counters before and after; the trace is /tmp/sched-PORT.data.
PORT=$1; B=${B:?}; CONFIG=${CONFIG:?}
rm -rf /tmp/round1-vol-$PORT
taskset -c 0 $B proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:$PORT --cache /tmp/round1-vol-$PORT \
  --cache-size 1GiB --workers 1 --config $CONFIG > /tmp/sched-$PORT.log 2>&1 &
PID=$!; sleep 1
for i in 1 2; do $B bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 5 --accept-encoding "${WARM_AE:-gzip, br}" > /dev/null; done
sleep 5
grep -E "^(compact_stall|compact_fail|compact_success|thp_fault_alloc|thp_fault_fallback|pgmajfault|thp_collapse_alloc) " /proc/vmstat > /tmp/vm-before; perf record -q -e sched:sched_switch -C 0 -o /tmp/sched-$PORT.data -- sleep 2 > /dev/null 2>&1 &
PERF=$!; sleep 0.3
taskset -c 1 $B bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 3 --accept-encoding gzip --rate 80000 > /tmp/sched-load-$PORT.out 2>&1
python3 -c "
import json;d=json.loads(open('/tmp/sched-load-$PORT.out').read().split('QUIRE-LOAD ',1)[1])
print('p99 %.0f p9999 %.0f max %.0f us'%(d['p99_us'],d['p9999_us'],d['max_us']))"
grep -E "^(compact_stall|compact_fail|compact_success|thp_fault_alloc|thp_fault_fallback|pgmajfault|thp_collapse_alloc) " /proc/vmstat > /tmp/vm-after; paste /tmp/vm-before /tmp/vm-after
wait $PERF; kill $PID; rm -rf /tmp/round1-vol-$PORT
