#!/usr/bin/env bash
# round1-heads.sh PORT: quire proxy on CPU 0, warmed by two 5 s closed loops of `bench load` whose Accept-Encoding
# is $WARM_AE (default gzip: the same request heads as the runs), then GAP s idle, then three 80,000/s runs of 3 s
# with Accept-Encoding: gzip, each on new connections. Prints each run's p99, p99.99, max and first 0.5 s.
PORT=$1; B=${B:?the quire binary}
rm -rf /tmp/round1-vol-$PORT
taskset -c 0 $B proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:$PORT --cache /tmp/round1-vol-$PORT \
  --cache-size 1GiB --workers 1 --config ${CONFIG:-quire.toml} > /tmp/round1-$PORT.log 2>&1 &
PID=$!; sleep 1
for i in 1 2; do $B bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 5 --accept-encoding "${WARM_AE:-gzip}" > /dev/null; done
sleep ${GAP:-2}
for i in 1 2 3; do
taskset -c 1 $B bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 3 --accept-encoding gzip --rate 80000 > /tmp/round1-load-$PORT.out 2>&1
python3 -c "
import json;d=json.loads(open('/tmp/round1-load-$PORT.out').read().split('QUIRE-LOAD ',1)[1])
print('run $i: p99 %.0f p9999 %.0f max %.0f us'%(d['p99_us'],d['p9999_us'],d['max_us']), 'timeline', d['timeline'][:5])"
sleep 1
done
kill $PID
