#!/usr/bin/env bash
# floorexp.sh PORT [SPLIT]: the floor (QUIRE_fsplit) over 2,000 bodies at saturation; copy ns per hit
# RATE=N: open loop at N requests/s (closed loop without it)
PORT=$1
if [ -n "$2" ]; then export FLOOR_SPLIT=1; fi
taskset -c 0 /tmp/prof/QUIRE_fsplit bench floor --listen 127.0.0.1:$PORT --bytes 14289 --distinct 2000 > /dev/null 2>&1 &
FP=$!
unset FLOOR_SPLIT
sleep 1
taskset -c 1 /tmp/prof/QUIRE_b bench load --host 127.0.0.1:$PORT --paths /tmp/peerbench/site/urls.txt --connections 64 --duration 14 ${RATE:+--rate $RATE} --accept-encoding gzip > /tmp/prof/lf-$PORT.out 2>&1 &
sleep 3
perf record -F 4999 -o /tmp/prof/fx-$PORT.data -p $FP -- sleep 8 > /dev/null 2>&1
sleep 4
kill $FP
rate=$(python3 -c "import json;d=json.loads(open('/tmp/prof/lf-$PORT.out').read().split('QUIRE-LOAD ',1)[1]);print(d['requests']/d['duration_us']*1e6)")
ev=$(perf report -i /tmp/prof/fx-$PORT.data --stdio --no-children --sort dso 2>&1 | grep -oP "Event count \(approx.\): \K[0-9]+")
cp=$(perf report -i /tmp/prof/fx-$PORT.data --stdio --no-children --sort sym 2>/dev/null | grep "_copy_from_iter" | grep -oE "^ *[0-9.]+")
python3 -c "ev=$ev; r=$rate; c=$cp; ns=ev/(r*8); print('split=${2:-no}', 'hits/s %.0f'%r, 'ns/hit %.0f'%ns, 'copy %% %.1f'%c, 'copy ns/hit %.0f'%(ns*c/100))"
