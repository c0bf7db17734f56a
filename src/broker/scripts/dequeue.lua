-- dequeue: lease up to N pending tasks of one queue (asynq rdb.Dequeue, batched).
-- KEYS[1] asynq:{<q>}:pending   list (workers take from the right)
-- KEYS[2] asynq:{<q>}:paused    string, exists while the queue is paused
-- KEYS[3] asynq:{<q>}:active    list
-- KEYS[4] asynq:{<q>}:lease     zset id -> lease expiry (unix s)
-- --
-- ARGV[1] lease expiry, unix s
-- ARGV[2] task key prefix asynq:{<q>}:t:
-- ARGV[3] N, most tasks to take (>= 1); ARGV[4] "-N"; ARGV[5] "-(N+1)"
-- Returns: {id_1, ..., id_n, msg_1, ..., msg_n} (see lib/lease_tasks): ids
-- leftmost first, taken from the last; msg_k false when id_k has no msg.
-- Each task moves as Go's single dequeue does (see lib/lease_tasks).
-- asynq divergence: COMPATIBILITY.md#w1, COMPATIBILITY.md#w2
if tonumber(ARGV[3]) > LEASE_MAX then
    return redis.error_reply("at most " .. LEASE_MAX .. " tasks per lease call")
end
return lease_tasks(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
