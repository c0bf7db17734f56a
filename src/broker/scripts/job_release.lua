-- job_release: give a job's lease back so that another runner may resume it
-- at once (a runner stopping; asynqdeck only, issue 15).
-- KEYS[1] asynqdeck:{<q>}:job:<id>  the job's hash
-- --
-- ARGV[1] the owner id holding the lease
-- Returns: 1 released, 0 when this owner did not hold it.
if redis.call("HGET", KEYS[1], "owner") ~= ARGV[1] then
    return 0
end
redis.call("HSET", KEYS[1], "owner", "", "lease_ms", 0)
return 1
