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
--          (KEYS[7] .. KEYS[11] are read with one MGET: a key of another
--          type reads as absent)
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
--   13    number of groups; 14 sum of the group zsets' sizes (aggregating tasks;
--         estimated past 1,000 groups: lib/group_total).
-- Read-only. The counting is lib/queue_counts.lua.
local k = {
    pending = KEYS[1], active = KEYS[2], scheduled = KEYS[3], retry = KEYS[4],
    archived = KEYS[5], completed = KEYS[6], groups = KEYS[12],
}
return queue_counts(k, redis.call("MGET", KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]),
    ARGV[1], ARGV[2])
