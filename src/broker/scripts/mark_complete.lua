-- mark_complete: keep a successful task as completed for its retention
-- (asynq rdb.MarkAsComplete).
-- KEYS[1] asynq:{<q>}:active                  list
-- KEYS[2] asynq:{<q>}:lease                   zset
-- KEYS[3] asynq:{<q>}:completed               zset, score = expiry (unix s)
-- KEYS[4] asynq:{<q>}:t:<id>                  task hash
-- KEYS[5] asynq:{<q>}:processed:<YYYY-MM-DD>  daily counter (UTC)
-- KEYS[6] asynq:{<q>}:processed               all-time counter
-- KEYS[7] asynq:{<q>}:unique:<...>            the task's lock (only when unique)
-- --
-- ARGV[1] task id
-- ARGV[2] daily counter expiry, unix s
-- ARGV[3] completed-set score: completed_at + retention, unix s
-- ARGV[4] encoded TaskMessage with completed_at set
-- ARGV[5] MaxInt64
-- Returns: 1 done; 0 not in active; -1 no lease; -2 already completed (Go:
-- error reply INTERNAL, after the same steps). When a counter could not be
-- incremented: {{bad counter keys}, 1} (see lib/count_stats).
-- asynq divergence: COMPATIBILITY.md#w7, COMPATIBILITY.md#r6
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
    return 0
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
    return -1
end
if redis.call("ZADD", KEYS[3], ARGV[3], ARGV[1]) ~= 1 then
    return -2
end
redis.call("HSET", KEYS[4], "msg", ARGV[4], "state", "completed")
count_daily(KEYS[5], 1, ARGV[2])
count_total(KEYS[6], 1, ARGV[5])
if KEYS[7] and redis.call("GET", KEYS[7]) == ARGV[1] then
    redis.call("DEL", KEYS[7])
end
return counted(1)
