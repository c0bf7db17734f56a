-- reclaim_stale_aggregation_sets: return the tasks of aggregation sets whose
-- deadline passed to their group (asynq rdb.ReclaimStaleAggregationSets).
-- KEYS[1] asynq:{<q>}:aggregation_sets  zset set key -> deadline (unix s)
-- KEYS[2] asynq:{<q>}:groups            set of group names
-- --
-- ARGV[1] now, unix s
-- ARGV[2] group key prefix asynq:{<q>}:g:
-- Returns: the number of sets reclaimed.
-- A set key is asynq:{<q>}:g:<group>:<set id>; its group key is the set key
-- without the last segment. Unlike Go, the group is registered again in
-- KEYS[2] so the aggregator sees the reclaimed tasks.
-- asynq divergence: COMPATIBILITY.md#w4
local sets = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
for _, set_key in ipairs(sets) do
    local group_key = string.match(set_key, "(.*):[^:]*$")
    local group = string.sub(group_key, #ARGV[2] + 1)
    local members = redis.call("ZRANGE", set_key, 0, -1, "WITHSCORES")
    for i = 1, #members, 2 do
        redis.call("ZADD", group_key, members[i + 1], members[i])
    end
    if #members > 0 then
        redis.call("SADD", KEYS[2], group)
    end
    redis.call("DEL", set_key)
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
return #sets
