-- job_apply: one chunk of a filtered job (or of a cancel job): apply the
-- action to the ids the dashboard picked, each re-checked to be still in the
-- job's state (and group), and record the progress in the same call
-- (asynqdeck only, issue 15; per task as asynq rdb.RunTask, ArchiveTask,
-- DeleteTask and our run_task, archive_task, delete_task scripts).
-- KEYS[1] asynqdeck:{<q>}:job:<id>  the job's hash
-- KEYS[2] <job key>:skipped  report list of skipped ids
-- KEYS[3] <job key>:failed   report list
-- KEYS[4] asynq:{<q>}:pending   list
-- KEYS[5] asynq:{<q>}:archived  zset
-- KEYS[6] asynq:{<q>}:groups    set of group names
-- --
-- ARGV[1] the owner id holding the lease
-- ARGV[2] now, unix ms
-- ARGV[3] renewed lease deadline, unix ms
-- ARGV[4] "run", "archive", "delete" or "cancel" (cancel: the caller has
--         published the cancelations; only counted here)
-- ARGV[5] the job's state (pending, active, scheduled, ...)
-- ARGV[6] the job's group, "" when none
-- ARGV[7] asynq:{<q>}:  queue key prefix
-- ARGV[8] asynq:{<q>}:g:  group key prefix
-- ARGV[9] asynq:{<q>}:t:  task key prefix
-- ARGV[10] asynq:{<q>}:unique:  prefix of the queue's uniqueness locks
-- ARGV[11] now, unix s (archive score)
-- ARGV[12] archive trim cutoff, unix s
-- ARGV[13] archive size limit (10000)
-- ARGV[14] most ids kept per report list
-- ARGV[15] seconds a finished job is kept
-- ARGV[16] tasks the dashboard looked at and left alone (not matching the
--          filter, unreadable or gone): counted skipped, not listed
-- ARGV[17] the scan cursor after this chunk, before removals: the job's
--          cursor becomes it minus the tasks this call took out of the
--          container
-- ARGV[18] "1" when this chunk ends the scan (the job is then done)
-- ARGV[19] .. the ids to act on
-- Returns: {code, done, skipped}: code 1 progress, 2 done, 3 cancelled
-- (phase was cancelling; nothing applied), 0 this owner does not hold the
-- job (nothing changed).
-- An id is skipped (and listed) when its hash is missing, names another
-- state or group, or the container does not hold it. A pending id is taken
-- out with LREM count -1 (from the tail, where the job reads): the first
-- occurrence from the next-to-run end.
-- asynq divergence: COMPATIBILITY.md#r13, COMPATIBILITY.md#l6
local phase = job_owned(KEYS[1], ARGV[1], ARGV[2])
if not phase then
    return {0, 0, 0}
end
if phase == "cancelling" then
    job_finish(KEYS[1], KEYS[2], KEYS[3], "cancelled", ARGV[2], ARGV[15])
    return {3, 0, 0}
end
local action, want, want_group = ARGV[4], ARGV[5], ARGV[6]
local done, skipped_ids = 0, {}
for i = 19, #ARGV do
    local id = ARGV[i]
    local key = ARGV[9] .. id
    local f = redis.pcall("HMGET", key, "state", "group")
    local ok = type(f) == "table" and not f.err and f[1] == want
        and (want_group == "" or f[2] == want_group)
    if ok and action ~= "cancel" then
        ok = remove_from_container(id, f[1], f[2], ARGV[7], ARGV[8], KEYS[6], -1)
        if ok then
            if action == "delete" then
                release_lock(key, id, ARGV[10])
                redis.call("DEL", key)
            elseif action == "run" then
                redis.call("LPUSH", KEYS[4], id)
                redis.call("HSET", key, "state", "pending")
            else
                redis.call("ZADD", KEYS[5], ARGV[11], id)
                redis.call("HSET", key, "state", "archived")
            end
        end
    end
    if ok then
        done = done + 1
    else
        skipped_ids[#skipped_ids + 1] = id
    end
end
if action == "archive" and done > 0 then
    trim_archive(KEYS[5], ARGV[9], ARGV[12], ARGV[13])
end
job_report(KEYS[2], skipped_ids, ARGV[14])
local removed = done
if action == "cancel" then
    removed = 0
end
redis.call("HSET", KEYS[1], "cursor", math.max(0, tonumber(ARGV[17]) - removed))
job_record(KEYS[1], done, #skipped_ids + tonumber(ARGV[16]), 0, ARGV[2], ARGV[3])
if ARGV[18] == "1" then
    job_finish(KEYS[1], KEYS[2], KEYS[3], "done", ARGV[2], ARGV[15])
    return {2, done, #skipped_ids}
end
return {1, done, #skipped_ids}
