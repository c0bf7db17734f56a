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
-- ARGV[5] optional byte budget (0 or absent: none): once a task has been
--         read, the next is read only while the msg and result bytes read
--         so far plus its own (HSTRLEN, read before the value) stay within
--         it; the ids after the first that does not fit are not read
-- ARGV[6] optional "right": walk a list's range from its right end (the
--         next to run) leftwards, so a budget stops at the far end
-- Returns: a flat array, 4 entries per id read, in walk order (lists left
-- to right unless ARGV[6], zsets by ascending score): id; msg (nil when the
-- hash is missing, "" when the hash has no msg field, "wrongtype:<type>"
-- when the key holds another type, e.g. "wrongtype:string"; no encoded
-- TaskMessage starts with "w", an invalid protobuf tag); result (nil when
-- absent); score as a decimal string (the zset score, or the lease expiry
-- when KEYS[2] is given; nil when there is none).
-- With a budget the reply may cover fewer ids than the range: the caller
-- counts them (the next read starts after them), and one more element,
-- "more", ends the reply when the budget stopped the walk.
local data = {}
local stopped = false
local budget = tonumber(ARGV[5] or "") or 0
local used = 0
-- Whether the task at key may be read within the budget.
local function fits(key)
    if budget <= 0 or #data == 0 then
        return true
    end
    local m = redis.pcall("HSTRLEN", key, "msg")
    local r = redis.pcall("HSTRLEN", key, "result")
    if type(m) ~= "number" or type(r) ~= "number" then
        return true -- another type: nothing is read from it
    end
    return used + m + r <= budget
end
local function add(id, score)
    local key = ARGV[4] .. id
    if not fits(key) then
        return false
    end
    local fields = redis.pcall("HMGET", key, "msg", "result")
    if fields.err then
        -- A key of another type: a corrupt row naming the type rather than
        -- a failed page (COMPATIBILITY.md#w13).
        fields = {"wrongtype:" .. redis.call("TYPE", key).ok, false}
    end
    local msg = fields[1]
    if not msg and redis.call("EXISTS", key) == 1 then
        msg = ""
    end
    used = used + #(msg or "") + #(fields[2] or "")
    if KEYS[2] then
        score = redis.call("ZSCORE", KEYS[2], id)
    end
    table.insert(data, id)
    table.insert(data, msg)
    table.insert(data, fields[2])
    table.insert(data, score or false)
    return true
end
if ARGV[1] == "list" then
    local ids = redis.call("LRANGE", KEYS[1], ARGV[2], ARGV[3])
    local first, last, step = 1, #ids, 1
    if ARGV[6] == "right" then
        first, last, step = #ids, 1, -1
    end
    for i = first, last, step do
        if not add(ids[i], false) then
            stopped = true
            break
        end
    end
else
    local entries = redis.call("ZRANGE", KEYS[1], ARGV[2], ARGV[3], "WITHSCORES")
    for i = 1, #entries, 2 do
        if not add(entries[i], entries[i + 1]) then
            stopped = true
            break
        end
    end
end
if stopped then
    table.insert(data, "more")
end
return data
