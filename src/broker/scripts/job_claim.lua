-- job_claim: take a job's lease so that one runner only works on it
-- (asynqdeck only, issue 15).
-- KEYS[1] asynqdeck:{<q>}:job:<id>  the job's hash
-- --
-- ARGV[1] the claiming runner's owner id
-- ARGV[2] now, unix ms
-- ARGV[3] lease deadline, unix ms
-- Returns: {code, lease_ms}: code 1 claimed (queued, or running/cancelling
-- with a lapsed lease or one this owner holds), 0 another owner holds a
-- live lease (lease_ms: until when), -1 finished, -2 no such job.
local f = redis.call("HMGET", KEYS[1], "phase", "owner", "lease_ms", "started_ms")
local phase = f[1]
if not phase then
    return {-2, 0}
end
if phase ~= "queued" and phase ~= "running" and phase ~= "cancelling" then
    return {-1, 0}
end
local lease = tonumber(f[3]) or 0
if phase ~= "queued" and f[2] ~= ARGV[1] and f[2] ~= "" and lease > tonumber(ARGV[2]) then
    return {0, lease}
end
if phase == "queued" then
    redis.call("HSET", KEYS[1], "phase", "running")
end
if not f[4] or f[4] == "" then
    redis.call("HSET", KEYS[1], "started_ms", ARGV[2])
end
redis.call("HSET", KEYS[1], "owner", ARGV[1], "lease_ms", ARGV[3], "updated_ms", ARGV[2])
return {1, tonumber(ARGV[3])}
