-- read_aggregation_set: one chunk of an aggregation set's tasks, oldest
-- first, and the set's deadline (asynq rdb.ReadAggregationSet, in chunks).
-- KEYS[1] asynq:{<q>}:g:<group>:<set id>    the aggregation set
-- KEYS[2] asynq:{<q>}:aggregation_sets      zset, set key -> deadline (unix s)
-- --
-- ARGV[1] first rank of the chunk
-- ARGV[2] last rank of the chunk
-- ARGV[3] task key prefix asynq:{<q>}:t:
-- Returns: {deadline (unix s, as text) or false when the set is not listed,
-- {id1, msg1, id2, msg2, ...}} with false for a member whose task key is
-- gone or has no msg, and the text "wrongtype:<type>" for one whose task key
-- is not a hash; {false, {}} when KEYS[1] is not a zset.
local deadline = redis.call("ZSCORE", KEYS[2], KEYS[1])
if redis.call("TYPE", KEYS[1]).ok ~= "zset" then
    return {deadline, {}}
end
local out = {}
local ids = redis.call("ZRANGE", KEYS[1], ARGV[1], ARGV[2])
for _, id in ipairs(ids) do
    out[#out + 1] = id
    local kind = redis.call("TYPE", ARGV[3] .. id).ok
    if kind == "hash" or kind == "none" then
        out[#out + 1] = redis.call("HGET", ARGV[3] .. id, "msg")
    else
        out[#out + 1] = "wrongtype:" .. kind
    end
end
return {deadline, out}
