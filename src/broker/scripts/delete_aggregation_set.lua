-- delete_aggregation_set: delete one chunk of an aggregated set's tasks
-- (asynq rdb.DeleteAggregationSet, in chunks).
-- KEYS[1] asynq:{<q>}:g:<group>:<set id>    the aggregation set
-- KEYS[2] asynq:{<q>}:aggregation_sets      zset, set key -> deadline (unix s)
-- KEYS[3] asynq:{<q>}:archived              zset, task id -> archived at (unix s)
-- --
-- ARGV[1] task key prefix asynq:{<q>}:t:
-- ARGV[2] most members handled by this call
-- ARGV[3] now, unix s
-- ARGV[4] .. ids whose msg could not be decoded or whose task key is not a
--   hash (kept: archived, not deleted; a key of another type is left as it
--   is and only listed in KEYS[3], where it reads as an error row)
-- Returns: members left in the set after this call (0: the set is gone).
-- The first call takes the set out of KEYS[2], so the recoverer never
-- returns a set that was already aggregated to its group, even when the
-- deletion stops half way (Go deletes the set in one call). Task hashes
-- are deleted; their uniqueness locks stay, as Go leaves them. An id whose
-- msg could not be decoded is archived instead (state archived, listed in
-- KEYS[3]) so that nothing unreadable is lost.
-- asynq divergence: COMPATIBILITY.md#m4
redis.call("ZREM", KEYS[2], KEYS[1])
if redis.call("TYPE", KEYS[1]).ok ~= "zset" then
    return 0
end
local keep = {}
for i = 4, #ARGV do
    keep[ARGV[i]] = true
end
local ids = redis.call("ZRANGE", KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
    local key = ARGV[1] .. id
    if keep[id] then
        if redis.call("TYPE", key).ok == "hash" then
            redis.call("HSET", key, "state", "archived")
            redis.call("HDEL", key, "group")
        end
        redis.call("ZADD", KEYS[3], ARGV[3], id)
    else
        redis.call("DEL", key)
    end
end
if #ids > 0 then
    redis.call("ZREMRANGEBYRANK", KEYS[1], 0, #ids - 1)
end
return redis.call("ZCARD", KEYS[1])
