-- run_all: move every task of a zset to pending (asynq rdb.RunAllScheduledTasks,
-- RunAllRetryTasks, RunAllArchivedTasks, RunAllAggregatingTasks).
-- KEYS[1] source zset: asynq:{<q>}:scheduled, :retry, :archived or :g:<group>
-- KEYS[2] asynq:{<q>}:pending  list
-- KEYS[3] asynq:{<q>}:groups   set of group names (present only when
--         KEYS[1] is a group)
-- --
-- ARGV[1] asynq:{<q>}:t:  task key prefix
-- ARGV[2] group name (only when KEYS[3] is given)
-- Returns: the number of tasks moved.
-- Lowest score first, in chunks of 100, so the task due earliest runs first.
-- Hashes get state=pending only (no pending_since, no group routing), as in
-- Go. An id whose hash is missing is dropped from the source, not moved
-- (Go would create a hash holding only a state). The source ends up empty
-- (deleted) and a group leaves asynq:{<q>}:groups.
-- asynq divergence: COMPATIBILITY.md#t6
local moved = 0
while true do
    local ids = redis.call("ZRANGE", KEYS[1], 0, 99)
    if #ids == 0 then
        break
    end
    for _, id in ipairs(ids) do
        local key = ARGV[1] .. id
        if redis.call("EXISTS", key) == 1 then
            redis.call("LPUSH", KEYS[2], id)
            redis.call("HSET", key, "state", "pending")
            moved = moved + 1
        end
    end
    redis.call("ZREM", KEYS[1], unpack(ids))
end
if KEYS[3] then
    redis.call("SREM", KEYS[3], ARGV[2])
end
return moved
