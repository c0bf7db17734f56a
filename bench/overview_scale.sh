#!/bin/bash
# Overview at many queues (issue 15 targets 2, 3): seeds a private
# redis-server (no persistence) with N queues of 3 pending tasks each,
# 1,000 queues per script call (bench/seed_queues.lua), starts the release
# binary with --no-engine, and prints the cold view (first after start),
# warm views, page sizes, /api/queues, RSS and the budget's use.
#
#   cargo build --release --bin asynqdeck
#   bench/overview_scale.sh 5000 [extra serve flags]
set -e
n=${1:-5000}; shift || true
here=$(cd "$(dirname "$0")" && pwd)
rp=$((20000 + RANDOM % 10000)); lp=$((rp + 1))
redis-server --port $rp --save "" --appendonly no --daemonize yes --pidfile /tmp/ovs$rp.pid --logfile /dev/null
trap 'redis-cli -p $rp shutdown nosave >/dev/null 2>&1 || true' EXIT
sleep 0.5
now=$(date +%s%N); i=0
while [ $i -lt $n ]; do
  c=1000; [ $((n - i)) -lt $c ] && c=$((n - i))
  redis-cli -p $rp --eval "$here/seed_queues.lua" , $i $c $now >/dev/null
  i=$((i + c))
done
"$here/../target/release/asynqdeck" serve --redis-url redis://127.0.0.1:$rp --listen 127.0.0.1:$lp --no-engine "$@" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:$lp/static/app.css && break; sleep 0.1; done
echo "queues: $(redis-cli -p $rp scard asynq:queues)"
echo "cold /: $(curl -s -o /dev/null -w '%{time_total} s, %{size_download} B' http://127.0.0.1:$lp/)"
sleep 1
echo -n "warm / (s):"; for _ in $(seq 1 10); do curl -s -o /dev/null -w ' %{time_total}' http://127.0.0.1:$lp/; done; echo
echo -n "warm /?sort=pending&dir=desc&page=3 (s):"; for _ in $(seq 1 5); do curl -s -o /dev/null -w ' %{time_total}' "http://127.0.0.1:$lp/?sort=pending&dir=desc&page=3"; done; echo
echo "page of 150 rows: $(curl -s -o /dev/null -w '%{size_download} B' "http://127.0.0.1:$lp/?size=150")"
echo "/api/queues: $(curl -s -o /dev/null -w '%{time_total} s, %{size_download} B' http://127.0.0.1:$lp/api/queues)"
sleep 10
grep -E "VmHWM|VmRSS" /proc/$pid/status | tr -s ' \t\n' ' '; echo
curl -s http://127.0.0.1:$lp/redis | grep -o 'data-used="[a-z]*">[^<]*' | tr '\n' ' '; echo
kill $pid
