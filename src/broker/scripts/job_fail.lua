-- job_fail: stop a job with an error it cannot get past (asynqdeck only,
-- issue 15).
-- KEYS[1] asynqdeck:{<q>}:job:<id>  the job's hash
-- KEYS[2] <job key>:skipped  report list
-- KEYS[3] <job key>:failed   report list
-- --
-- ARGV[1] the owner id holding the lease
-- ARGV[2] now, unix ms
-- ARGV[3] seconds a finished job is kept
-- ARGV[4] the error text
-- Returns: 1 failed, 0 when this owner does not hold the job.
if redis.call("HGET", KEYS[1], "owner") ~= ARGV[1] then
    return 0
end
redis.call("HSET", KEYS[1], "error", ARGV[4])
job_finish(KEYS[1], KEYS[2], KEYS[3], "failed", ARGV[2], ARGV[3])
return 1
