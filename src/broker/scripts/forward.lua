-- forward: move due scheduled or retry tasks to pending, or into their
-- group (asynq rdb.ForwardIfReady, one batch; S12).
-- KEYS[1] asynq:{<q>}:scheduled or asynq:{<q>}:retry  zset, score = due (unix s)
-- KEYS[2] asynq:{<q>}:pending                        list
-- KEYS[3] asynq:{<q>}:groups                         set of group names
-- --
-- ARGV[1] now, unix s (due when score <= now)
-- ARGV[2] task key prefix asynq:{<q>}:t:
-- ARGV[3] now, unix ns (pending_since)
-- ARGV[4] group key prefix asynq:{<q>}:g:
-- ARGV[5] batch size (most tasks moved by this call)
-- Returns: the number of tasks moved.
-- Routing is by the hash field group, as in Go. Unlike Go, a task forwarded
-- into a group also registers the group in KEYS[3], so the aggregator sees
-- it.
-- asynq divergence: COMPATIBILITY.md#w4
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[5]))
for _, id in ipairs(ids) do
    local key = ARGV[2] .. id
    local group = redis.call("HGET", key, "group")
    if group and group ~= "" then
        redis.call("ZADD", ARGV[4] .. group, ARGV[1], id)
        redis.call("SADD", KEYS[3], group)
        redis.call("ZREM", KEYS[1], id)
        redis.call("HSET", key, "state", "aggregating")
    else
        redis.call("LPUSH", KEYS[2], id)
        redis.call("ZREM", KEYS[1], id)
        redis.call("HSET", key, "state", "pending", "pending_since", ARGV[3])
    end
end
return #ids
