-- lib/job_progress: a background job's bookkeeping, shared by the job chunk
-- scripts (job_chunk, job_apply) and job_cancel; prepended to them by
-- scripts.rs (Lua has no includes). The job's hash is
-- asynqdeck:{<q>}:job:<id> (fields: phase, total, done, skipped, failed,
-- cursor, owner, lease_ms, updated_ms, finished_ms, ...); its report lists
-- are <job key>:skipped (ids) and <job key>:failed ("<id>\n<error>").
-- Defines job_owned(job_key, owner, now_ms):
--   Returns: the phase, and done + skipped + failed and total as numbers,
--   when `owner` holds the job's lease (owner field equal and lease_ms >
--   now_ms); nil otherwise (missing job, another owner, lapsed lease).
-- Defines job_report(list_key, entries, cap): appends entries to a report
--   list while it holds fewer than cap; returns nothing.
-- Defines job_record(job_key, done, skipped, failed, now_ms, lease_ms):
--   adds the counts, stamps updated_ms and renews the lease; returns
--   nothing.
-- Defines job_finish(job_key, skipped_key, failed_key, phase, now_ms, ttl_s):
--   sets the final phase, finished_ms, clears owner and lease, sets total to
--   the tasks handled when fewer (the set shrank under the job), and makes
--   the three keys expire in ttl_s seconds; returns nothing.
local function job_owned(job_key, owner, now_ms)
    local f = redis.call("HMGET", job_key, "phase", "owner", "lease_ms", "total",
        "done", "skipped", "failed")
    if not f[1] or f[2] ~= owner or (tonumber(f[3]) or 0) <= tonumber(now_ms) then
        return nil
    end
    local handled = (tonumber(f[5]) or 0) + (tonumber(f[6]) or 0) + (tonumber(f[7]) or 0)
    return f[1], handled, tonumber(f[4]) or 0
end

local function job_report(list_key, entries, cap)
    if #entries == 0 then
        return
    end
    local room = tonumber(cap) - redis.call("LLEN", list_key)
    local j = 1
    while room > 0 and j <= #entries do
        local last = math.min(#entries, j + math.min(room, 100) - 1)
        redis.call("RPUSH", list_key, unpack(entries, j, last))
        room = room - (last - j + 1)
        j = last + 1
    end
end

local function job_record(job_key, done, skipped, failed, now_ms, lease_ms)
    if done > 0 then
        redis.call("HINCRBY", job_key, "done", done)
    end
    if skipped > 0 then
        redis.call("HINCRBY", job_key, "skipped", skipped)
    end
    if failed > 0 then
        redis.call("HINCRBY", job_key, "failed", failed)
    end
    redis.call("HSET", job_key, "updated_ms", now_ms, "lease_ms", lease_ms)
end

local function job_finish(job_key, skipped_key, failed_key, phase, now_ms, ttl_s)
    local f = redis.call("HMGET", job_key, "total", "done", "skipped", "failed")
    local handled = (tonumber(f[2]) or 0) + (tonumber(f[3]) or 0) + (tonumber(f[4]) or 0)
    if phase == "done" and handled < (tonumber(f[1]) or 0) then
        redis.call("HSET", job_key, "total", handled)
    end
    redis.call("HSET", job_key, "phase", phase, "finished_ms", now_ms, "updated_ms", now_ms,
        "owner", "", "lease_ms", 0)
    for _, key in ipairs({job_key, skipped_key, failed_key}) do
        redis.call("EXPIRE", key, ttl_s)
    end
end
