-- archive_all: move every task of a container to the archive, then trim the
-- archive (asynq rdb.ArchiveAllPendingTasks, ArchiveAllScheduledTasks,
-- ArchiveAllRetryTasks, ArchiveAllAggregatingTasks).
-- KEYS[1] source: asynq:{<q>}:pending (list), or :scheduled, :retry or
--         :g:<group> (zset)
-- KEYS[2] asynq:{<q>}:archived  zset, score = archived-at (unix s)
-- KEYS[3] asynq:{<q>}:groups    set of group names (present only when
--         KEYS[1] is a group)
-- --
-- ARGV[1] "list" or "zset": the type of KEYS[1]
-- ARGV[2] now, unix s
-- ARGV[3] trim cutoff, unix s (now - 90 days; members scored <= it go)
-- ARGV[4] archive size limit (10000)
-- ARGV[5] asynq:{<q>}:t:  task key prefix
-- ARGV[6] group name (only when KEYS[3] is given)
-- Returns: the number of tasks archived (some may be trimmed right away when
-- more than ARGV[4] share the archive).
-- Chunks of 100. Hashes get state=archived only: msg, pending_since and locks
-- are untouched and no counter moves, as in Go. An id whose hash is missing is
-- dropped from the source, not archived. Unlike Go, trimmed tasks' hashes are
-- deleted and at most ARGV[4] tasks remain.
-- asynq divergence: COMPATIBILITY.md#t6, COMPATIBILITY.md#g3
local archived = 0
while true do
    local ids
    if ARGV[1] == "list" then
        ids = redis.call("LRANGE", KEYS[1], 0, 99)
    else
        ids = redis.call("ZRANGE", KEYS[1], 0, 99)
    end
    if #ids == 0 then
        break
    end
    for _, id in ipairs(ids) do
        local key = ARGV[5] .. id
        if redis.call("EXISTS", key) == 1 then
            redis.call("ZADD", KEYS[2], ARGV[2], id)
            redis.call("HSET", key, "state", "archived")
            archived = archived + 1
        end
    end
    if ARGV[1] == "list" then
        redis.call("LTRIM", KEYS[1], #ids, -1)
    else
        redis.call("ZREM", KEYS[1], unpack(ids))
    end
end
if KEYS[3] then
    redis.call("SREM", KEYS[3], ARGV[6])
end
trim_archive(KEYS[2], ARGV[5], ARGV[3], ARGV[4])
return archived
