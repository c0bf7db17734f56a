-- lib/lease_tasks: leasing pending tasks, shared by dequeue and
-- done_and_dequeue; prepended by scripts.rs (Lua has no includes).
-- lease_tasks(pending, paused, active, lease, expiry_s, prefix, max):
--   pending   asynq:{<q>}:pending list (workers take from the right)
--   paused    asynq:{<q>}:paused, exists while the queue is paused
--   active    asynq:{<q>}:active list
--   lease     asynq:{<q>}:lease zset, id -> lease expiry (unix s)
--   expiry_s  lease expiry, unix s
--   prefix    task key prefix asynq:{<q>}:t:
--   max       most tasks to take
-- Returns: flat array id1, msg1, id2, msg2, ... in the order a sequence of
-- single dequeues would take them (empty when paused or nothing pending).
-- Each leased task ends as Go's single dequeue leaves it: in active (the
-- list in the same order repeated RPOPLPUSH would give), state active,
-- pending_since removed, lease set. The list and zset moves are done per
-- chunk of at most 100 ids (LRANGE + LTRIM + one LPUSH + one ZADD) rather
-- than per task. An id whose hash has no msg leaves pending and is not put
-- in active or leased (COMPATIBILITY.md#w2).
local function lease_tasks(pending, paused, active, lease, expiry_s, prefix, max)
    local out = {}
    if redis.call("EXISTS", paused) == 1 then
        return out
    end
    local left = max
    while left > 0 do
        local n = math.min(left, 100)
        -- The rightmost n ids, leftmost first: the last one is taken first.
        local ids = redis.call("LRANGE", pending, -n, -1)
        if #ids == 0 then
            break
        end
        redis.call("LTRIM", pending, 0, -#ids - 1)
        local pushed, scored = {}, {}
        for i = #ids, 1, -1 do
            local id = ids[i]
            local key = prefix .. id
            local msg = redis.call("HGET", key, "msg")
            if msg then
                redis.call("HSET", key, "state", "active")
                redis.call("HDEL", key, "pending_since")
                pushed[#pushed + 1] = id
                scored[#scored + 1] = expiry_s
                scored[#scored + 1] = id
                out[#out + 1] = id
                out[#out + 1] = msg
            end
        end
        if #pushed > 0 then
            redis.call("LPUSH", active, unpack(pushed))
            redis.call("ZADD", lease, unpack(scored))
        end
        left = left - #ids
        if #ids < n then
            break
        end
    end
    return out
end
