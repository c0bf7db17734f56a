-- queue_stats: counts of one queue for QueueInfo (asynq rdb.CurrentStats).
-- KEYS[1]  asynq:{<q>}:pending                     list
-- KEYS[2]  asynq:{<q>}:active                      list
-- KEYS[3]  asynq:{<q>}:scheduled                   zset
-- KEYS[4]  asynq:{<q>}:retry                       zset
-- KEYS[5]  asynq:{<q>}:archived                    zset
-- KEYS[6]  asynq:{<q>}:completed                   zset
-- KEYS[7]  asynq:{<q>}:processed:<YYYY-MM-DD>      today's processed counter (UTC)
-- KEYS[8]  asynq:{<q>}:failed:<YYYY-MM-DD>         today's failed counter (UTC)
-- KEYS[9]  asynq:{<q>}:processed                   all-time processed counter
-- KEYS[10] asynq:{<q>}:failed                      all-time failed counter
-- KEYS[11] asynq:{<q>}:paused                      string, present iff paused
-- KEYS[12] asynq:{<q>}:groups                      set of group names
-- --
-- ARGV[1] task key prefix asynq:{<q>}:t:
-- ARGV[2] group key prefix asynq:{<q>}:g:
-- Returns: an array of 14 values, in this order:
--   1-6   sizes of pending, active, scheduled, retry, archived, completed (integers);
--   7-10  the four counters as stored (bulk strings), false (nil) when absent;
--   11    1 when paused, else 0;
--   12    pending_since (unix ns, bulk string) of the rightmost (next to run)
--         pending task, false (nil) when there is none or it has no such field;
--   13    number of groups; 14 sum of the group zsets' sizes (aggregating tasks).
-- Read-only.
local res = {}
res[1] = redis.call("LLEN", KEYS[1])
res[2] = redis.call("LLEN", KEYS[2])
for i = 3, 6 do
    res[i] = redis.call("ZCARD", KEYS[i])
end
for i = 7, 10 do
    res[i] = redis.call("GET", KEYS[i])
end
res[11] = redis.call("EXISTS", KEYS[11])
res[12] = false
if res[1] > 0 then
    local next_id = redis.call("LINDEX", KEYS[1], -1)
    if next_id then
        res[12] = redis.call("HGET", ARGV[1] .. next_id, "pending_since")
    end
end
local groups = redis.call("SMEMBERS", KEYS[12])
local aggregating = 0
for _, name in ipairs(groups) do
    aggregating = aggregating + redis.call("ZCARD", ARGV[2] .. name)
end
res[13] = #groups
res[14] = aggregating
return res
