-- done: finish successful (or revoked) tasks of one queue without retention
-- (asynq rdb.Done, batched).
-- KEYS[1] asynq:{<q>}:active                  list
-- KEYS[2] asynq:{<q>}:lease                   zset
-- KEYS[3] asynq:{<q>}:processed:<YYYY-MM-DD>  daily counter (UTC)
-- KEYS[4] asynq:{<q>}:processed               all-time counter
-- --
-- ARGV[1] daily counter expiry, unix s
-- ARGV[2] MaxInt64 (9223372036854775807)
-- ARGV[3] task key prefix asynq:{<q>}:t:
-- ARGV[4], ARGV[5], ... pairs: task id, its unique lock key ("" when none;
--         same queue, so the same hash slot)
-- Returns: one code per task, in order: 1 done; 0 not in active; -1 no
-- lease; -2 no task hash. Each task follows Go's step order (remove from
-- active, lease, delete hash, count, release its lock if it holds it); a
-- task stops at its first missing step, and only finished tasks are counted.
-- asynq divergence: COMPATIBILITY.md#w1
local codes = {}
local finished = 0
for i = 4, #ARGV, 2 do
    local id, lock = ARGV[i], ARGV[i + 1]
    local code = 1
    if redis.call("LREM", KEYS[1], 0, id) == 0 then
        code = 0
    elseif redis.call("ZREM", KEYS[2], id) == 0 then
        code = -1
    elseif redis.call("DEL", ARGV[3] .. id) == 0 then
        code = -2
    else
        finished = finished + 1
        if lock ~= "" and redis.call("GET", lock) == id then
            redis.call("DEL", lock)
        end
    end
    codes[#codes + 1] = code
end
if finished > 0 then
    count_daily(KEYS[3], finished, ARGV[1])
    count_total(KEYS[4], finished, ARGV[2])
end
return codes
