-- group_stats: every group of a queue with its size (asynq rdb.GroupStats).
-- KEYS[1] asynq:{<q>}:groups   set of group names
-- --
-- ARGV[1] group key prefix asynq:{<q>}:g:
-- Returns: a flat array name1, size1, name2, size2, ... (SMEMBERS order),
--   size = ZCARD of asynq:{<q>}:g:<name>. Read-only.
local res = {}
for _, name in ipairs(redis.call("SMEMBERS", KEYS[1])) do
    res[#res + 1] = name
    res[#res + 1] = redis.call("ZCARD", ARGV[1] .. name)
end
return res
