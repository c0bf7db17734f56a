-- enqueue: create a pending task (asynq rdb.Enqueue, rdb.EnqueueUnique).
-- KEYS[1] asynq:{<q>}:t:<id>        task hash
-- KEYS[2] asynq:{<q>}:pending       list
-- KEYS[3] asynq:{<q>}:unique:<...>  uniqueness lock (present only when unique)
-- --
-- ARGV[1] encoded TaskMessage
-- ARGV[2] task id
-- ARGV[3] now, unix ns (pending_since)
-- ARGV[4] lock TTL, whole seconds (only when KEYS[3] is given)
-- Returns: 1 created; 0 a task with this id exists (nothing changed);
--          -1 the lock is held by another task (nothing changed).
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
    redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "pending",
        "pending_since", ARGV[3], "unique_key", KEYS[3])
else
    redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "pending",
        "pending_since", ARGV[3])
end
redis.call("LPUSH", KEYS[2], ARGV[2])
return 1
