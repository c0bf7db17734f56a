-- lib/trim_archive: the archive trimming shared by every script that writes
-- to the archive; prepended to them by scripts.rs (Lua has no includes).
-- Defines trim_archive(archived_key, task_key_prefix, cutoff_s, max_size):
--   archived_key     asynq:{<q>}:archived, zset, score = archived-at (unix s)
--   task_key_prefix  asynq:{<q>}:t:, a trimmed task's hash is prefix .. id
--   cutoff_s         unix s; every member scored <= cutoff_s is dropped
--                    (now - 90 days)
--   max_size         members kept at most (10000); the lowest-scored excess
--                    is dropped after the age trim
-- Returns: the number of tasks trimmed. A trimmed task leaves the zset and its
-- hash is deleted. Work is done in chunks of at most 100 ids per command, so
-- any number of stale members is trimmed without hitting Lua's unpack limit.
-- Unique locks of trimmed tasks are left to expire, as in Go. Go keeps 9,999,
-- unpacks every stale id at once and (inspector paths) keeps trimmed hashes.
-- asynq divergence: COMPATIBILITY.md#g3
local function trim_archive(archived_key, task_key_prefix, cutoff_s, max_size)
    local chunk = 100
    local trimmed = 0
    local function drop(ids)
        local task_keys = {}
        for i, id in ipairs(ids) do
            task_keys[i] = task_key_prefix .. id
        end
        redis.call("DEL", unpack(task_keys))
        redis.call("ZREM", archived_key, unpack(ids))
        trimmed = trimmed + #ids
    end
    while true do
        local ids = redis.call("ZRANGEBYSCORE", archived_key, "-inf", cutoff_s,
            "LIMIT", 0, chunk)
        if #ids == 0 then
            break
        end
        drop(ids)
    end
    local excess = redis.call("ZCARD", archived_key) - tonumber(max_size)
    while excess > 0 do
        local n = math.min(excess, chunk)
        drop(redis.call("ZRANGE", archived_key, 0, n - 1))
        excess = excess - n
    end
    return trimmed
end
