-- queues_stats: the counts of several queues in one call, for the
-- dashboard's statistics snapshot (asynq rdb.CurrentStats for each queue,
-- exactly as queue_stats), plus the few samples of each queue's outage series
-- that the retry-growth figures need (asynqdeck only). One queue that cannot
-- be read (a key of the wrong type) yields an error entry; the others answer.
-- KEYS[1] asynq:queues                          set of queue names
-- then 13 keys per queue; for the i-th queue (1-based), with b = 1 + 13 * (i - 1):
-- KEYS[b+1] .. KEYS[b+12]  the queue's keys, as queue_stats takes them in
--                          KEYS[1] .. KEYS[12] (pending ... groups)
-- KEYS[b+13]               asynqdeck:{<q>}:samples  zset "<unix s>:<retry>:<archived>" -> unix s
-- --
-- ARGV[1] oldest sample time read, unix seconds (now - one hour)
-- ARGV[2] number W of growth windows; ARGV[3] .. ARGV[2+W] the windows, whole seconds
-- then 3 per queue; for the i-th queue, with a = 2 + W + 3 * (i - 1):
-- ARGV[a+1] queue name
-- ARGV[a+2] task key prefix asynq:{<q>}:t:
-- ARGV[a+3] group key prefix asynq:{<q>}:g:
-- Returns: one entry per queue, in the order given:
--   {0}                   the queue is not in asynq:queues (deleted since listed);
--   {-1, message}         its counts could not be read: the Redis error text;
--   {1, counts, samples, samples_error}
--                         counts: the 14 values queue_stats returns;
--                         samples: flat {member, score, ...}, at most W + 2
--                         pairs: the newest sample scored >= ARGV[1]; for each
--                         window w the newest scored <= newest - w (and >=
--                         ARGV[1]); and when one of those does not exist, the
--                         oldest scored >= ARGV[1]. Empty without samples.
--                         samples_error: false, or the Redis error text when
--                         the series could not be read (samples then empty).
-- Read-only. Errors are caught per queue (pcall), never raised.

local function error_text(e)
    if type(e) == "table" then
        e = e.err
    end
    return tostring(e)
end

-- Appends the {member, score} pair of a WITHSCORES reply to out.
local function push(out, pair)
    table.insert(out, pair[1])
    table.insert(out, pair[2])
end

local function growth_samples(key, since, windows)
    local out = {}
    local newest = redis.call("ZREVRANGEBYSCORE", key, "+inf", since, "WITHSCORES", "LIMIT", 0, 1)
    if #newest == 0 then
        return out
    end
    push(out, newest)
    local newest_at = tonumber(newest[2])
    local missing = false
    for _, w in ipairs(windows) do
        local base = redis.call("ZREVRANGEBYSCORE", key, newest_at - w, since,
            "WITHSCORES", "LIMIT", 0, 1)
        if #base == 0 then
            missing = true
        else
            push(out, base)
        end
    end
    if missing then
        local oldest = redis.call("ZRANGEBYSCORE", key, since, "+inf", "WITHSCORES", "LIMIT", 0, 1)
        push(out, oldest)
    end
    return out
end

local since = tonumber(ARGV[1])
local nwindows = tonumber(ARGV[2])
local windows = {}
for j = 1, nwindows do
    windows[j] = tonumber(ARGV[2 + j])
end
local nqueues = (#KEYS - 1) / 13
local res = {}
for i = 1, nqueues do
    local b = 1 + 13 * (i - 1)
    local a = 2 + nwindows + 3 * (i - 1)
    if redis.call("SISMEMBER", KEYS[1], ARGV[a + 1]) == 0 then
        res[i] = {0}
    else
        local ok, counts = pcall(queue_counts, KEYS, b, ARGV[a + 2], ARGV[a + 3])
        if not ok then
            res[i] = {-1, error_text(counts)}
        else
            local sok, samples = pcall(growth_samples, KEYS[b + 13], since, windows)
            if sok then
                res[i] = {1, counts, samples, false}
            else
                res[i] = {1, counts, {}, error_text(samples)}
            end
        end
    end
end
return res
