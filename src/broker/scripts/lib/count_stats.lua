-- lib/count_stats: the statistics counters shared by the scripts that finish
-- an attempt (done, mark_complete, retry, archive); prepended by scripts.rs.
-- count_daily(daily_key, n, expire_at_s): adds n to a UTC-day counter and
-- sets its expiry on the day's first increment. count_total(total_key, n,
-- maxi64): adds n to an all-time counter, which wraps to 1 when it reaches
-- MaxInt64 as Go's does (wire spec §6.4). n may be a number or its text.
local function count_daily(daily_key, n, expire_at_s)
    if redis.call("INCRBY", daily_key, n) == tonumber(n) then
        redis.call("EXPIREAT", daily_key, expire_at_s)
    end
end

local function count_total(total_key, n, maxi64)
    -- Go steps one task at a time and compares the counter with MaxInt64 as
    -- Lua numbers (doubles), so near the top its wrap comes early. One
    -- INCRBY gives the same result far below it; near it (or when INCRBY
    -- refuses to pass MaxInt64) the increment is undone and Go's steps run.
    local r = redis.pcall("INCRBY", total_key, n)
    if type(r) == "number" then
        if r < tonumber(maxi64) - 4096 then
            return
        end
        redis.call("DECRBY", total_key, n)
    end
    for _ = 1, tonumber(n) do
        if tonumber(redis.call("GET", total_key) or "0") == tonumber(maxi64) then
            redis.call("SET", total_key, 1)
        else
            redis.call("INCR", total_key)
        end
    end
end

-- Retry and archive count a failure in both all-time counters at once; when
-- processed has reached MaxInt64 both restart at 1 (Go's combined rule).
local function count_failure_totals(processed_total, failed_total, maxi64)
    if tonumber(redis.call("GET", processed_total) or "0") == tonumber(maxi64) then
        redis.call("SET", processed_total, 1)
        redis.call("SET", failed_total, 1)
    else
        redis.call("INCR", processed_total)
        redis.call("INCR", failed_total)
    end
end
