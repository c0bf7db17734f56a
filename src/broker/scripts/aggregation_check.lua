-- aggregation_check: if a group is ready, move its oldest tasks into a new
-- aggregation set (asynq rdb.AggregationCheck).
-- KEYS[1] asynq:{<q>}:g:<group>             zset, task id -> time added (unix s)
-- KEYS[2] asynq:{<q>}:g:<group>:<set id>    the new aggregation set (a fresh id)
-- KEYS[3] asynq:{<q>}:aggregation_sets      zset, set key -> deadline (unix s)
-- KEYS[4] asynq:{<q>}:groups                set of group names
-- --
-- ARGV[1] group max size (0: no limit)
-- ARGV[2] group max delay, whole s (0: no limit)
-- ARGV[3] group grace period, whole s
-- ARGV[4] deadline of the new set, unix s
-- ARGV[5] time of the check, unix s
-- ARGV[6] group name
-- ARGV[7] most tasks one set takes (asynqdeck's bound on the call's work)
-- Returns: how many tasks moved into KEYS[2] (0: the group is not ready);
-- -1 when KEYS[1] is not a zset (nothing touched).
-- The group is ready when it holds at least max size tasks, or its oldest
-- task waited max delay, or its newest task waited the grace period; then
-- its oldest min(max size, ARGV[7]) tasks move (all of them, up to ARGV[7],
-- when max size is 0), with their scores. Go moves every task of a group
-- without a max size in one call; here a set takes at most ARGV[7] and the
-- rest form the next set at the next check. A group left empty leaves
-- KEYS[4] (so does an empty or missing group key, which Go keeps listed).
-- asynq divergence: COMPATIBILITY.md#m4
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "none" then
    redis.call("SREM", KEYS[4], ARGV[6])
    return 0
end
if kind ~= "zset" then
    return -1
end
local size = redis.call("ZCARD", KEYS[1])
local max_size = tonumber(ARGV[1])
local max_delay = tonumber(ARGV[2])
local now = tonumber(ARGV[5])
local take = tonumber(ARGV[7])
if max_size > 0 and max_size < take then
    take = max_size
end
local ready = max_size > 0 and size >= max_size
if not ready and max_delay > 0 then
    local oldest = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
    ready = tonumber(oldest[2]) <= now - max_delay
end
if not ready then
    local newest = redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")
    ready = tonumber(newest[2]) <= now - tonumber(ARGV[3])
end
if not ready then
    return 0
end
local members = redis.call("ZRANGE", KEYS[1], 0, take - 1, "WITHSCORES")
local batch = {}
for i = 1, #members, 2 do
    batch[#batch + 1] = members[i + 1]
    batch[#batch + 1] = members[i]
    if #batch == 1000 then
        redis.call("ZADD", KEYS[2], unpack(batch))
        batch = {}
    end
end
if #batch > 0 then
    redis.call("ZADD", KEYS[2], unpack(batch))
end
redis.call("ZREMRANGEBYRANK", KEYS[1], 0, take - 1)
redis.call("ZADD", KEYS[3], ARGV[4], KEYS[2])
if redis.call("ZCARD", KEYS[1]) == 0 then
    redis.call("SREM", KEYS[4], ARGV[6])
end
return #members / 2
