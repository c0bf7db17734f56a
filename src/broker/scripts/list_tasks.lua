-- list_tasks: one page of a task container with each task's msg, result and
-- score (asynq rdb.listMessages, rdb.listZSetEntries, rdb.ListLeaseExpired).
-- KEYS[1] asynq:{<q>}:<state> or asynq:{<q>}:g:<group>  the container: a
--         list (pending, active) or a zset (the others)
-- KEYS[2] asynq:{<q>}:lease  zset id -> lease expiry (unix s); present only
--         when listing active
-- --
-- ARGV[1] "list" or "zset": the type of KEYS[1]
-- ARGV[2] start: list index (may be negative) or zset rank
-- ARGV[3] stop, inclusive, same kind as ARGV[2]
-- ARGV[4] asynq:{<q>}:t:  task key prefix
-- Returns: a flat array, 4 entries per id in container order (lists left to
-- right, zsets by ascending score): id; msg (nil when the hash is missing,
-- "" when the hash has no msg field or the key is not a hash); result (nil
-- when absent); score as a decimal string (the zset score, or the lease
-- expiry when KEYS[2] is given; nil when there is none).
local data = {}
local function add(id, score)
    local key = ARGV[4] .. id
    local fields = redis.pcall("HMGET", key, "msg", "result")
    if fields.err then
        -- A key of another type: listed like a hash without msg, a corrupt
        -- row, rather than failing the page (COMPATIBILITY.md#w13).
        fields = {false, false}
    end
    local msg = fields[1]
    if not msg and redis.call("EXISTS", key) == 1 then
        msg = ""
    end
    if KEYS[2] then
        score = redis.call("ZSCORE", KEYS[2], id)
    end
    table.insert(data, id)
    table.insert(data, msg)
    table.insert(data, fields[2])
    table.insert(data, score or false)
end
if ARGV[1] == "list" then
    for _, id in ipairs(redis.call("LRANGE", KEYS[1], ARGV[2], ARGV[3])) do
        add(id, false)
    end
else
    local entries = redis.call("ZRANGE", KEYS[1], ARGV[2], ARGV[3], "WITHSCORES")
    for i = 1, #entries, 2 do
        add(entries[i], entries[i + 1])
    end
end
return data
