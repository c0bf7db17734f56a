-- delete_task: delete one task and release its uniqueness lock (asynq rdb.DeleteTask).
-- KEYS[1] asynq:{<q>}:t:<id>  task hash
-- KEYS[2] asynq:{<q>}:groups  set of group names
-- --
-- ARGV[1] task id
-- ARGV[2] asynq:{<q>}:    queue key prefix (container = prefix .. state)
-- ARGV[3] asynq:{<q>}:g:  group key prefix (group zset = prefix .. group)
-- Returns: 1 deleted; 0 no such task; -1 active;
--          -3 the id is not in the container its state names;
--          -4 the state field is missing or unknown.
-- Nothing changes for any code but 1. The lock named by the hash field
-- unique_key is deleted only while it still holds this task's id. Codes
-- -3/-4 replace Go's error replies.
-- asynq divergence: COMPATIBILITY.md#t3
if redis.call("EXISTS", KEYS[1]) == 0 then
    return 0
end
local fields = redis.call("HMGET", KEYS[1], "state", "group", "unique_key")
local state, group, lock = fields[1], fields[2], fields[3]
if state == "active" then
    return -1
elseif state == "pending" then
    if redis.call("LREM", ARGV[2] .. "pending", 0, ARGV[1]) == 0 then
        return -3
    end
elseif state == "aggregating" then
    if not group then
        return -3
    end
    local group_key = ARGV[3] .. group
    if redis.call("ZREM", group_key, ARGV[1]) == 0 then
        return -3
    end
    if redis.call("ZCARD", group_key) == 0 then
        redis.call("SREM", KEYS[2], group)
    end
elseif state == "scheduled" or state == "retry" or state == "archived"
    or state == "completed" then
    if redis.call("ZREM", ARGV[2] .. state, ARGV[1]) == 0 then
        return -3
    end
else
    return -4
end
if lock and lock ~= "" and redis.call("GET", lock) == ARGV[1] then
    redis.call("DEL", lock)
end
redis.call("DEL", KEYS[1])
return 1
