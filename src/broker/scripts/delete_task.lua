-- delete_task: delete one task and release its uniqueness lock (asynq rdb.DeleteTask).
-- KEYS[1] asynq:{<q>}:t:<id>  task hash
-- KEYS[2] asynq:{<q>}:groups  set of group names
-- KEYS[3] asynq:{<q>}:aggregation_sets  zset of aggregation set keys
-- --
-- ARGV[1] task id
-- ARGV[2] asynq:{<q>}:    queue key prefix (container = prefix .. state)
-- ARGV[3] asynq:{<q>}:g:  group key prefix (group zset = prefix .. group)
-- Returns: 1 deleted; 2 deleted a left-behind task (its hash names a state
--          whose container does not hold the id, e.g. a hash Go's archive
--          trim kept); 0 no such task; -1 active;
--          -3 an aggregating task that is in an aggregation set (being
--          aggregated) or whose sets cannot all be checked (over 100);
--          -4 the state field is missing or unknown.
-- Nothing changes for any code but 1 and 2. The lock (hash field unique_key,
-- else the unique_key inside msg) is deleted only while it still holds this
-- task's id (lib/release_lock). Codes replace Go's error replies; Go
-- answers a left-behind task with an error and never deletes it.
-- asynq divergence: COMPATIBILITY.md#t3, COMPATIBILITY.md#r12, COMPATIBILITY.md#r13
if redis.call("EXISTS", KEYS[1]) == 0 then
    return 0
end
local fields = redis.call("HMGET", KEYS[1], "state", "group")
local state, group = fields[1], fields[2]
if state == "active" then
    return -1
end
local removed = remove_from_container(ARGV[1], state, group, ARGV[2], ARGV[3], KEYS[2], 0)
if removed == nil then
    return -4
end
if not removed and state == "aggregating" then
    -- Not in its group: left behind only when no aggregation set holds it.
    local sets = redis.call("ZRANGE", KEYS[3], 0, 100)
    if #sets > 100 then
        return -3
    end
    for _, set_key in ipairs(sets) do
        if redis.call("ZSCORE", set_key, ARGV[1]) then
            return -3
        end
    end
end
release_lock(KEYS[1], ARGV[1], ARGV[2] .. "unique:")
redis.call("DEL", KEYS[1])
if removed then
    return 1
end
return 2
