#!/usr/bin/env bash
# rate-profile.sh KIND PORT: saturation-profile.sh of bench/runs/2026-11-29-vm-2core-turn-groups with two knobs:
# RATE=R runs the generator open loop at R requests/s, SPIN=1 makes it spin (`bench load --spin`). A server on CPU 0
# (KIND quire: `proxy --workers 1` on the corpus's origin at 127.0.0.1:9000, warmed; KIND floor: `bench floor
# --distinct 2000`), the load from CPU 1 for 14 s, `perf record -g` of the server for 8 s in its middle. Prints hits/s
# and, per hit, the CPU the profile saw (perf's own cost is in every figure), the body's copy into the socket
# (`_copy_from_iter`), the generator's wake-up (`sock_def_readable` with its callees) and the IPIs
# (`native_write_msr`). B=server binary, G=generator binary (default B), CONFIG=quire's --config.
KIND=$1; PORT=$2; B=${B:?server binary}; G=${G:-$B}
if [ "$KIND" = quire ]; then
  rm -rf /tmp/rate-vol-$PORT
  taskset -c 0 $B proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:$PORT --cache /tmp/rate-vol-$PORT \
    --cache-size 1GiB --workers 1 ${CONFIG:+--config $CONFIG} > /tmp/rate-$PORT.log 2>&1 &
  PID=$!; sleep 1
  for i in 1 2 3; do $B bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 \
    --duration 10 --accept-encoding gzip > /dev/null; done
else
  taskset -c 0 $B bench floor --listen 127.0.0.1:$PORT --bytes 14289 --distinct 2000 > /dev/null 2>&1 &
  PID=$!; sleep 1
fi
taskset -c 1 $G bench load ${SPIN:+--spin} --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt \
  --connections 64 --duration 14 --accept-encoding gzip ${RATE:+--rate $RATE} > /tmp/rate-load-$PORT.out 2>&1 &
sleep 3
# How much of the mapping the kernel maps in 2 MiB pages (quire's volume; the floor's heap shows as AnonHugePages).
pmd=$(grep -E "^(FilePmdMapped|AnonHugePages)" /proc/$PID/smaps_rollup | awk '{printf "%s %s kB  ", $1, $2}')
perf record -g -F 2999 -o /tmp/rate-$PORT.data -p $PID -- sleep 8 > /dev/null 2>&1
sleep 4
kill $PID
share() { # the percentage of samples in symbol $2 (self, or with children for $1 = --children)
  perf report -i /tmp/rate-$PORT.data --stdio $1 --sort sym 2>/dev/null | grep -E "\] $2\$" | head -1 | grep -oE "^ *[0-9.]+"; }
rate=$(python3 -c "import json;d=json.loads(open('/tmp/rate-load-$PORT.out').read().split('QUIRE-LOAD ',1)[1]);print(d['requests']/d['duration_us']*1e6)")
ev=$(perf report -i /tmp/rate-$PORT.data --stdio --no-children --sort dso 2>&1 | grep -oP "Event count \(approx.\): \K[0-9]+")
copy=$(share --no-children _copy_from_iter); wake=$(share --children sock_def_readable); msr=$(share --no-children native_write_msr)
python3 -c "ns=$ev/($rate*8); print('$KIND hits/s %.0f'%$rate, '$pmd', 'ns/hit %.0f'%ns, 'copy %.0f'%(ns*${copy:-0}/100), 'wake %.0f'%(ns*${wake:-0}/100), 'msr %.0f'%(ns*${msr:-0}/100))"
