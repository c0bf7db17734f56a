-- lib/queue_counts: the counts of one queue for QueueInfo (asynq
-- rdb.CurrentStats), shared by queue_stats (one queue) and queues_stats (many
-- at once); prepended to them by scripts.rs (Lua has no includes).
-- Defines queue_counts(k, base, task_prefix, group_prefix):
--   k             a table of key names (KEYS); the queue's keys are k[base + 1]
--                 .. k[base + 12], in the order queue_stats.lua lists as
--                 KEYS[1] .. KEYS[12] (pending, active, scheduled, retry,
--                 archived, completed, today's processed and failed counters,
--                 all-time processed and failed counters, paused, groups)
--   base          offset of the queue's first key in k, minus one
--   task_prefix   asynq:{<q>}:t:   (a task's hash is prefix .. id)
--   group_prefix  asynq:{<q>}:g:   (a group's zset is prefix .. name)
-- Returns: the array of 14 values queue_stats.lua documents. Read-only.
-- A key of the wrong type raises the Redis error (WRONGTYPE ...).
local function queue_counts(k, base, task_prefix, group_prefix)
    local res = {}
    res[1] = redis.call("LLEN", k[base + 1])
    res[2] = redis.call("LLEN", k[base + 2])
    for i = 3, 6 do
        res[i] = redis.call("ZCARD", k[base + i])
    end
    for i = 7, 10 do
        res[i] = redis.call("GET", k[base + i])
    end
    res[11] = redis.call("EXISTS", k[base + 11])
    res[12] = false
    if res[1] > 0 then
        local next_id = redis.call("LINDEX", k[base + 1], -1)
        if next_id then
            res[12] = redis.call("HGET", task_prefix .. next_id, "pending_since")
        end
    end
    local groups = redis.call("SMEMBERS", k[base + 12])
    local aggregating = 0
    for _, name in ipairs(groups) do
        aggregating = aggregating + redis.call("ZCARD", group_prefix .. name)
    end
    res[13] = #groups
    res[14] = aggregating
    return res
end
