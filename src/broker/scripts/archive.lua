-- archive: move a failed task out of retries into the archive, trimming the
-- archive in the same step (asynq rdb.Archive; S15, S16).
-- KEYS[1] asynq:{<q>}:t:<id>                  task hash
-- KEYS[2] asynq:{<q>}:active                  list
-- KEYS[3] asynq:{<q>}:lease                   zset
-- KEYS[4] asynq:{<q>}:archived                zset, score = archived at (unix s)
-- KEYS[5] asynq:{<q>}:processed:<YYYY-MM-DD>  daily counter (UTC)
-- KEYS[6] asynq:{<q>}:failed:<YYYY-MM-DD>     daily counter (UTC)
-- KEYS[7] asynq:{<q>}:processed               all-time counter
-- KEYS[8] asynq:{<q>}:failed                  all-time counter
-- --
-- ARGV[1] task id
-- ARGV[2] encoded TaskMessage (error_msg, last_failed_at updated)
-- ARGV[3] now, unix s
-- ARGV[4] trim cutoff, unix s (now - 90 days)
-- ARGV[5] archive size limit (10000)
-- ARGV[6] daily counter expiry, unix s
-- ARGV[7] MaxInt64
-- ARGV[8] task key prefix asynq:{<q>}:t:
-- Returns: 1 done; 0 not in active; -1 no lease. When a counter could not
-- be incremented: {{bad counter keys}, 1} (see lib/count_stats).
-- The task is written before the trim, so the set and the hashes stay
-- consistent even if the trim reaches the new task (clock skew).
-- asynq divergence: COMPATIBILITY.md#g3, COMPATIBILITY.md#r6
if redis.call("LREM", KEYS[2], 0, ARGV[1]) == 0 then
    return 0
end
if redis.call("ZREM", KEYS[3], ARGV[1]) == 0 then
    return -1
end
redis.call("ZADD", KEYS[4], ARGV[3], ARGV[1])
redis.call("HSET", KEYS[1], "msg", ARGV[2], "state", "archived")
trim_archive(KEYS[4], ARGV[8], ARGV[4], ARGV[5])
count_daily(KEYS[5], 1, ARGV[6])
count_daily(KEYS[6], 1, ARGV[6])
count_failure_totals(KEYS[7], KEYS[8], ARGV[7])
return counted(1)
