-- job_cancel: ask a job to stop (asynqdeck only, issue 15). A queued job is
-- cancelled at once; a running one turns cancelling and its runner stops it
-- after the chunk in progress.
-- KEYS[1] asynqdeck:{<q>}:job:<id>  the job's hash
-- KEYS[2] <job key>:skipped  report list
-- KEYS[3] <job key>:failed   report list
-- --
-- ARGV[1] now, unix ms
-- ARGV[2] seconds a finished job is kept
-- Returns: 1 cancelled or cancelling (or already finished), 0 no such job.
local phase = redis.call("HGET", KEYS[1], "phase")
if not phase then
    return 0
end
if phase == "queued" then
    job_finish(KEYS[1], KEYS[2], KEYS[3], "cancelled", ARGV[1], ARGV[2])
elseif phase == "running" then
    redis.call("HSET", KEYS[1], "phase", "cancelling", "updated_ms", ARGV[1])
end
return 1
