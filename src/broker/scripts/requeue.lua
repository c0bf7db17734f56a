-- requeue: give an unfinished task back at shutdown (asynq rdb.Requeue).
-- KEYS[1] asynq:{<q>}:active   list
-- KEYS[2] asynq:{<q>}:lease    zset
-- KEYS[3] asynq:{<q>}:pending  list
-- KEYS[4] asynq:{<q>}:t:<id>   task hash
-- --
-- ARGV[1] task id
-- Returns: 1 requeued; 0 not in active; -1 no lease.
-- The id goes to the right end of pending (next to run); Retried, msg and
-- counters are unchanged; no pending_since, as in Go.
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
    return 0
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
    return -1
end
redis.call("RPUSH", KEYS[3], ARGV[1])
redis.call("HSET", KEYS[4], "state", "pending")
return 1
