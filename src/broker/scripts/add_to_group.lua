-- add_to_group: create an aggregating task (asynq rdb.AddToGroup, AddToGroupUnique).
-- KEYS[1] asynq:{<q>}:t:<id>        task hash
-- KEYS[2] asynq:{<q>}:g:<group>     zset, score = time added (unix s)
-- KEYS[3] asynq:{<q>}:groups        set of group names
-- KEYS[4] asynq:{<q>}:unique:<...>  uniqueness lock (present only when unique)
-- --
-- ARGV[1] encoded TaskMessage
-- ARGV[2] task id
-- ARGV[3] now, unix s
-- ARGV[4] group name
-- ARGV[5] lock TTL, whole seconds (only when KEYS[4] is given)
-- Returns: 1 created; 0 id exists; -1 lock held by another task.
-- Unlike Go, the unique variant records unique_key in the hash so deleting
-- the task releases its lock, and the id is checked before the lock is taken
-- so a conflict never leaves a lock behind.
-- asynq divergence: COMPATIBILITY.md#c2, COMPATIBILITY.md#c1
if redis.call("EXISTS", KEYS[1]) == 1 then
    return 0
end
if KEYS[4] then
    if not redis.call("SET", KEYS[4], ARGV[2], "NX", "EX", ARGV[5]) then
        return -1
    end
    redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "aggregating",
        "group", ARGV[4], "unique_key", KEYS[4])
else
    redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "aggregating", "group", ARGV[4])
end
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
redis.call("SADD", KEYS[3], ARGV[4])
return 1
