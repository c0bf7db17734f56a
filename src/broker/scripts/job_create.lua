-- job_create: store a new background job (phase queued) and index it in its
-- queue's job index (asynqdeck only, issue 15).
-- KEYS[1] asynqdeck:{<q>}:job:<id>  the job's hash
-- KEYS[2] asynqdeck:{<q>}:jobs      zset job id -> created at (unix ms)
-- --
-- ARGV[1] the job id
-- ARGV[2] created at, unix ms
-- ARGV[3] unix ms: index entries created before it are dropped (their
--         hashes expired)
-- ARGV[4] .. field, value pairs of the hash
-- Returns: 1 created, 0 when the id already exists (nothing changed).
if redis.call("EXISTS", KEYS[1]) == 1 then
    return 0
end
for i = 4, #ARGV, 2 do
    redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[3])
return 1
