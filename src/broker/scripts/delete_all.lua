-- delete_all: delete every task of a container and release their locks
-- (asynq rdb.DeleteAllPendingTasks, DeleteAllScheduledTasks,
-- DeleteAllRetryTasks, DeleteAllArchivedTasks, DeleteAllCompletedTasks,
-- DeleteAllAggregatingTasks).
-- KEYS[1] source: asynq:{<q>}:pending (list), or :scheduled, :retry,
--         :archived, :completed or :g:<group> (zset)
-- KEYS[2] asynq:{<q>}:groups  set of group names (present only when KEYS[1]
--         is a group)
-- --
-- ARGV[1] "list" or "zset": the type of KEYS[1]
-- ARGV[2] asynq:{<q>}:t:  task key prefix
-- ARGV[3] asynq:{<q>}:unique:  prefix of the queue's uniqueness locks
-- ARGV[4] group name (only when KEYS[2] is given)
-- Returns: the number of ids removed from the source.
-- Chunks of 100. A task's lock (hash field unique_key, else the unique_key
-- inside msg, lib/release_lock) is deleted while it still holds the task's
-- id, for every source (Go skips pending and groups, and never reads the
-- lock from msg). The source ends up empty (deleted) and a group leaves
-- asynq:{<q>}:groups.
-- asynq divergence: COMPATIBILITY.md#t5, COMPATIBILITY.md#r13
local deleted = 0
while true do
    local ids
    if ARGV[1] == "list" then
        ids = redis.call("LRANGE", KEYS[1], 0, 99)
    else
        ids = redis.call("ZRANGE", KEYS[1], 0, 99)
    end
    if #ids == 0 then
        break
    end
    local task_keys = {}
    for i, id in ipairs(ids) do
        local key = ARGV[2] .. id
        release_lock(key, id, ARGV[3])
        task_keys[i] = key
    end
    redis.call("DEL", unpack(task_keys))
    if ARGV[1] == "list" then
        redis.call("LTRIM", KEYS[1], #ids, -1)
    else
        redis.call("ZREM", KEYS[1], unpack(ids))
    end
    deleted = deleted + #ids
end
if KEYS[2] then
    redis.call("SREM", KEYS[2], ARGV[4])
end
return deleted
