-- lib/group_total: how many groups a queue has and how many aggregating
-- tasks they hold, in bounded work (issue 15, COMPATIBILITY.md#l10);
-- prepended by scripts.rs to queue_stats, queues_stats and the memory
-- estimates (Lua has no includes).
-- Defines group_total(groups_key, group_prefix, limit, sample):
--   groups_key    asynq:{<q>}:groups, set of group names
--   group_prefix  asynq:{<q>}:g:
--   limit         most groups counted exactly, a number (callers pass
--                 GROUP_TOTAL_LIMIT, defined here: 1000)
--   sample        groups read past that, a number (callers pass
--                 GROUP_TOTAL_SAMPLE, defined here: 200)
-- Returns: count, total, exact. count = SCARD groups_key. With at most
--   `limit` groups, total is the exact sum of their ZCARDs (exact = 1). With
--   more, one SSCAN from cursor 0 with COUNT sample reads about `sample`
--   names (always the same ones while the set is unchanged) and total is
--   their mean size times count, rounded (exact = 0). A group key that is
--   not a sorted set counts 0 (it must not make the queue's numbers
--   unreadable). Read-only.
local GROUP_TOTAL_LIMIT = 1000
local GROUP_TOTAL_SAMPLE = 200

local function group_total(groups_key, group_prefix, limit, sample)
    local count = redis.call("SCARD", groups_key)
    if count == 0 then
        return 0, 0, 1
    end
    local names
    if count <= limit then
        names = redis.call("SMEMBERS", groups_key)
    else
        names = redis.call("SSCAN", groups_key, "0", "COUNT", sample)[2]
    end
    local sum = 0
    for _, name in ipairs(names) do
        local ok, n = pcall(redis.call, "ZCARD", group_prefix .. name)
        if ok then
            sum = sum + n
        end
    end
    if count <= limit then
        return count, sum, 1
    end
    if #names == 0 then
        return count, 0, 0
    end
    return count, math.floor(sum / #names * count + 0.5), 0
end
