-- group_stats: one page of a queue's groups with their sizes (asynq
-- rdb.GroupStats, paged: issue 15, COMPATIBILITY.md#l9).
-- KEYS[1] asynq:{<q>}:groups   set of group names
-- --
-- ARGV[1] group key prefix asynq:{<q>}:g:
-- ARGV[2] SSCAN cursor: "0" for the first page, else the cursor a page returned
-- ARGV[3] page size, the SSCAN COUNT hint (a positive integer)
-- Returns: a flat array: the next cursor ("0" when the walk is over), then
--   name1, size1, name2, size2, ... (one SSCAN step's names, about ARGV[3]
--   of them: Redis returns whole hash buckets, and a small set encoded as a
--   listpack or intset whole), size = ZCARD of asynq:{<q>}:g:<name>, or
--   -1 when that key is not a sorted set (the caller skips it).
--   A walk from "0" to "0" returns every group present throughout the walk
--   (SSCAN's guarantee). Read-only.
local page = redis.call("SSCAN", KEYS[1], ARGV[2], "COUNT", ARGV[3])
local res = {page[1]}
for _, name in ipairs(page[2]) do
    res[#res + 1] = name
    local ok, size = pcall(redis.call, "ZCARD", ARGV[1] .. name)
    res[#res + 1] = ok and size or -1
end
return res
