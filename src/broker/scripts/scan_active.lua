-- scan_active: one chunk of a queue's active list checked against its lease
-- zset and task hashes, for the recoverer's orphan scan (asynqdeck only;
-- issue 12 R4; Go has no such step).
-- KEYS[1] asynq:{<q>}:active  list of leased ids
-- KEYS[2] asynq:{<q>}:lease   zset id -> lease expiry (unix s)
-- --
-- ARGV[1] offset from the oldest end (the tail; 0 = the oldest id)
-- ARGV[2] chunk size (ids read)
-- ARGV[3] task key prefix asynq:{<q>}:t:
-- Returns: {length of active, id1, flags1, id2, flags2, ...} listing only
-- the ids of the chunk that lack something; flags: 1 no lease entry, 2 no
-- task key, 3 both. {-1} when active is not a list (nothing read).
-- The chunk is read with LRANGE on tail-relative indices, so its cost is
-- O(chunk) whatever the list's length.
local len = redis.pcall("LLEN", KEYS[1])
if type(len) == "table" then
    return {-1}
end
local off = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local out = {len}
if off >= len then
    return out
end
local ids = redis.call("LRANGE", KEYS[1], -(off + n), -(off + 1))
for _, id in ipairs(ids) do
    local flags = 0
    if not redis.call("ZSCORE", KEYS[2], id) then
        flags = flags + 1
    end
    if redis.call("EXISTS", ARGV[3] .. id) == 0 then
        flags = flags + 2
    end
    if flags > 0 then
        out[#out + 1] = id
        out[#out + 1] = flags
    end
end
return out
