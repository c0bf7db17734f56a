-- lib/lease_tasks: leasing pending tasks, shared by dequeue and
-- done_and_dequeue; prepended by scripts.rs (Lua has no includes).
-- lease_tasks(pending, paused, active, lease, expiry_s, prefix, max, neg_max, neg_max1):
--   pending   asynq:{<q>}:pending list (workers take from the right)
--   paused    asynq:{<q>}:paused, exists while the queue is paused
--   active    asynq:{<q>}:active list
--   lease     asynq:{<q>}:lease zset, id -> lease expiry (unix s)
--   expiry_s  lease expiry, unix s
--   prefix    task key prefix asynq:{<q>}:t:
--   max       most tasks to take (1 to 1000), as text, with its negation
--             (neg_max, "-<max>") and one less than that (neg_max1,
--             "-<max + 1>"): list indexes passed as text spare Redis a
--             number conversion per call
-- Returns one array of 2n values: ids[1..n], the rightmost pending ids
-- taken, leftmost first (so ids[n] is the first a sequence of single
-- dequeues would take), then their msgs: [n + k] is ids[k]'s msg, or false
-- when its hash has no msg, or 0 when its key could not be read or written
-- (a key of another type: WRONGTYPE). One flat array (the reply read by LRANGE,
-- extended) costs Redis less than a table per part. Empty when paused or
-- nothing is pending. Each leased task ends
-- as Go's single dequeue leaves it: in active (the list in the same order
-- repeated RPOPLPUSH would give), state active, pending_since removed,
-- lease set. The list and zset moves are grouped (LRANGE + LTRIM, then one
-- LPUSH and one ZADD per chunk) rather than made per task. An id whose hash
-- has no msg leaves pending and is not put in active or leased
-- (COMPATIBILITY.md#w2). An id whose key cannot be read or written (msg 0)
-- is put in active and leased with the others, its key untouched: the
-- caller archives it as undecodable (COMPATIBILITY.md#w13). Every other task
-- of the batch is leased normally; nothing is left half-done.
-- Most tasks one call may lease: past Lua's unpack limit (≈ 8,000) the
-- script would fail half-way, and Redis does not undo a failed script's
-- writes. The calling scripts check it before they write anything.
local LEASE_MAX = 1000

-- Held in a local: spares a table lookup per call.
local lease_call = redis.call

-- The msg reported for a task whose key cannot be read or written.
local LEASE_UNREADABLE = 0

-- Leases ids[n] down to ids[1] (see lease_tasks); stops at the first Redis
-- error, which it raises. A task is marked done by ids[n + k] (its msg, or
-- false) only once all its commands ran; pushed[1..taken] and
-- scored[1..2 * taken] hold the leased ones. Returns taken.
local function lease_each(ids, n, prefix, expiry_s, pushed, scored)
    local call = lease_call
    local taken = 0
    for k = n, 1, -1 do
        local id = ids[k]
        local key = prefix .. id
        local msg = call("HGET", key, "msg")
        if msg then
            call("HSET", key, "state", "active")
            call("HDEL", key, "pending_since")
            taken = taken + 1
            pushed[taken] = id
            scored[2 * taken - 1] = expiry_s
            scored[2 * taken] = id
        end
        ids[n + k] = msg
    end
    return taken
end

local function lease_tasks(pending, paused, active, lease, expiry_s, prefix, max, neg_max, neg_max1)
    if lease_call("EXISTS", paused) == 1 then
        return {}
    end
    local ids = lease_call("LRANGE", pending, neg_max, "-1")
    local n = #ids
    if n == 0 then
        return ids
    end
    -- Tables sized once ({unpack(ids)}): growing a Lua table costs Redis
    -- more than filling it.
    local pushed, scored = {unpack(ids)}, {unpack(ids)}
    if n < tonumber(max) then
        -- That was all of it.
        lease_call("DEL", pending)
    else
        lease_call("LTRIM", pending, "0", neg_max1)
    end
    -- The ids already left pending and Redis keeps a failed script's writes:
    -- a task key of the wrong type must not abort the call. One pcall for
    -- the whole loop (per call, not per task); the slow path only on error.
    local ok, taken = pcall(lease_each, ids, n, prefix, expiry_s, pushed, scored)
    if not ok then
        -- Go on from the task lease_each failed on (the first k from n down
        -- with ids[n + k] unset), each command under redis.pcall; a task
        -- any of whose commands fails is leased as it is, msg
        -- LEASE_UNREADABLE. Inline, not a function of its own: one closure
        -- less to create per call.
        taken = 0
        local k = n
        while k >= 1 and ids[n + k] ~= nil do
            if ids[n + k] then
                taken = taken + 1
            end
            k = k - 1
        end
        for j = k, 1, -1 do
            local id = ids[j]
            local key = prefix .. id
            local msg = redis.pcall("HGET", key, "msg")
            if type(msg) == "table"
                or (msg and (type(redis.pcall("HSET", key, "state", "active")) == "table"
                    or type(redis.pcall("HDEL", key, "pending_since")) == "table")) then
                msg = LEASE_UNREADABLE
            end
            if msg then
                taken = taken + 1
                pushed[taken] = id
                scored[2 * taken - 1] = expiry_s
                scored[2 * taken] = id
            end
            ids[n + j] = msg
        end
    end
    -- LPUSH of the taken ids in taking order leaves the first taken deepest,
    -- as RPOPLPUSH one at a time would.
    for j = 1, taken, 100 do
        lease_call("LPUSH", active, unpack(pushed, j, math.min(j + 99, taken)))
    end
    for j = 1, 2 * taken, 200 do
        lease_call("ZADD", lease, unpack(scored, j, math.min(j + 199, 2 * taken)))
    end
    return ids
end
