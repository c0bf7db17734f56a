-- reclaim_stale_aggregation_sets: return the tasks of aggregation sets whose
-- deadline passed to their group (asynq rdb.ReclaimStaleAggregationSets).
-- KEYS[1] asynq:{<q>}:aggregation_sets  zset set key -> deadline (unix s)
-- KEYS[2] asynq:{<q>}:groups            set of group names
-- --
-- ARGV[1] now, unix s
-- ARGV[2] group key prefix asynq:{<q>}:g:
-- Returns: {sets reclaimed, {set keys not a zset}, {set keys whose group key is not a zset}}.
-- A set key is asynq:{<q>}:g:<group>:<set id>; its group key is the set key
-- without the last segment. Unlike Go, the group is registered again in
-- KEYS[2] so the aggregator sees the reclaimed tasks. Unlike Go, a key of
-- another type does not fail the call: a set key that is not a zset (or
-- names no group) leaves
-- KEYS[1] and is left as it is; a set whose group key is not a zset is
-- left as it is, still listed in KEYS[1] (its tasks have nowhere to go).
-- asynq divergence: COMPATIBILITY.md#w4, COMPATIBILITY.md#x1
local sets = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
local reclaimed, bad_sets, bad_groups = 0, {}, {}
for _, set_key in ipairs(sets) do
    local group_key = string.match(set_key, "(.*):[^:]*$")
    local set_type = redis.call("TYPE", set_key).ok
    local group_type = group_key and redis.call("TYPE", group_key).ok
    if not group_key or (set_type ~= "zset" and set_type ~= "none") then
        bad_sets[#bad_sets + 1] = set_key
        redis.call("ZREM", KEYS[1], set_key)
    elseif group_type ~= "zset" and group_type ~= "none" then
        bad_groups[#bad_groups + 1] = set_key
    else
        local group = string.sub(group_key, #ARGV[2] + 1)
        local members = redis.call("ZRANGE", set_key, 0, -1, "WITHSCORES")
        for i = 1, #members, 2 do
            redis.call("ZADD", group_key, members[i + 1], members[i])
        end
        if #members > 0 then
            redis.call("SADD", KEYS[2], group)
        end
        redis.call("DEL", set_key)
        redis.call("ZREM", KEYS[1], set_key)
        reclaimed = reclaimed + 1
    end
end
return {reclaimed, bad_sets, bad_groups}
