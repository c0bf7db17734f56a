#!/usr/bin/env bash
# Smoke test for the asynq-peer interop CLI.
#
# Starts a private redis-server (default port 16399, override with PORT=...),
# builds ./cmd/asynq-peer into a temp dir, runs every major command, checks
# that each one prints valid JSON (and a few expected values), then stops
# redis. Exits non-zero on the first failed check.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
PORT="${PORT:-16399}"
TMP="$(mktemp -d)"
BIN="$TMP/asynq-peer"
REDIS_PID=""
BG_PIDS=()

cleanup() {
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	if [[ -n "$REDIS_PID" ]]; then
		kill "$REDIS_PID" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$REDIS_PID" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

die() {
	echo "FAIL: $*" >&2
	exit 1
}

if [[ "$PORT" == 6379 ]]; then die "refusing to use port 6379"; fi
if redis-cli -p "$PORT" ping >/dev/null 2>&1; then
	die "something already listens on port $PORT; set PORT=..."
fi

redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
	--daemonize yes --pidfile "$TMP/redis.pid" --logfile "$TMP/redis.log"
for _ in $(seq 50); do
	redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
	sleep 0.1
done
REDIS_PID="$(cat "$TMP/redis.pid")"
echo "redis-server pid $REDIS_PID on port $PORT"

(cd "$HERE" && go build -o "$BIN" ./cmd/asynq-peer)
echo "built $BIN"

COUNT_FILE="$TMP/invocations" # peer runs in subshells; count via a file
: >"$COUNT_FILE"

# peer ARGS... : run the CLI, require exit 0 and one valid JSON document.
peer() {
	local out
	out="$("$BIN" --redis "127.0.0.1:$PORT" "$@")" || die "exit $? from: $* -> $out"
	jq -e . >/dev/null <<<"$out" || die "invalid JSON from: $* -> $out"
	echo x >>"$COUNT_FILE"
	printf '%s\n' "$out"
}

# peer_err CODE ARGS... : run the CLI, require exit 1 and an error document
# with the given code.
peer_err() {
	local code="$1" out rc=0
	shift
	out="$("$BIN" --redis "127.0.0.1:$PORT" "$@")" || rc=$?
	[[ $rc == 1 ]] || die "expected exit 1, got $rc from: $* -> $out"
	jq -e --arg c "$code" '.code == $c and (.error | type == "string")' >/dev/null <<<"$out" ||
		die "expected code $code from: $* -> $out"
	echo x >>"$COUNT_FILE"
	printf '%s\n' "$out"
}

# check JSON FILTER : assert a jq filter is true on JSON.
check() {
	jq -e "$2" >/dev/null <<<"$1" || die "check '$2' failed on: $1"
}

# check_lines FILE : every line of FILE must be valid JSON.
check_lines() {
	local n=0
	while IFS= read -r line; do
		jq -e . >/dev/null <<<"$line" || die "invalid JSON line in $1: $line"
		n=$((n + 1))
	done <"$1"
	echo "$n"
}

echo "== enqueue"
NOW=$(date +%s)
T1=$(peer enqueue --type email:send --payload hello --queue q1 --max-retry 3 \
	--timeout 30s --deadline $((NOW + 3600)) --retention 1h \
	--header a=b --header trace=x=y --task-id t1)
echo "$T1"
check "$T1" '.id == "t1" and .queue == "q1" and .state == "pending" and .max_retry == 3
	and .timeout_secs == 30 and .retention_secs == 3600 and .payload_hex == "68656c6c6f"
	and .headers == {"a":"b","trace":"x=y"}'
peer_err task_id_conflict enqueue --type email:send --queue q1 --task-id t1
T2=$(peer enqueue --type report --payload-hex 00ff10 --queue q1 --process-in 1h --unique 10m)
echo "$T2"
check "$T2" '.state == "scheduled" and .payload_hex == "00ff10" and .next_process_at > 0'
peer_err duplicate_task enqueue --type report --payload-hex 00ff10 --queue q1 --process-in 1h --unique 10m
T3=$(peer enqueue --type later --payload "" --queue q1 --process-at $((NOW + 7200)))
check "$T3" '.state == "scheduled" and .payload == "" and .headers == {}'
T4=$(peer enqueue --type agg --nil-payload --queue q1 --group g1)
check "$T4" '.state == "aggregating" and .group == "g1" and .payload_hex == ""'
T2ID=$(jq -r .id <<<"$T2")
T3ID=$(jq -r .id <<<"$T3")

echo "== inspect"
check "$(peer inspect queues)" '. == ["q1"]'
QI=$(peer inspect queue-info --queue q1)
echo "$QI"
check "$QI" '.queue == "q1" and .pending == 1 and .scheduled == 2 and .aggregating == 1 and .groups == 1 and .paused == false'
check "$(peer inspect history --queue q1 --days 3)" 'length == 3 and (.[0].date | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}$"))'
check "$(peer inspect task --queue q1 --id t1)" '.id == "t1" and .type == "email:send"'
peer_err task_not_found inspect task --queue q1 --id nope
peer_err queue_not_found inspect task --queue nosuchq --id nope
check "$(peer inspect list --queue q1 --state scheduled)" 'length == 2'
check "$(peer inspect list --queue q1 --state scheduled --page 1 --size 1)" 'length == 1'
check "$(peer inspect list --queue q1 --state aggregating --group g1)" 'length == 1 and .[0].group == "g1"'
check "$(peer inspect list --queue q1 --state completed)" '. == []'
check "$(peer inspect groups --queue q1)" '. == [{"group":"g1","size":1}]'
UP=$(peer inspect update-payload --queue q1 --id "$T3ID" --payload updated)
check "$UP" '.payload == "updated" and .state == "scheduled"'

echo "== run / archive / delete"
check "$(peer inspect run --queue q1 --id "$T2ID")" '.ok == true'
check "$(peer inspect task --queue q1 --id "$T2ID")" '.state == "pending"'
peer_err failed_precondition inspect run --queue q1 --id "$T2ID"
check "$(peer inspect archive --queue q1 --id "$T2ID")" '.ok == true'
peer_err task_already_archived inspect archive --queue q1 --id "$T2ID"
check "$(peer inspect delete --queue q1 --id "$T2ID")" '.ok == true'
check "$(peer inspect archive-all --queue q1 --state scheduled)" '.count == 1'
check "$(peer inspect run-all --queue q1 --state archived)" '.count == 1'
check "$(peer inspect run-all --queue q1 --state aggregating --group g1)" '.count == 1'
peer_err other inspect run-all --queue q1 --state pending
check "$(peer inspect delete-all --queue q1 --state pending)" '.count == 3'

echo "== pause / unpause / delete-queue"
check "$(peer inspect pause --queue q1)" '.ok == true'
check "$(peer inspect queue-info --queue q1)" '.paused == true'
peer_err other inspect pause --queue q1
check "$(peer inspect unpause --queue q1)" '.ok == true'
peer enqueue --type x --queue q2 >/dev/null
peer_err queue_not_empty inspect delete-queue --queue q2
check "$(peer inspect delete-queue --queue q2 --force)" '.ok == true'
check "$(peer inspect delete-queue --queue q1)" '.ok == true'

echo "== work ok"
for i in 1 2 3; do peer enqueue --type w --payload "p$i" --queue wq --header n="$i" --retention 1h >/dev/null; done
"$BIN" --redis "127.0.0.1:$PORT" work --queues wq=1 --count 2 >"$TMP/work_ok.out"
[[ $(check_lines "$TMP/work_ok.out") == 2 ]] || die "work ok: expected 2 lines: $(cat "$TMP/work_ok.out")"
cat "$TMP/work_ok.out"
check "$(head -1 "$TMP/work_ok.out")" '.type == "w" and .queue == "wq" and .retry_count == 0 and .max_retry == 25 and (.headers | has("n"))'
check "$(peer inspect queue-info --queue wq)" '.pending == 1 and .completed == 2 and .processed == 2'

echo "== work fail (retry then archive)"
peer enqueue --type f --payload boom --queue fq --max-retry 1 >/dev/null
"$BIN" --redis "127.0.0.1:$PORT" work --queues fq=1 --count 2 --behaviour fail --retry-delay 0s \
	--delayed-check-interval 200ms --max-duration 20s >"$TMP/work_fail.out"
[[ $(check_lines "$TMP/work_fail.out") == 2 ]] || die "work fail: expected 2 lines"
cat "$TMP/work_fail.out"
check "$(sed -n 2p "$TMP/work_fail.out")" '.retry_count == 1 and .max_retry == 1'
AR=$(peer inspect list --queue fq --state archived)
check "$AR" 'length == 1 and .[0].last_err == "peer failure" and .[0].retried == 1 and .[0].last_failed_at > 0'

echo "== work result"
peer enqueue --type r --queue rq --retention 1h >/dev/null
"$BIN" --redis "127.0.0.1:$PORT" work --queues rq=1 --count 1 --behaviour result:done >"$TMP/work_res.out"
check_lines "$TMP/work_res.out" >/dev/null
check "$(peer inspect list --queue rq --state completed)" '.[0].result_hex == "646f6e65" and .[0].completed_at > 0'

echo "== servers (work in background)"
peer enqueue --type slow --queue sq >/dev/null
"$BIN" --redis "127.0.0.1:$PORT" work --queues sq=2,other=1 --concurrency 2 --strict \
	--behaviour sleep:30s --max-duration 30s --shutdown-timeout 1s >"$TMP/work_bg.out" &
BG=$!
BG_PIDS+=("$BG")
SV="[]"
for _ in $(seq 80); do # heartbeats are every 5s; wait for the active worker
	SV=$(peer inspect servers)
	jq -e 'length == 1 and (.[0].active_workers | length) == 1' >/dev/null <<<"$SV" && break
	sleep 0.1
done
echo "$SV"
check "$SV" '.[0].concurrency == 2 and .[0].queues == {"sq":2,"other":1} and .[0].strict_priority == true
	and .[0].status == "active" and .[0].active_workers[0].task_type == "slow"'
SLOW=$(jq -r '.[0].active_workers[0].task_id' <<<"$SV")
check "$(peer inspect cancel --id "$SLOW")" '.ok == true'
for _ in $(seq 50); do
	jq -e 'length == 1' >/dev/null <<<"$(peer inspect list --queue sq --state retry)" && break
	sleep 0.1
done
check "$(peer inspect task --queue sq --id "$SLOW")" '.state == "retry" and .last_err == "context canceled"'
kill -TERM "$BG"
wait "$BG" || die "background work exited with $?"
check_lines "$TMP/work_bg.out" >/dev/null
check "$(peer inspect servers)" '. == []'

echo "== schedule"
"$BIN" --redis "127.0.0.1:$PORT" schedule --spec "@every 1s" --type cron --payload cp \
	--queue cq --max-retry 2 --timeout 5s --for 3s >"$TMP/sched.out" &
SP=$!
BG_PIDS+=("$SP")
sleep 2.5
EID=$(jq -r .entry_id "$TMP/sched.out")
SE=$(peer inspect scheduler-entries)
echo "$SE"
jq -e --arg e "$EID" '.[0].id == $e' >/dev/null <<<"$SE" || die "entry id mismatch"
check "$SE" '.[0].spec == "@every 1s" and .[0].task_type == "cron" and .[0].opts == ["MaxRetry(2)","Queue(\"cq\")","Timeout(5s)"]'
check "$(peer inspect scheduler-events --entry "$EID")" 'length >= 1 and (.[0].task_id | length) > 0'
wait "$SP" || die "schedule exited with $?"

echo "== usage error"
peer_err other inspect list --queue q1 --state bogus

echo "OK: $(wc -l <"$COUNT_FILE") CLI invocations checked (plus work/schedule JSON lines)"
