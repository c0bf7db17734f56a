-- read_aggregation_set: one chunk of an aggregation set's tasks, oldest
-- first, and the set's deadline (asynq rdb.ReadAggregationSet, in chunks).
-- KEYS[1] asynq:{<q>}:g:<group>:<set id>    the aggregation set
-- KEYS[2] asynq:{<q>}:aggregation_sets      zset, set key -> deadline (unix s)
-- --
-- ARGV[1] first rank of the chunk
-- ARGV[2] last rank of the chunk
-- ARGV[3] task key prefix asynq:{<q>}:t:
-- Returns: {deadline (unix s, as text) or false when the set is not listed,
-- {id1, msg1, id2, msg2, ...}} with false for a member whose task hash has
-- no msg; {false, {}} when KEYS[1] is not a zset.
local deadline = redis.call("ZSCORE", KEYS[2], KEYS[1])
if redis.call("TYPE", KEYS[1]).ok ~= "zset" then
    return {deadline, {}}
end
local out = {}
local ids = redis.call("ZRANGE", KEYS[1], ARGV[1], ARGV[2])
for _, id in ipairs(ids) do
    out[#out + 1] = id
    out[#out + 1] = redis.call("HGET", ARGV[3] .. id, "msg")
end
return {deadline, out}
