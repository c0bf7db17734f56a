-- job_index: add a job to the global job index and drop expired entries
-- (asynqdeck only, issue 15). All keys share the {jobs} hash tag: one slot,
-- apart from every queue's keys (a separate call from job_create).
-- KEYS[1] asynqdeck:{jobs}:index   zset job id -> created at (unix ms)
-- KEYS[2] asynqdeck:{jobs}:queues  hash job id -> queue name
-- KEYS[3] asynqdeck:{jobs}:open    zset job id -> unix ms after which a
--         runner should look at it (0: at once)
-- --
-- ARGV[1] the job id
-- ARGV[2] its queue
-- ARGV[3] created at, unix ms
-- ARGV[4] unix ms: entries created before it are dropped (at most 100 per
--         call)
-- Returns: the number of expired entries dropped.
redis.call("ZADD", KEYS[1], ARGV[3], ARGV[1])
redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
redis.call("ZADD", KEYS[3], 0, ARGV[1])
local old = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. ARGV[4], "LIMIT", 0, 100)
if #old > 0 then
    redis.call("ZREM", KEYS[1], unpack(old))
    redis.call("HDEL", KEYS[2], unpack(old))
    redis.call("ZREM", KEYS[3], unpack(old))
end
return #old
