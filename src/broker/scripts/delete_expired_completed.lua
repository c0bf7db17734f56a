-- delete_expired_completed: drop completed tasks whose retention ended
-- (asynq rdb.DeleteExpiredCompletedTasks, one batch; the janitor's step).
-- KEYS[1] asynq:{<q>}:completed  zset, score = expiry (unix s)
-- --
-- ARGV[1] now, unix s (expired when score <= now)
-- ARGV[2] task key prefix asynq:{<q>}:t:
-- ARGV[3] batch size
-- Returns: the number of tasks deleted.
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
    redis.call("DEL", ARGV[2] .. id)
    redis.call("ZREM", KEYS[1], id)
end
return #ids
