-- queues_stats: the part of several queues' counts that needs Lua, for the
-- dashboard's statistics snapshot (asynq rdb.CurrentStats for each queue),
-- and optionally the few samples of each queue's outage series that the
-- retry-growth figures need (asynqdeck only). One queue that cannot be read
-- (a key of the wrong type) yields an error entry; the others answer.
--
-- Runs inside the MULTI/EXEC of Broker::queues_stats (src/broker/stats/transaction.rs),
-- next to a plain SMEMBERS asynq:queues (queues deleted since listed), one
-- MGET of every queue's counters and paused flag, and one EXISTS per kind
-- of key over the queues this script is not asked to read it for (which
-- proves those sizes 0; the caller reads again when it does not). Plain
-- commands there cost Redis a fraction of the same reads made from Lua.
-- The keys come prebuilt in ARGV (building them here by string
-- concatenation cost more than passing them); KEYS is not read. On a Redis
-- Cluster the caller sends one queue per call with that queue's keys also
-- declared as KEYS, which routes the call to the queue's master
-- (src/broker/stats/per_queue.rs, COMPATIBILITY.md K5). Redis's key tracking does not see the
-- keys read here; a caller using it (src/broker/stats/tracking.rs) reads them
-- again with a plain EXISTS in the same transaction.
-- ARGV[1] "1" to read the growth samples, "0" not to
-- ARGV[2] oldest sample time read, unix seconds (now - one hour)
-- ARGV[3] number W of growth windows; ARGV[4] .. ARGV[3+W] the windows, whole seconds
-- then per queue, in order:
--   asynq:{<q>}:pending    list; "" to read the samples only (then n is "0")
--   asynq:{<q>}:t:         task hash prefix
--   n                      number of ARGV items that follow for other keys, then:
--     "l" <list key>                      LLEN (active)
--     "z" <zset key>                      ZCARD (scheduled, retry, archived, completed)
--     "g" <groups set key> <group prefix> number of groups and the sum of
--                                         their zsets' sizes (aggregating;
--                                         estimated past 1,000 groups:
--                                         lib/group_total)
--   asynqdeck:{<q>}:samples (only when ARGV[1] is "1") zset "<unix s>:<retry>:<archived>" -> unix s
-- Returns one flat array (nested tables cost Redis more to reply), per queue:
--   ok:    LLEN pending, pending_since of the rightmost (next to run) task
--          (false when none or no such field), that task's id (false when
--          none), then one size per "l"/"z"
--          item and two numbers per "g" item, in ARGV order; then, with
--          samples, m >= 0 and m members of the series scored >= ARGV[2]:
--          the newest, the oldest, and for each window w the series covers
--          the newest scored <= newest - w (maybe repeated), or -1 and the
--          Redis error text when the series could not be read;
--   error: -1 and the Redis error text (the counts could not be read);
--   samples only (pending key ""): the samples part alone.
-- Read-only. Errors are caught per queue (pcall), never raised. Arguments to
-- Redis are passed as strings (a number costs a conversion per call); a
-- sample's time is read from its member, which starts with it (the score is
-- the same number).

local match, format, tonumber, pcall = string.match, string.format, tonumber, pcall

local function error_text(e)
    if type(e) == "table" then
        e = e.err
    end
    return tostring(e)
end

-- The unix time a sample member starts with; nil when it does not parse.
local function sample_time(member)
    return tonumber(match(member, "^(%d+):"))
end

local with_samples = ARGV[1] == "1"
local since_arg = ARGV[2]
local since = tonumber(since_arg)
local nwindows = tonumber(ARGV[3])
local windows = {}
for j = 1, nwindows do
    windows[j] = tonumber(ARGV[3 + j])
end

local out = {}
local n = 0

-- Appends the queue's counts at ARGV[a + 1 ..] to out; returns the new length.
local function counts(a, last)
    local pending_key = ARGV[a + 1]
    local pending = redis.call("LLEN", pending_key)
    local since_ns, id = false, false
    if pending > 0 then
        id = redis.call("LINDEX", pending_key, "-1")
        if id then
            since_ns = redis.call("HGET", ARGV[a + 2] .. id, "pending_since")
        end
    end
    local m = n + 3
    out[n + 1] = pending
    out[n + 2] = since_ns
    out[n + 3] = id
    local j = a + 4
    while j <= last do
        local kind = ARGV[j]
        if kind == "z" then
            m = m + 1
            out[m] = redis.call("ZCARD", ARGV[j + 1])
            j = j + 2
        elseif kind == "l" then
            m = m + 1
            out[m] = redis.call("LLEN", ARGV[j + 1])
            j = j + 2
        elseif kind == "g" then
            -- Bounded: at most GROUP_TOTAL_LIMIT groups read (lib/group_total).
            out[m + 1], out[m + 2] = group_total(ARGV[j + 1], ARGV[j + 2], GROUP_TOTAL_LIMIT, GROUP_TOTAL_SAMPLE)
            m = m + 2
            j = j + 3
        else
            error("queues_stats: unknown item " .. tostring(kind))
        end
    end
    return m
end

-- Appends the growth samples of series `key` to out after position at;
-- returns the new length.
local function growth_samples(at, key)
    local newest = redis.call("ZREVRANGE", key, "0", "0")[1]
    if not newest then
        return at
    end
    local newest_at = sample_time(newest)
    if not newest_at or newest_at < since then
        -- Nothing recent, or a foreign member: read by score.
        newest = redis.call("ZREVRANGEBYSCORE", key, "+inf", since_arg, "LIMIT", "0", "1")[1]
        if not newest then
            return at
        end
        newest_at = sample_time(newest)
    end
    local oldest = redis.call("ZRANGEBYSCORE", key, since_arg, "+inf", "LIMIT", "0", "1")[1]
    at = at + 1
    out[at] = newest
    if oldest then
        at = at + 1
        out[at] = oldest
    end
    if not newest_at then
        return at
    end
    for _, w in ipairs(windows) do
        local cutoff = newest_at - w
        -- Nothing scored in [since, cutoff] (the series does not reach back
        -- w): no base; the oldest is (retry_growth falls back to it).
        if cutoff >= since then
            -- %d: tostring would format a double (%.14g), which costs more.
            local base = redis.call("ZREVRANGEBYSCORE", key, format("%d", cutoff), since_arg,
                "LIMIT", "0", "1")[1]
            if base then
                at = at + 1
                out[at] = base
            end
        end
    end
    return at
end

-- Drops out[from ..] (what a failed step had appended).
local function truncate(from)
    for j = #out, from, -1 do
        out[j] = nil
    end
end

local a = 3 + nwindows
while a < #ARGV do
    local extra = ARGV[a + 3]
    local last = a + 3 + (extra == "0" and 0 or tonumber(extra))
    local ok, m = true, n
    if ARGV[a + 1] ~= "" then
        ok, m = pcall(counts, a, last)
    end
    if ok then
        n = m
        if with_samples then
            last = last + 1
            out[n + 1] = 0 -- the count's place, so out has no hole
            local sok, s = pcall(growth_samples, n + 1, ARGV[last])
            if sok then
                out[n + 1] = s - n - 1
                n = s
            else
                truncate(n + 1)
                out[n + 1] = -1
                out[n + 2] = error_text(s)
                n = n + 2
            end
        end
    else
        truncate(n + 1)
        out[n + 1] = -1
        out[n + 2] = error_text(m)
        n = n + 2
        if with_samples then
            last = last + 1
        end
    end
    a = last
end
return out
