-- run_task: move one task to pending (asynq rdb.RunTask).
-- KEYS[1] asynq:{<q>}:t:<id>  task hash
-- KEYS[2] asynq:{<q>}:pending list
-- KEYS[3] asynq:{<q>}:groups  set of group names
-- --
-- ARGV[1] task id
-- ARGV[2] asynq:{<q>}:    queue key prefix (container = prefix .. state)
-- ARGV[3] asynq:{<q>}:g:  group key prefix (group zset = prefix .. group)
-- Returns: 1 moved; 0 no such task; -1 active; -2 already pending;
--          -3 the id is not in the container its state names;
--          -4 the state field is missing or unknown.
-- Nothing changes for any code but 1. The hash gets state=pending only (no
-- pending_since, no counters), as in Go; an aggregating task keeps its
-- group field, and its group leaves asynq:{<q>}:groups once empty
-- (COMPATIBILITY.md#t8). Codes -3/-4 replace Go's error replies.
-- asynq divergence: COMPATIBILITY.md#t3
if redis.call("EXISTS", KEYS[1]) == 0 then
    return 0
end
local fields = redis.call("HMGET", KEYS[1], "state", "group")
local state, group = fields[1], fields[2]
if state == "active" then
    return -1
elseif state == "pending" then
    return -2
end
local removed = remove_from_container(ARGV[1], state, group, ARGV[2], ARGV[3], KEYS[3], 1)
if removed == nil then
    return -4
elseif not removed then
    return -3
end
redis.call("LPUSH", KEYS[2], ARGV[1])
redis.call("HSET", KEYS[1], "state", "pending")
return 1
