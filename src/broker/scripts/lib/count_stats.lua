-- lib/count_stats: the statistics counters shared by the scripts that finish
-- an attempt (done, mark_complete, retry, archive); prepended by scripts.rs.
-- count_daily(daily_key, n, expire_at_s): adds n to a UTC-day counter and
-- sets its expiry on the day's first increment. count_total(total_key, n,
-- maxi64): adds n to an all-time counter, which wraps to 1 when it reaches
-- MaxInt64 as Go's does (wire spec §6.4). n may be a number or its text.
--
-- A counter that cannot be incremented (its value is not an integer, or
-- the key is of another type) is left as it is and named in BAD_COUNTERS;
-- the attempt finishes all the same (issue 12 R6). A script ends with
-- `return counted(reply)`: the reply as is when every counter counted,
-- else {BAD_COUNTERS, reply} (an array first: no reply of these scripts
-- starts with one).
-- asynq divergence: COMPATIBILITY.md#r6
local BAD_COUNTERS = nil

local function bad_counter(key)
    BAD_COUNTERS = BAD_COUNTERS or {}
    for i = 1, #BAD_COUNTERS do
        if BAD_COUNTERS[i] == key then
            return
        end
    end
    BAD_COUNTERS[#BAD_COUNTERS + 1] = key
end

local function counted(reply)
    if BAD_COUNTERS then
        return {BAD_COUNTERS, reply}
    end
    return reply
end

-- INCRBY/INCR/DECRBY/GET on key, or nil (key named bad) when Redis refuses.
local function counter_call(key, ...)
    local r = redis.pcall(...)
    if type(r) == "table" and r.err then
        bad_counter(key)
        return nil
    end
    return r
end

local function count_daily(daily_key, n, expire_at_s)
    local r = counter_call(daily_key, "INCRBY", daily_key, n)
    if r == tonumber(n) then
        redis.call("EXPIREAT", daily_key, expire_at_s)
    end
end

-- The counter's value as a number (0 when absent), or nil when it is not
-- an integer counter (then named bad).
local function counter_value(key)
    local v = counter_call(key, "GET", key)
    if v == nil then
        return nil
    end
    local x = tonumber(v or "0")
    if x == nil then
        bad_counter(key)
    end
    return x
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
        local x = counter_value(total_key)
        if x == nil then
            return
        elseif x == tonumber(maxi64) then
            redis.call("SET", total_key, 1)
        elseif counter_call(total_key, "INCR", total_key) == nil then
            return
        end
    end
end

-- Retry and archive count a failure in both all-time counters at once; when
-- processed has reached MaxInt64 both restart at 1 (Go's combined rule). A
-- bad processed counter does not stop the failed one from counting.
local function count_failure_totals(processed_total, failed_total, maxi64)
    if counter_value(processed_total) == tonumber(maxi64) then
        redis.call("SET", processed_total, 1)
        redis.call("SET", failed_total, 1)
    else
        counter_call(processed_total, "INCR", processed_total)
        counter_call(failed_total, "INCR", failed_total)
    end
end
