-- schedule: create a scheduled task (asynq rdb.Schedule, rdb.ScheduleUnique).
-- KEYS[1] asynq:{<q>}:t:<id>        task hash
-- KEYS[2] asynq:{<q>}:scheduled     zset, score = process-at (unix s)
-- KEYS[3] asynq:{<q>}:unique:<...>  uniqueness lock (present only when unique)
-- --
-- ARGV[1] encoded TaskMessage
-- ARGV[2] task id
-- ARGV[3] process-at, unix s
-- ARGV[4] lock TTL, whole seconds (only when KEYS[3] is given)
-- Returns: 1 created; 0 id exists; -1 lock held by another task.
-- No group hash field even when msg has a group, as Go (COMPATIBILITY.md#c3).
-- The id is checked before the lock is taken, so a conflict never leaves a
-- lock behind (Go takes the lock first and leaks it).
-- asynq divergence: COMPATIBILITY.md#c1
if redis.call("EXISTS", KEYS[1]) == 1 then
    return 0
end
if KEYS[3] then
    if not redis.call("SET", KEYS[3], ARGV[2], "NX", "EX", ARGV[4]) then
        return -1
    end
    redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "scheduled", "unique_key", KEYS[3])
else
    redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "scheduled")
end
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
return 1
