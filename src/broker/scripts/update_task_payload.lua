-- update_task_payload: replace a task's msg, compare-and-set (asynq
-- rdb.UpdateTaskPayload: scheduled tasks; the dashboard's payload edit also
-- pending, retry and archived ones).
-- KEYS[1] asynq:{<q>}:t:<id>     task hash
-- KEYS[2] asynq:{<q>}:<state>    the container of the state read (ARGV[4])
-- --
-- ARGV[1] the new encoded TaskMessage
-- ARGV[2] the stored msg the new one was derived from (compare-and-set)
-- ARGV[3] task id
-- ARGV[4] the task's state when msg was read
-- Returns: {code, score}: code 1 updated, with score = the task's score in
-- KEYS[2] as a decimal string when KEYS[2] is a zset (nil otherwise, and
-- when missing from it); 0 no such task; -1 no longer in state ARGV[4]; -2
-- msg changed since it was read (nothing written; read again and retry).
-- score is nil for every code but 1.
-- Only msg changes; unique_key and the lock are kept, as in Go. The
-- compare-and-set on ARGV[2] is ours (Go overwrites concurrent changes).
-- asynq divergence: COMPATIBILITY.md#t7
if redis.call("EXISTS", KEYS[1]) == 0 then
    return {0, false}
end
local fields = redis.call("HMGET", KEYS[1], "state", "msg")
if fields[1] ~= ARGV[4] then
    return {-1, false}
end
if fields[2] ~= ARGV[2] then
    return {-2, false}
end
redis.call("HSET", KEYS[1], "msg", ARGV[1])
if redis.call("TYPE", KEYS[2]).ok ~= "zset" then
    return {1, false}
end
return {1, redis.call("ZSCORE", KEYS[2], ARGV[3])}
