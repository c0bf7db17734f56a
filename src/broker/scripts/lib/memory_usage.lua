-- lib/memory_usage: sampled estimate of the bytes a queue takes in Redis
-- (asynq rdb.memoryUsage, in the guarded form of asynq's post-0.26 HEAD),
-- shared by queue_memory_usage (one queue) and queues_memory_usage (many at
-- once); prepended to them by scripts.rs (Lua has no includes).
-- Defines memory_usage(k, task_prefix, group_prefix, sample, group_sample):
--   k             the queue's keys by name: k.active, k.pending (lists),
--                 k.scheduled, k.retry, k.archived, k.completed (zsets),
--                 k.groups (set of group names)
--   task_prefix   asynq:{<q>}:t:
--   group_prefix  asynq:{<q>}:g:
--   sample        tasks sampled per list/zset (Go: 20), a number
--   group_sample  groups sampled (the first ones one SSCAN returns; Go: 5
--                 SMEMBERS names), a number
-- Returns: the estimate in bytes, a Lua number (Redis truncates it to an
--   integer reply). For each list and zset: mean MEMORY USAGE of the first
--   `sample` task hashes (a missing hash counts 0 but stays in the divisor,
--   as Go) times its length, plus the key's own usage. Groups: mean usage of
--   the sampled tasks that have a hash times the total of all group sizes
--   (lib/group_total: exact up to 1,000 groups, else estimated);
--   nothing when none was sampled. Read-only.
-- asynq divergence: COMPATIBILITY.md#q5
local function memory_usage(k, task_prefix, group_prefix, sample, group_sample)
    local total = 0
    local last = tostring(sample - 1)

    local function usage(key)
        local n = redis.call("MEMORY", "USAGE", key)
        if n then
            return n
        end
        return 0
    end

    -- An empty list or zset does not exist in Redis: it adds nothing, so
    -- it is not sampled.
    local function add_container(key, len, range)
        if len == 0 then
            return
        end
        local ids = redis.call(range, key, "0", last)
        if #ids > 0 then
            local sum = 0
            for _, id in ipairs(ids) do
                sum = sum + usage(task_prefix .. id)
            end
            total = total + (sum / #ids) * len
        end
        total = total + usage(key)
    end

    for _, key in ipairs({k.active, k.pending}) do
        add_container(key, redis.call("LLEN", key), "LRANGE")
    end
    for _, key in ipairs({k.scheduled, k.retry, k.archived, k.completed}) do
        add_container(key, redis.call("ZCARD", key), "ZRANGE")
    end

    -- Bounded (issue 15): the group total is lib/group_total's (exact up
    -- to GROUP_TOTAL_LIMIT groups, else scaled from a sample), and the
    -- sampled groups are the first `group_sample` names of one SSCAN.
    local _, group_tasks = group_total(k.groups, group_prefix, GROUP_TOTAL_LIMIT, GROUP_TOTAL_SAMPLE)
    local sampled, sampled_bytes = 0, 0
    local names = {}
    if group_tasks > 0 then
        names = redis.call("SSCAN", k.groups, "0", "COUNT", group_sample)[2]
    end
    for i, name in ipairs(names) do
        if i <= group_sample then
            -- A group key of another type is skipped (lib/group_total
            -- counts it 0).
            local ok, ids = pcall(redis.call, "ZRANGE", group_prefix .. name, "0", last)
            for _, id in ipairs(ok and ids or {}) do
                local n = redis.call("MEMORY", "USAGE", task_prefix .. id)
                if n then
                    sampled = sampled + 1
                    sampled_bytes = sampled_bytes + n
                end
            end
        end
    end
    if sampled > 0 then
        total = total + (sampled_bytes / sampled) * group_tasks
    end
    return total
end
