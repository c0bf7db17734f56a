-- job_chunk: one bounded chunk of an "all" job: run, archive or delete the
-- oldest tasks of a container, and record the progress in the same call
-- (asynqdeck only, issue 15; per task as asynq rdb.RunAll*, ArchiveAll*,
-- DeleteAll* and our run_all, archive_all, delete_all scripts).
-- KEYS[1] asynqdeck:{<q>}:job:<id>  the job's hash
-- KEYS[2] <job key>:skipped  report list of skipped ids
-- KEYS[3] <job key>:failed   report list
-- KEYS[4] source: asynq:{<q>}:pending (list), or :scheduled, :retry,
--         :archived, :completed or :g:<group> (zset)
-- KEYS[5] destination: asynq:{<q>}:pending (run) or :archived (archive);
--         the source again for delete (unused)
-- KEYS[6] asynq:{<q>}:groups  set of group names
-- --
-- ARGV[1] the owner id holding the lease
-- ARGV[2] now, unix ms
-- ARGV[3] renewed lease deadline, unix ms
-- ARGV[4] "run", "archive" or "delete"
-- ARGV[5] "list" or "zset": the type of KEYS[4]
-- ARGV[6] most tasks to take in this chunk
-- ARGV[7] asynq:{<q>}:t:  task key prefix
-- ARGV[8] asynq:{<q>}:unique:  prefix of the queue's uniqueness locks
-- ARGV[9] now, unix s (archive score)
-- ARGV[10] archive trim cutoff, unix s
-- ARGV[11] archive size limit (10000)
-- ARGV[12] most ids kept per report list
-- ARGV[13] seconds a finished job is kept
-- ARGV[14] group name, "" unless KEYS[4] is a group
-- Returns: {code, done, skipped}: code 1 progress (more may follow), 2 the
-- job is done, 3 it was cancelled (phase cancelling: now cancelled, nothing
-- taken), 0 this owner does not hold the job (nothing changed).
-- Takes at most min(ARGV[6], total - handled) tasks, oldest first: a list
-- from its tail (the next to be dequeued), a zset by ascending score. The
-- job ends when it has handled `total` tasks (the size at its start, so it
-- never chases new arrivals) or the source is empty.
-- Per task, as the one-shot scripts: delete releases the task's uniqueness
-- lock while it holds the id (lib/release_lock) and deletes the hash, every
-- id counted done; run and archive move a task whose hash exists (state
-- pending / archived only) and drop an id whose hash is missing (skipped,
-- listed). A group leaves KEYS[6] once its zset is empty. Archive trims the
-- archive (lib/trim_archive) after each chunk.
-- asynq divergence: COMPATIBILITY.md#t5, COMPATIBILITY.md#t6, COMPATIBILITY.md#g3,
-- COMPATIBILITY.md#l6, COMPATIBILITY.md#l7
local phase, handled, total = job_owned(KEYS[1], ARGV[1], ARGV[2])
if not phase then
    return {0, 0, 0}
end
if phase == "cancelling" then
    job_finish(KEYS[1], KEYS[2], KEYS[3], "cancelled", ARGV[2], ARGV[13])
    return {3, 0, 0}
end
local n = math.min(tonumber(ARGV[6]), total - handled)
local ids = {}
if n > 0 then
    if ARGV[5] == "list" then
        ids = redis.call("LRANGE", KEYS[4], -n, -1)
    else
        ids = redis.call("ZRANGE", KEYS[4], 0, n - 1)
    end
end
local done, skipped_ids = 0, {}
if #ids > 0 then
    local action = ARGV[4]
    if action == "delete" then
        local task_keys = {}
        for i, id in ipairs(ids) do
            local key = ARGV[7] .. id
            release_lock(key, id, ARGV[8])
            task_keys[i] = key
        end
        for j = 1, #task_keys, 100 do
            redis.call("DEL", unpack(task_keys, j, math.min(j + 99, #task_keys)))
        end
        done = #ids
    else
        -- Oldest first: a list chunk read tail-last is walked backwards.
        local from, to, step = 1, #ids, 1
        if ARGV[5] == "list" then
            from, to, step = #ids, 1, -1
        end
        for i = from, to, step do
            local id = ids[i]
            local key = ARGV[7] .. id
            if redis.call("EXISTS", key) == 1 then
                if action == "run" then
                    redis.call("LPUSH", KEYS[5], id)
                    redis.call("HSET", key, "state", "pending")
                else
                    redis.call("ZADD", KEYS[5], ARGV[9], id)
                    redis.call("HSET", key, "state", "archived")
                end
                done = done + 1
            else
                skipped_ids[#skipped_ids + 1] = id
            end
        end
    end
    if ARGV[5] == "list" then
        redis.call("LTRIM", KEYS[4], 0, -#ids - 1)
    else
        for j = 1, #ids, 100 do
            redis.call("ZREM", KEYS[4], unpack(ids, j, math.min(j + 99, #ids)))
        end
    end
    if ARGV[14] ~= "" and redis.call("ZCARD", KEYS[4]) == 0 then
        redis.call("SREM", KEYS[6], ARGV[14])
    end
    if action == "archive" then
        trim_archive(KEYS[5], ARGV[7], ARGV[10], ARGV[11])
    end
    job_report(KEYS[2], skipped_ids, ARGV[12])
end
job_record(KEYS[1], done, #skipped_ids, 0, ARGV[2], ARGV[3])
if #ids < n or n <= 0 or handled + #ids >= total then
    if ARGV[14] ~= "" and redis.call("ZCARD", KEYS[4]) == 0 then
        redis.call("SREM", KEYS[6], ARGV[14])
    end
    job_finish(KEYS[1], KEYS[2], KEYS[3], "done", ARGV[2], ARGV[13])
    return {2, done, #skipped_ids}
end
return {1, done, #skipped_ids}
