-- queue_memory_usage: sampled estimate of the bytes a queue takes in Redis
-- (asynq rdb.memoryUsage, in the guarded form of asynq's post-0.26 HEAD).
-- KEYS[1] asynq:{<q>}:active      list
-- KEYS[2] asynq:{<q>}:pending     list
-- KEYS[3] asynq:{<q>}:scheduled   zset
-- KEYS[4] asynq:{<q>}:retry       zset
-- KEYS[5] asynq:{<q>}:archived    zset
-- KEYS[6] asynq:{<q>}:completed   zset
-- KEYS[7] asynq:{<q>}:groups      set of group names
-- --
-- ARGV[1] task key prefix asynq:{<q>}:t:
-- ARGV[2] tasks sampled per list/zset (Go: 20)
-- ARGV[3] groups sampled (the first ARGV[3] names SMEMBERS returns; Go: 5)
-- ARGV[4] group key prefix asynq:{<q>}:g:
-- Returns: the estimate in bytes, truncated to an integer; how it is made is
--   lib/memory_usage.lua, shared with queues_memory_usage. Read-only.
-- asynq divergence: COMPATIBILITY.md#q5
local k = {
    active = KEYS[1], pending = KEYS[2], scheduled = KEYS[3], retry = KEYS[4],
    archived = KEYS[5], completed = KEYS[6], groups = KEYS[7],
}
return memory_usage(k, ARGV[1], ARGV[4], tonumber(ARGV[2]), tonumber(ARGV[3]))
