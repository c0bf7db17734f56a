-- retry: schedule a failed task's next attempt (asynq rdb.Retry).
-- KEYS[1] asynq:{<q>}:t:<id>                  task hash
-- KEYS[2] asynq:{<q>}:active                  list
-- KEYS[3] asynq:{<q>}:lease                   zset
-- KEYS[4] asynq:{<q>}:retry                   zset, score = retry at (unix s)
-- KEYS[5] asynq:{<q>}:processed:<YYYY-MM-DD>  daily counter (UTC)
-- KEYS[6] asynq:{<q>}:failed:<YYYY-MM-DD>     daily counter (UTC)
-- KEYS[7] asynq:{<q>}:processed               all-time counter
-- KEYS[8] asynq:{<q>}:failed                  all-time counter
-- --
-- ARGV[1] task id
-- ARGV[2] encoded TaskMessage (error_msg, last_failed_at, retried updated)
-- ARGV[3] retry at, unix s
-- ARGV[4] daily counter expiry, unix s
-- ARGV[5] 1 when the error counts as a failure, else 0 (S24)
-- ARGV[6] MaxInt64
-- Returns: 1 done; 0 not in active; -1 no lease. When a counter could not
-- be incremented: {{bad counter keys}, 1} (see lib/count_stats).
-- asynq divergence: COMPATIBILITY.md#r6
if redis.call("LREM", KEYS[2], 0, ARGV[1]) == 0 then
    return 0
end
if redis.call("ZREM", KEYS[3], ARGV[1]) == 0 then
    return -1
end
redis.call("ZADD", KEYS[4], ARGV[3], ARGV[1])
redis.call("HSET", KEYS[1], "msg", ARGV[2], "state", "retry")
if ARGV[5] == "1" then
    count_daily(KEYS[5], 1, ARGV[4])
    count_daily(KEYS[6], 1, ARGV[4])
    count_failure_totals(KEYS[7], KEYS[8], ARGV[6])
end
return counted(1)
