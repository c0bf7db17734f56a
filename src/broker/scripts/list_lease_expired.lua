-- list_lease_expired: the active tasks whose lease ended before a cutoff
-- (asynq rdb.ListLeaseExpired).
-- KEYS[1] asynq:{<q>}:lease  zset id -> lease expiry (unix s)
-- --
-- ARGV[1] cutoff, unix s (leases scored <= cutoff)
-- ARGV[2] task key prefix asynq:{<q>}:t:
-- ARGV[3] most tasks to return
-- Returns: flat array id1, msg1, id2, msg2, ...; ids without a msg are
-- skipped; the msg of an id whose key cannot be read (a key of another type)
-- is the integer 0, so one bad key does not fail the listing
-- (COMPATIBILITY.md#w13).
local out = {}
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
    local msg = redis.pcall("HGET", ARGV[2] .. id, "msg")
    if type(msg) == "table" then
        msg = 0
    end
    if msg then
        out[#out + 1] = id
        out[#out + 1] = msg
    end
end
return out
