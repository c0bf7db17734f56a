-- archive_task: move one task to the archive, then trim the archive
-- (asynq rdb.ArchiveTask).
-- KEYS[1] asynq:{<q>}:t:<id>    task hash
-- KEYS[2] asynq:{<q>}:archived  zset, score = archived-at (unix s)
-- KEYS[3] asynq:{<q>}:groups    set of group names
-- --
-- ARGV[1] task id
-- ARGV[2] now, unix s
-- ARGV[3] trim cutoff, unix s (now - 90 days; members scored <= it go)
-- ARGV[4] archive size limit (10000)
-- ARGV[5] asynq:{<q>}:    queue key prefix (container = prefix .. state)
-- ARGV[6] asynq:{<q>}:g:  group key prefix (group zset = prefix .. group)
-- ARGV[7] asynq:{<q>}:t:  task key prefix (hashes of trimmed tasks)
-- Returns: 1 archived; 0 no such task; -1 already archived; -2 active;
--          -3 the id is not in the container its state names;
--          -4 the state field is missing or unknown.
-- Nothing changes for any code but 1. msg is not modified and no counter
-- moves, as in Go. Unlike Go, trimmed tasks' hashes are deleted and at most
-- ARGV[4] tasks remain; a bad state is a code, not a Lua error.
-- asynq divergence: COMPATIBILITY.md#g3, COMPATIBILITY.md#t3
if redis.call("EXISTS", KEYS[1]) == 0 then
    return 0
end
local fields = redis.call("HMGET", KEYS[1], "state", "group")
local state, group = fields[1], fields[2]
if state == "active" then
    return -2
elseif state == "archived" then
    return -1
end
local removed = remove_from_container(ARGV[1], state, group, ARGV[5], ARGV[6], KEYS[3], 1)
if removed == nil then
    return -4
elseif not removed then
    return -3
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1])
redis.call("HSET", KEYS[1], "state", "archived")
trim_archive(KEYS[2], ARGV[7], ARGV[3], ARGV[4])
return 1
