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
-- Returns: the estimate in bytes, truncated to an integer. For each list and
--   zset: mean MEMORY USAGE of the first ARGV[2] task hashes (a missing hash
--   counts 0 but stays in the divisor, as Go) times its length, plus the
--   key's own usage. Groups: mean usage of the sampled tasks that have a
--   hash times the total of all group sizes; nothing when none was sampled.
-- Read-only.
-- asynq divergence: COMPATIBILITY.md#q5
local sample = tonumber(ARGV[2])
local total = 0

local function usage(key)
    local n = redis.call("MEMORY", "USAGE", key)
    if n then
        return n
    end
    return 0
end

local function add_container(key, ids, len)
    if #ids > 0 then
        local sum = 0
        for _, id in ipairs(ids) do
            sum = sum + usage(ARGV[1] .. id)
        end
        total = total + (sum / #ids) * len
    end
    total = total + usage(key)
end

for i = 1, 2 do
    add_container(KEYS[i], redis.call("LRANGE", KEYS[i], 0, sample - 1),
        redis.call("LLEN", KEYS[i]))
end
for i = 3, 6 do
    add_container(KEYS[i], redis.call("ZRANGE", KEYS[i], 0, sample - 1),
        redis.call("ZCARD", KEYS[i]))
end

local groups = redis.call("SMEMBERS", KEYS[7])
local group_tasks, sampled, sampled_bytes = 0, 0, 0
for i, name in ipairs(groups) do
    local gkey = ARGV[4] .. name
    group_tasks = group_tasks + redis.call("ZCARD", gkey)
    if i <= tonumber(ARGV[3]) then
        for _, id in ipairs(redis.call("ZRANGE", gkey, 0, sample - 1)) do
            local n = redis.call("MEMORY", "USAGE", ARGV[1] .. id)
            if n then
                sampled = sampled + 1
                sampled_bytes = sampled_bytes + n
            end
        end
    end
end
if sampled > 0 then
    total = total + (sampled_bytes / sampled) * group_tasks
end
return total
