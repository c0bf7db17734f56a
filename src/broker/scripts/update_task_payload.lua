-- update_task_payload: replace a scheduled task's msg (asynq rdb.UpdateTaskPayload).
-- KEYS[1] asynq:{<q>}:t:<id>     task hash
-- KEYS[2] asynq:{<q>}:scheduled  zset, score = process-at (unix s)
-- --
-- ARGV[1] the new encoded TaskMessage
-- ARGV[2] the stored msg the new one was derived from (compare-and-set)
-- ARGV[3] task id
-- Returns: {code, score}: code 1 updated, with score = the task's process-at
-- as a decimal string (nil if missing from KEYS[2]); 0 no such task; -1 not
-- in scheduled state; -2 msg changed since it was read (nothing written;
-- read again and retry). score is nil for every code but 1.
-- Only msg changes; unique_key and the lock are kept, as in Go. The
-- compare-and-set on ARGV[2] is ours (Go overwrites concurrent changes).
-- asynq divergence: COMPATIBILITY.md#t7
if redis.call("EXISTS", KEYS[1]) == 0 then
    return {0, false}
end
local fields = redis.call("HMGET", KEYS[1], "state", "msg")
if fields[1] ~= "scheduled" then
    return {-1, false}
end
if fields[2] ~= ARGV[2] then
    return {-2, false}
end
redis.call("HSET", KEYS[1], "msg", ARGV[1])
return {1, redis.call("ZSCORE", KEYS[2], ARGV[3])}
