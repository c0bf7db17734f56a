-- dequeue: lease up to N pending tasks of one queue (asynq rdb.Dequeue, batched).
-- KEYS[1] asynq:{<q>}:pending   list (workers take from the right)
-- KEYS[2] asynq:{<q>}:paused    string, exists while the queue is paused
-- KEYS[3] asynq:{<q>}:active    list
-- KEYS[4] asynq:{<q>}:lease     zset id -> lease expiry (unix s)
-- --
-- ARGV[1] lease expiry, unix s
-- ARGV[2] task key prefix asynq:{<q>}:t:
-- ARGV[3] most tasks to take (>= 1)
-- Returns: flat array id1, msg1, id2, msg2, ... (empty when paused or empty).
-- Each task moves as Go's single dequeue does: RPOPLPUSH to active, state
-- active, pending_since removed, lease set. An id whose hash has no msg is
-- dropped from active instead of being leased forever.
-- asynq divergence: COMPATIBILITY.md#w1, COMPATIBILITY.md#w2
if redis.call("EXISTS", KEYS[2]) == 1 then
    return {}
end
local out = {}
for _ = 1, tonumber(ARGV[3]) do
    local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
    if not id then
        break
    end
    local key = ARGV[2] .. id
    local msg = redis.call("HGET", key, "msg")
    if msg then
        redis.call("HSET", key, "state", "active")
        redis.call("HDEL", key, "pending_since")
        redis.call("ZADD", KEYS[4], ARGV[1], id)
        out[#out + 1] = id
        out[#out + 1] = msg
    else
        redis.call("LREM", KEYS[3], 1, id)
    end
end
return out
