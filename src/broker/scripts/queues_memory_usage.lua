-- queues_memory_usage: the sampled memory estimate of several queues in one
-- call (asynq rdb.memoryUsage for each, exactly as queue_memory_usage), for
-- the dashboard's background memory run. One queue whose estimate fails (a
-- key of the wrong type, MEMORY USAGE refused) yields an error entry; the
-- others answer. No KEYS: each queue's keys are built here from its prefix
-- and the suffixes below. On a Redis Cluster the caller runs queue_memory_usage
-- per queue instead (COMPATIBILITY.md K5).
-- --
-- ARGV[1] tasks sampled per list/zset (Go: 20)
-- ARGV[2] groups sampled per queue (Go: 5)
-- ARGV[3] .. ARGV[11] the key suffixes every queue's keys share after its
--         prefix asynq:{<q>}: (wire spec key names): active, pending,
--         scheduled, retry, archived, completed, groups, t: (task hash
--         prefix), g: (group zset prefix)
-- ARGV[12] .. one per queue: its prefix asynq:{<q>}:
-- Returns: one entry per queue, in the order given: {1, estimate in bytes,
--   truncated to an integer} (see lib/memory_usage.lua), or {-1, the Redis
--   error text}. Read-only. Errors are caught per queue (pcall), never raised.
-- asynq divergence: COMPATIBILITY.md#q5
local sample = tonumber(ARGV[1])
local group_sample = tonumber(ARGV[2])
local sfx = {}
for j = 1, 9 do
    sfx[j] = ARGV[2 + j]
end
local res = {}
for i = 12, #ARGV do
    local p = ARGV[i]
    local k = {
        active = p .. sfx[1], pending = p .. sfx[2], scheduled = p .. sfx[3],
        retry = p .. sfx[4], archived = p .. sfx[5], completed = p .. sfx[6],
        groups = p .. sfx[7],
    }
    local ok, bytes = pcall(memory_usage, k, p .. sfx[8], p .. sfx[9], sample, group_sample)
    if ok then
        res[#res + 1] = {1, bytes}
    else
        if type(bytes) == "table" then
            bytes = bytes.err
        end
        res[#res + 1] = {-1, tostring(bytes)}
    end
end
return res
