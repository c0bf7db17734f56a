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
-- when its hash has no msg. One flat array (the reply read by LRANGE,
-- extended) costs Redis less than a table per part. Empty when paused or
-- nothing is pending. Each leased task ends
-- as Go's single dequeue leaves it: in active (the list in the same order
-- repeated RPOPLPUSH would give), state active, pending_since removed,
-- lease set. The list and zset moves are grouped (LRANGE + LTRIM, then one
-- LPUSH and one ZADD per chunk) rather than made per task. An id whose hash
-- has no msg leaves pending and is not put in active or leased
-- (COMPATIBILITY.md#w2).
-- Most tasks one call may lease: past Lua's unpack limit (≈ 8,000) the
-- script would fail half-way, and Redis does not undo a failed script's
-- writes. The calling scripts check it before they write anything.
local LEASE_MAX = 1000

-- Held in a local: spares a table lookup per call.
local lease_call = redis.call

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
    local taken = 0
    for k = n, 1, -1 do
        local id = ids[k]
        local key = prefix .. id
        local msg = lease_call("HGET", key, "msg")
        ids[n + k] = msg
        if msg then
            lease_call("HSET", key, "state", "active")
            lease_call("HDEL", key, "pending_since")
            taken = taken + 1
            pushed[taken] = id
            scored[2 * taken - 1] = expiry_s
            scored[2 * taken] = id
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
