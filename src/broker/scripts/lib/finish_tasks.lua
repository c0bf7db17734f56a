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
--   args, first     args[first] = n, the number of tasks; args[first + 1] ..
--                   args[first + n] their ids; then pairs for the tasks that
--                   hold a unique lock: the task's position (1..n), its lock
--                   key (same queue, same slot)
-- Returns: 1 when every task was finished, else one code per task, in
-- order: 1 done; 0 not in active; -1 no lease; -2 no task hash. Each task
-- follows Go's step order (remove from active, lease, delete hash, count,
-- release its lock if it holds it); a task stops at its first missing step,
-- and only finished tasks are counted. The end state equals finishing the
-- tasks one by one with Go's steps; one occurrence of an id is removed from
-- active, the one nearest the tail (COMPATIBILITY.md#w11).
--
-- In Redis every redis.call, Lua table and string costs more than the
-- command itself does here (about 4,000, 800 and 900 instructions), so:
-- * when active and lease hold exactly these tasks (one server, the whole
--   batch finished: the usual case at low concurrency), both keys are
--   deleted, after one read of each;
-- * otherwise, per task: LREM active -1 (leases are pushed at the head, so
--   a finishing task is usually near the tail), ZREM;
-- * then the hashes of the tasks still going, when 3 or more, are deleted
--   with one EXISTS and one DEL if all of them exist (else one DEL each, to
--   tell which is missing).
-- Arguments are strings where possible: a Lua number passed to redis.call
-- costs Redis a float-to-text conversion. Loops index arrays rather than
-- call ipairs, and redis.call is held in a local: each spares the VM a call
-- or a table lookup per use.
local call = redis.call

-- Above this many tasks neither finish_whole nor one EXISTS/DEL for all
-- the hashes is tried (Lua's unpack limit).
local FINISH_WHOLE_MAX = 1000

-- The lock key of each task that has one, by position; nil when none has.
local function lock_keys(args, first, n)
    local locks = nil
    for i = first + n + 1, #args, 2 do
        locks = locks or {}
        locks[tonumber(args[i])] = args[i + 1]
    end
    return locks
end

-- Releases the unique lock of a finished task if the task still holds it.
local function release_lock(id, lock)
    if lock and call("GET", lock) == id then
        call("DEL", lock)
    end
end

-- The last steps of the tasks at positions at[1..m] (hashes[i] is task
-- at[i]'s hash, or task i's when at is nil; distinct tasks): deletes each
-- hash and releases the lock of each task whose hash was there. Returns 1
-- when codes is nil and every hash was there; else codes (a new table when
-- nil) with codes[at[i]] set to 1, or -2 when the hash was missing.
local function finish_hashes(hashes, at, m, args, first, locks, codes)
    if m >= 3 and m <= FINISH_WHOLE_MAX and call("EXISTS", unpack(hashes, 1, m)) == m then
        call("DEL", unpack(hashes, 1, m))
        if locks then
            for i = 1, m do
                local k = at and at[i] or i
                release_lock(args[first + k], locks[k])
            end
        end
        if not codes then
            return 1
        end
        for i = 1, m do
            codes[at and at[i] or i] = 1
        end
        return codes
    end
    codes = codes or {}
    for i = 1, m do
        local k = at and at[i] or i
        if call("DEL", hashes[i]) == 1 then
            release_lock(args[first + k], locks and locks[k])
            codes[k] = 1
        else
            codes[k] = -2
        end
    end
    return codes
end

-- Go's steps task by task; from 3 tasks on, the hashes of those still
-- going are left to one finish_hashes.
local function finish_one_by_one(active, lease, prefix, args, first, n, locks)
    local codes, hashes, at, m = {}, nil, nil, 0
    if n >= 3 then
        -- Sized once ({unpack(...)}, each slot overwritten before it is
        -- read): growing a Lua table costs more.
        codes = {unpack(args, first + 1, first + n)}
        hashes, at = {unpack(codes)}, {unpack(codes)}
    end
    for k = 1, n do
        local id = args[first + k]
        if call("LREM", active, "-1", id) == 0 then
            codes[k] = 0
        elseif call("ZREM", lease, id) == 0 then
            codes[k] = -1
        elseif hashes then
            m = m + 1
            hashes[m] = prefix .. id
            at[m] = k
        elseif call("DEL", prefix .. id) == 1 then
            release_lock(id, locks and locks[k])
            codes[k] = 1
        else
            codes[k] = -2
        end
    end
    if m > 0 then
        finish_hashes(hashes, at, m, args, first, locks, codes)
    end
    return codes
end

-- When active and lease hold exactly the n (distinct) ids: removes both
-- keys and the hashes; returns 1, or the codes when a hash is missing.
-- Returns nil, having written nothing, when they hold anything else.
local function finish_whole(active, lease, prefix, args, first, n, locks)
    if call("LLEN", active) ~= n then
        return nil
    end
    local ours = {}
    for k = 1, n do
        local id = args[first + k]
        if ours[id] then
            return nil
        end
        ours[id] = 1
    end
    -- n distinct list entries and n zset members, all ours: each id is in
    -- both, once.
    local listed = call("LRANGE", active, "0", "-1")
    for i = 1, #listed do
        local id = listed[i]
        if ours[id] ~= 1 then
            return nil
        end
        ours[id] = 2
    end
    -- Reading at most n + 1 members (index n, given as text) tells whether
    -- lease holds n without a ZCARD.
    local leased = call("ZRANGE", lease, "0", args[first])
    if #leased ~= n then
        return nil
    end
    for i = 1, #leased do
        if not ours[leased[i]] then
            return nil
        end
    end
    call("DEL", active, lease)
    -- Sized once ({unpack(...)}): growing a Lua table costs more.
    local hashes = {unpack(args, first + 1, first + n)}
    for k = 1, n do
        hashes[k] = prefix .. hashes[k]
    end
    return finish_hashes(hashes, nil, n, args, first, locks, nil)
end

local function finish_tasks(active, lease, daily, total, daily_expiry_s, maxi64, prefix, args, first)
    local n_arg = args[first]
    local n = tonumber(n_arg)
    if n == 0 then
        return {}
    end
    local locks = lock_keys(args, first, n)
    local codes = nil
    -- Two reads and four tables cost more than a few LREMs.
    if n >= 4 and n <= FINISH_WHOLE_MAX then
        codes = finish_whole(active, lease, prefix, args, first, n, locks)
    end
    codes = codes or finish_one_by_one(active, lease, prefix, args, first, n, locks)
    local finished = n_arg
    if codes ~= 1 then
        finished = 0
        for k = 1, n do
            if codes[k] == 1 then
                finished = finished + 1
            end
        end
        if finished == n then
            codes, finished = 1, n_arg
        elseif finished == 0 then
            return codes
        end
    end
    count_daily(daily, finished, daily_expiry_s)
    count_total(total, finished, maxi64)
    return codes
end
