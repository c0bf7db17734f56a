-- lib/finish_tasks: finishing successful (or revoked) tasks without
-- retention, shared by done and done_and_dequeue; prepended by scripts.rs
-- after lib/count_stats.
-- finish_tasks(active, lease, daily, total, daily_expiry_s, maxi64, prefix, args, first):
--   active          asynq:{<q>}:active list
--   lease           asynq:{<q>}:lease zset
--   daily, total    asynq:{<q>}:processed:<YYYY-MM-DD> (UTC) and asynq:{<q>}:processed
--   daily_expiry_s  the daily counter's expiry, unix s
--   maxi64          MaxInt64 (9223372036854775807)
--   prefix          task key prefix asynq:{<q>}:t:
--   args, first     args[first], args[first + 1], ... pairs: task id, its
--                   unique lock key ("" when none; same queue, same slot)
-- Returns: one code per task, in order: 1 done; 0 not in active; -1 no
-- lease; -2 no task hash. Each task follows Go's step order (remove from
-- active, lease, delete hash, count, release its lock if it holds it); a
-- task stops at its first missing step, and only finished tasks are counted.
-- The end state equals finishing the tasks one by one with Go's steps; one
-- occurrence of an id is removed from active, the one nearest the tail
-- (COMPATIBILITY.md#w11).
--
-- Two ways to get there, chosen by size:
-- * active list and lease zset at most 2n + 16 (and 256) long for n tasks
--   (the usual case for one server: they hold only its tasks in flight):
--   read both whole, decide every task in Lua, then rewrite active once and
--   remove the leases with one variadic ZREM;
-- * otherwise, per task: LREM active -1 (leases are pushed at the head, so
--   a finishing task is usually near the tail), ZREM, DEL.
local FINISH_SMALL = 256

local function finish_count_and_unlock(prefix, id, lock)
    if redis.call("DEL", prefix .. id) == 0 then
        return -2
    end
    if lock ~= "" and redis.call("GET", lock) == id then
        redis.call("DEL", lock)
    end
    return 1
end

local function finish_one_by_one(active, lease, prefix, args, first, codes)
    for i = first, #args, 2 do
        local id, lock = args[i], args[i + 1]
        local code
        if redis.call("LREM", active, -1, id) == 0 then
            code = 0
        elseif redis.call("ZREM", lease, id) == 0 then
            code = -1
        else
            code = finish_count_and_unlock(prefix, id, lock)
        end
        codes[#codes + 1] = code
    end
end

local function finish_small(list, lease_ids, active, lease, prefix, args, first, codes)
    local leased = {}
    for _, id in ipairs(lease_ids) do
        leased[id] = true
    end
    -- Positions of each id in the list, head to tail.
    local positions = {}
    for j, id in ipairs(list) do
        local p = positions[id]
        if p then
            p[#p + 1] = j
        else
            positions[id] = {j}
        end
    end
    local removed, unleased, any = {}, {}, false
    for i = first, #args, 2 do
        local id, lock = args[i], args[i + 1]
        -- Remove one occurrence, the one nearest the tail, as LREM -1 would.
        local at = nil
        local p = positions[id]
        if p and #p > 0 then
            at = table.remove(p)
        end
        local code
        if not at then
            code = 0
        else
            removed[at] = true
            any = true
            if not leased[id] then
                code = -1
            else
                leased[id] = nil
                unleased[#unleased + 1] = id
                code = finish_count_and_unlock(prefix, id, lock)
            end
        end
        codes[#codes + 1] = code
    end
    if any then
        local keep = {}
        for j = 1, #list do
            if not removed[j] then
                keep[#keep + 1] = list[j]
            end
        end
        redis.call("DEL", active)
        for j = 1, #keep, 100 do
            redis.call("RPUSH", active, unpack(keep, j, math.min(j + 99, #keep)))
        end
    end
    for j = 1, #unleased, 100 do
        redis.call("ZREM", lease, unpack(unleased, j, math.min(j + 99, #unleased)))
    end
end

local function finish_tasks(active, lease, daily, total, daily_expiry_s, maxi64, prefix, args, first)
    local codes = {}
    local n = (#args - first + 1) / 2
    -- Rewriting costs about the whole list, so only when it is short and
    -- mostly made of the tasks being finished (one server's batch).
    local limit = math.min(FINISH_SMALL, 2 * n + 16)
    if n >= 2 and redis.call("LLEN", active) <= limit
        and redis.call("ZCARD", lease) <= limit then
        finish_small(redis.call("LRANGE", active, 0, -1), redis.call("ZRANGE", lease, 0, -1),
            active, lease, prefix, args, first, codes)
    else
        finish_one_by_one(active, lease, prefix, args, first, codes)
    end
    local finished = 0
    for _, code in ipairs(codes) do
        if code == 1 then
            finished = finished + 1
        end
    end
    if finished > 0 then
        count_daily(daily, finished, daily_expiry_s)
        count_total(total, finished, maxi64)
    end
    return codes
end
