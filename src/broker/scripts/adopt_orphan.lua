-- adopt_orphan: settle an active id that the orphan scan found without a
-- lease entry or without a task key a grace period ago, if it still is so
-- (asynqdeck only; issue 12 R4).
-- KEYS[1] asynq:{<q>}:active  list
-- KEYS[2] asynq:{<q>}:lease   zset id -> lease expiry (unix s)
-- KEYS[3] asynq:{<q>}:t:<id>  task hash
-- --
-- ARGV[1] task id
-- ARGV[2] lease score to give a lease-less task (unix s): already past the
--         recoverer's cutoff, so the lease-expired path takes it next
-- Returns: 2 the task key is gone: the id was dropped from active and
--   lease (one occurrence; a duplicate is found by a later scan); 1 the task had no lease: it got one that has expired; 0 nothing
--   to do (it has a lease and a task key now, or it left active).
-- LREM from the tail (the oldest end, where orphans sit) finds the id in
-- O(distance from the tail); a lease-less id is put back there once.
if redis.call("EXISTS", KEYS[3]) == 0 then
    local removed = redis.call("LREM", KEYS[1], -1, ARGV[1])
    redis.call("ZREM", KEYS[2], ARGV[1])
    if removed > 0 then
        return 2
    end
    return 0
end
if redis.call("ZSCORE", KEYS[2], ARGV[1]) then
    return 0
end
if redis.call("LREM", KEYS[1], -1, ARGV[1]) == 0 then
    return 0
end
redis.call("RPUSH", KEYS[1], ARGV[1])
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1])
return 1
