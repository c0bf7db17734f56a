-- queues_stats: the counts of several queues in one call, for the
-- dashboard's statistics snapshot (asynq rdb.CurrentStats for each queue,
-- exactly as queue_stats), and optionally the few samples of each queue's
-- outage series that the retry-growth figures need (asynqdeck only). One
-- queue that cannot be read (a key of the wrong type) yields an error entry;
-- the others answer.
-- KEYS[1] asynq:queues                          set of queue names
-- --
-- ARGV[1] "1" to read the growth samples, "0" not to
-- ARGV[2] oldest sample time read, unix seconds (now - one hour)
-- ARGV[3] number W of growth windows; ARGV[4] .. ARGV[3+W] the windows, whole seconds
-- then, with s = 3 + W, the 14 key suffixes every queue's keys share after
-- the queue's prefix asynq:{<q>}: (wire spec key names):
-- ARGV[s+1] .. ARGV[s+6]    pending, active, scheduled, retry, archived, completed
-- ARGV[s+7] .. ARGV[s+10]   processed:<YYYY-MM-DD>, failed:<YYYY-MM-DD> (today, UTC),
--                           processed, failed (all-time counters)
-- ARGV[s+11], ARGV[s+12]    paused, groups
-- ARGV[s+13], ARGV[s+14]    t: (task hash prefix), g: (group zset prefix)
-- then 3 per queue; for the i-th queue, with a = s + 14 + 3 * (i - 1):
-- ARGV[a+1] queue name
-- ARGV[a+2] its key prefix asynq:{<q>}:
-- ARGV[a+3] its outage series asynqdeck:{<q>}:samples  zset "<unix s>:<retry>:<archived>" -> unix s
-- The queues' keys are built here from prefix and suffix rather than passed
-- as KEYS: passing 13 keys per queue cost Redis more than the counting
-- itself. (asynqdeck refuses Redis Cluster, COMPATIBILITY.md A12.) All
-- counters and paused flags are read with one MGET, and a kind of key that
-- no queue has (one EXISTS per kind over all queues) is not read per queue.
-- Returns: one entry per queue, in the order given:
--   {0}                   the queue is not in asynq:queues (deleted since listed);
--   {-1, message}         its counts could not be read: the Redis error text;
--   {1, counts, samples, samples_error}
--                         counts: the 14 values queue_stats returns;
--                         samples: members (each "<unix s>:<retry>:<archived>")
--                         of the series scored >= ARGV[2]: the newest, the
--                         oldest, and for each window w the series covers the
--                         newest scored <= newest - w; at most W + 2, maybe
--                         repeated; empty without samples or when ARGV[1] is "0";
--                         samples_error: false, or the Redis error text when
--                         the series could not be read (samples then empty).
-- Read-only. Errors are caught per queue (pcall), never raised. Arguments to
-- Redis are passed as strings (a number costs a conversion per call); a
-- sample's time is read from its member, which starts with it (the score is
-- the same number).

local function error_text(e)
    if type(e) == "table" then
        e = e.err
    end
    return tostring(e)
end

-- The unix time a sample member starts with; nil when it does not parse.
local function sample_time(member)
    return tonumber(string.match(member, "^(%d+):"))
end

local function growth_samples(key, since_arg, since, windows)
    local newest = redis.call("ZREVRANGE", key, "0", "0")[1]
    if not newest then
        return {}
    end
    local newest_at = sample_time(newest)
    if not newest_at or newest_at < since then
        -- Nothing recent, or a foreign member: read by score.
        newest = redis.call("ZREVRANGEBYSCORE", key, "+inf", since_arg, "LIMIT", "0", "1")[1]
        if not newest then
            return {}
        end
        newest_at = sample_time(newest)
    end
    local oldest = redis.call("ZRANGEBYSCORE", key, since_arg, "+inf", "LIMIT", "0", "1")[1]
    local out = {newest, oldest}
    local oldest_at = sample_time(oldest)
    if not newest_at or not oldest_at then
        return out
    end
    for _, w in ipairs(windows) do
        local cutoff = newest_at - w
        -- When the series does not reach back w, its oldest is the base.
        if oldest_at <= cutoff then
            local base = redis.call("ZREVRANGEBYSCORE", key, tostring(cutoff), since_arg,
                "LIMIT", "0", "1")[1]
            if base then
                table.insert(out, base)
            end
        end
    end
    return out
end

local with_samples = ARGV[1] == "1"
local since_arg = ARGV[2]
local since = tonumber(since_arg)
local nwindows = tonumber(ARGV[3])
local windows = {}
for j = 1, nwindows do
    windows[j] = tonumber(ARGV[3 + j])
end
local s = 3 + nwindows
local sfx = {}
for j = 1, 14 do
    sfx[j] = ARGV[s + j]
end
local nqueues = (#ARGV - s - 14) / 3

local known = {}
for _, name in ipairs(redis.call("SMEMBERS", KEYS[1])) do
    known[name] = true
end
-- The listed queues' keys, built once.
local qkeys = {}
for i = 1, nqueues do
    local a = s + 14 + 3 * (i - 1)
    if known[ARGV[a + 1]] then
        local p = ARGV[a + 2]
        qkeys[i] = {
            pending = p .. sfx[1], active = p .. sfx[2], scheduled = p .. sfx[3],
            retry = p .. sfx[4], archived = p .. sfx[5], completed = p .. sfx[6],
            groups = p .. sfx[12],
        }
    end
end
-- Every listed queue's five string keys in one MGET.
local string_keys = {}
for i = 1, nqueues do
    local a = s + 14 + 3 * (i - 1)
    if qkeys[i] then
        local p = ARGV[a + 2]
        for j = 7, 11 do
            table.insert(string_keys, p .. sfx[j])
        end
    end
end
local strings = {}
if #string_keys > 0 then
    strings = redis.call("MGET", unpack(string_keys))
end
-- Most queues are empty in most states (nothing active while idle, no
-- groups, nothing completed without retention): one EXISTS per kind of key
-- over every queue spares a call per queue when no queue has such a key.
-- (Not for pending, which some queue nearly always has.)
local absent = {}
for _, name in ipairs({"active", "scheduled", "retry", "archived", "completed", "groups"}) do
    local ks = {}
    for i = 1, nqueues do
        if qkeys[i] then
            table.insert(ks, qkeys[i][name])
        end
    end
    absent[name] = #ks == 0 or redis.call("EXISTS", unpack(ks)) == 0
end

local res = {}
local at = 0
for i = 1, nqueues do
    local a = s + 14 + 3 * (i - 1)
    local k = qkeys[i]
    if not k then
        res[i] = {0}
    else
        local p = ARGV[a + 2]
        local mine = {strings[at + 1], strings[at + 2], strings[at + 3], strings[at + 4],
            strings[at + 5]}
        at = at + 5
        local ok, counts = pcall(queue_counts, k, mine, p .. sfx[13], p .. sfx[14], absent)
        if not ok then
            res[i] = {-1, error_text(counts)}
        elseif not with_samples then
            res[i] = {1, counts, {}, false}
        else
            local sok, samples = pcall(growth_samples, ARGV[a + 3], since_arg, since, windows)
            if sok then
                res[i] = {1, counts, samples, false}
            else
                res[i] = {1, counts, {}, error_text(samples)}
            end
        end
    end
end
return res
