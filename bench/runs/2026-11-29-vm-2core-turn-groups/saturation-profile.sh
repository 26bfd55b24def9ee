#!/usr/bin/env bash
# saturation-profile.sh KIND PORT: a server on CPU 0 (KIND quire: `proxy --workers 1` on the corpus's origin at
# 127.0.0.1:9000, warmed; KIND floor: `bench floor --distinct 2000`), a closed loop of 64 connections from CPU 1 for
# 14 s, and `perf record -g` of the server for 8 s in its middle. Prints hits/s and, per hit, the CPU the profile
# saw (its cpu-clock event count over the hits in the window; perf's own cost is in every figure), the body's copy
# into the socket (`_copy_from_iter`), the wake-up of the generator's sleeping reader (`sock_def_readable` with what
# it calls), the interrupts sent (`native_write_msr`: on this VM, an IPI is an MSR write that traps), and how much
# of the server's memory the kernel mapped in 2 MiB pages.
#   B=server binary (quire), G=generator binary (default B), CONFIG=quire's --config.
#   Scratch builds only (not committed): QUIRE_CHUNK=N made the hit loop read N ready connections per group;
#   SPIN=1 makes the generator spin (`bench load --spin`: its epoll wait never sleeps). In this folder's runs it was
#   a scratch generator's QUIRE_LOAD_SPIN, which did the same; `--spin` replaced it a stop later.
#   RATE=R runs the generator open loop at R requests/s instead of a closed loop (added a stop later, for
#   ../2026-11-30-vm-2core-spin/profile-80k.txt).
KIND=$1; PORT=$2; B=${B:?server binary}; G=${G:-$B}
if [ "$KIND" = quire ]; then
  rm -rf /tmp/sat-vol-$PORT
  taskset -c 0 $B proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:$PORT --cache /tmp/sat-vol-$PORT \
    --cache-size 1GiB --workers 1 ${CONFIG:+--config $CONFIG} > /tmp/sat-$PORT.log 2>&1 &
  PID=$!; sleep 1
  for i in 1 2 3; do $B bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 \
    --duration 10 --accept-encoding gzip > /dev/null; done
else
  taskset -c 0 $B bench floor --listen 127.0.0.1:$PORT --bytes 14289 --distinct 2000 > /dev/null 2>&1 &
  PID=$!; sleep 1
fi
taskset -c 1 $G bench load ${SPIN:+--spin} ${RATE:+--rate $RATE} --host 127.0.0.1:$PORT \
  --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 14 --accept-encoding gzip > /tmp/sat-load-$PORT.out 2>&1 &
sleep 3
# How much of the mapping the kernel maps in 2 MiB pages (quire's volume; the floor's heap shows as AnonHugePages).
pmd=$(grep -E "^(FilePmdMapped|AnonHugePages)" /proc/$PID/smaps_rollup | awk '{printf "%s %s kB  ", $1, $2}')
perf record -g -F 2999 -o /tmp/sat-$PORT.data -p $PID -- sleep 8 > /dev/null 2>&1
sleep 4
kill $PID
share() { # the percentage of samples in symbol $2 (self, or with children for $1 = --children)
  perf report -i /tmp/sat-$PORT.data --stdio $1 --sort sym 2>/dev/null | grep -E "\] $2\$" | head -1 | grep -oE "^ *[0-9.]+"; }
rate=$(python3 -c "import json;d=json.loads(open('/tmp/sat-load-$PORT.out').read().split('QUIRE-LOAD ',1)[1]);print(d['requests']/d['duration_us']*1e6)")
ev=$(perf report -i /tmp/sat-$PORT.data --stdio --no-children --sort dso 2>&1 | grep -oP "Event count \(approx.\): \K[0-9]+")
copy=$(share --no-children _copy_from_iter); wake=$(share --children sock_def_readable); msr=$(share --no-children native_write_msr)
python3 -c "ns=$ev/($rate*8); print('$KIND hits/s %.0f'%$rate, '$pmd', 'ns/hit %.0f'%ns, 'copy %.0f'%(ns*${copy:-0}/100), 'wake %.0f'%(ns*${wake:-0}/100), 'msr %.0f'%(ns*${msr:-0}/100))"
