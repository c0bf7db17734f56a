-- done_and_dequeue: finish successful tasks of one queue and lease the next
-- ones in the same call (asynq rdb.Done then rdb.Dequeue, batched; one round
-- trip where Go makes one per task and step).
-- KEYS[1] asynq:{<q>}:active                  list
-- KEYS[2] asynq:{<q>}:lease                   zset id -> lease expiry (unix s)
-- KEYS[3] asynq:{<q>}:processed:<YYYY-MM-DD>  daily counter (UTC)
-- KEYS[4] asynq:{<q>}:processed               all-time counter
-- KEYS[5] asynq:{<q>}:pending                 list (workers take from the right)
-- KEYS[6] asynq:{<q>}:paused                  string, exists while the queue is paused
-- --
-- ARGV[1] daily counter expiry, unix s
-- ARGV[2] MaxInt64 (9223372036854775807)
-- ARGV[3] task key prefix asynq:{<q>}:t:
-- ARGV[4] lease expiry of the leased tasks, unix s
-- ARGV[5] N, most tasks to lease (>= 0); ARGV[6] "-N"; ARGV[7] "-(N+1)"
-- ARGV[8] n, then the n ids to finish and their lock pairs, as done.lua's
-- ARGV[4] onwards
-- Returns: dequeue.lua's reply with one more value at the end, the codes as
-- done.lua replies them (1, or an array of one code per task): {id_1, ...,
-- id_n, msg_1, ..., msg_n, codes}; codes wrapped as done.lua wraps them
-- when a counter could not be incremented. The finishing happens first,
-- exactly as a done call followed by a dequeue call.
-- asynq divergence: COMPATIBILITY.md#w1, COMPATIBILITY.md#w2, COMPATIBILITY.md#w11, COMPATIBILITY.md#r6
if tonumber(ARGV[5]) > LEASE_MAX then
    return redis.error_reply("at most " .. LEASE_MAX .. " tasks per lease call")
end
local codes = counted(finish_tasks(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV, 8))
if ARGV[5] == "0" then
    return {codes}
end
local leased = lease_tasks(KEYS[5], KEYS[6], KEYS[1], KEYS[2], ARGV[4], ARGV[3], ARGV[5], ARGV[6], ARGV[7])
leased[#leased + 1] = codes
return leased
