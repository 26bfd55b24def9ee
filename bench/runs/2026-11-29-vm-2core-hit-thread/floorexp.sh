#!/usr/bin/env bash
# floorexp.sh PORT [SPLIT]: the floor (QUIRE_fsplit) over 2,000 bodies at saturation; copy ns per hit
# RATE=N: open loop at N requests/s (closed loop without it)
PORT=$1; SPLIT=$2
if [ -n "$2" ]; then export FLOOR_SPLIT=1; fi
taskset -c 0 /tmp/prof/QUIRE_fsplit bench floor --listen 127.0.0.1:$PORT --bytes 14289 --distinct 2000 > /dev/null 2>&1 &
PID=$!
unset FLOOR_SPLIT
sleep 1
. "$(dirname "$0")/measure.sh"
python3 -c "r=$rate; ns=$ns; c=$copy; print('split=${SPLIT:-no}', 'hits/s %.0f'%r, 'ns/hit %.0f'%ns, 'copy %% %.1f'%c, 'copy ns/hit %.0f'%(ns*c/100))"
