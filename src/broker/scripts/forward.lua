-- forward: move due scheduled or retry tasks to pending, or into their
-- group (asynq rdb.ForwardIfReady, one batch; S12).
-- KEYS[1] asynq:{<q>}:scheduled or asynq:{<q>}:retry  zset, score = due (unix s)
-- KEYS[2] asynq:{<q>}:pending                        list
-- KEYS[3] asynq:{<q>}:groups                         set of group names
-- KEYS[4] asynq:{<q>}:archived                       zset, score = archived at (unix s)
-- --
-- ARGV[1] now, unix s (due when score <= now)
-- ARGV[2] task key prefix asynq:{<q>}:t:
-- ARGV[3] now, unix ns (pending_since)
-- ARGV[4] group key prefix asynq:{<q>}:g:
-- ARGV[5] batch size (most ids taken by this call)
-- ARGV[6] archive trim cutoff, unix s (now - 90 days)
-- ARGV[7] archive size limit (10000)
-- Returns: {ids taken (moved or not), tasks moved, {ids archived}, {ids dropped}}.
-- Routing is by the hash field group, as in Go. Unlike Go, a task forwarded
-- into a group also registers the group in KEYS[3], so the aggregator sees
-- it. Unlike Go, an id whose task key is not a hash is moved to the archive
-- with its key untouched, and an id with no task key at all leaves KEYS[1]
-- (no hash is created for it); neither stops the batch.
-- asynq divergence: COMPATIBILITY.md#w4, COMPATIBILITY.md#x1
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[5]))
local moved, archived, dropped = 0, {}, {}
for _, id in ipairs(ids) do
    local key = ARGV[2] .. id
    local key_type = redis.call("TYPE", key).ok
    if key_type == "hash" then
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
        moved = moved + 1
    elseif key_type == "none" then
        redis.call("ZREM", KEYS[1], id)
        dropped[#dropped + 1] = id
    else
        redis.call("ZREM", KEYS[1], id)
        redis.call("ZADD", KEYS[4], ARGV[1], id)
        archived[#archived + 1] = id
    end
end
if #archived > 0 then
    trim_archive(KEYS[4], ARGV[2], ARGV[6], ARGV[7])
end
return {#ids, moved, archived, dropped}
