-- lib/queue_counts: the counts of one queue for QueueInfo (asynq
-- rdb.CurrentStats), for queue_stats; prepended to it by scripts.rs (Lua has
-- no includes). (queues_stats, the dashboard's many-queue read, reads the
-- same keys the same way, partly with plain commands around it.)
-- Defines queue_counts(k, strings, task_prefix, group_prefix):
--   k             the queue's keys by name: k.pending, k.active (lists),
--                 k.scheduled, k.retry, k.archived, k.completed (zsets),
--                 k.groups (set of group names)
--   strings       the queue's five string keys as one MGET read them: today's
--                 processed and failed counters, the all-time processed and
--                 failed counters, paused (false when absent; MGET also reads
--                 a key of another type as absent)
--   task_prefix   asynq:{<q>}:t:   (a task's hash is prefix .. id)
--   group_prefix  asynq:{<q>}:g:   (a group's zset is prefix .. name)
-- Returns: the array of 14 values queue_stats.lua documents. Read-only.
-- A list, zset or set key of the wrong type raises the Redis error
-- (WRONGTYPE ...).
-- asynq divergence: COMPATIBILITY.md#q4
local function queue_counts(k, strings, task_prefix, group_prefix)
    local res = {}
    res[1] = redis.call("LLEN", k.pending)
    res[2] = redis.call("LLEN", k.active)
    res[3] = redis.call("ZCARD", k.scheduled)
    res[4] = redis.call("ZCARD", k.retry)
    res[5] = redis.call("ZCARD", k.archived)
    res[6] = redis.call("ZCARD", k.completed)
    for i = 1, 4 do
        res[6 + i] = strings[i]
    end
    res[11] = strings[5] and 1 or 0
    res[12] = false
    if res[1] > 0 then
        local next_id = redis.call("LINDEX", k.pending, -1)
        if next_id then
            res[12] = redis.call("HGET", task_prefix .. next_id, "pending_since")
        end
    end
    -- Bounded: at most GROUP_TOTAL_LIMIT groups read (lib/group_total).
    res[13], res[14] = group_total(k.groups, group_prefix, GROUP_TOTAL_LIMIT, GROUP_TOTAL_SAMPLE)
    return res
end
