-- lib/release_lock: releasing a deleted task's uniqueness lock, shared by the
-- scripts that delete tasks; prepended to them by scripts.rs.
-- Defines msg_field(msg, field): the last length-delimited field `field` of a
-- protobuf msg (TaskMessage: 4 queue, 10 unique_key), nil when absent or
-- malformed; reads O(number of fields), skipping the payload by its length.
-- Defines release_lock(task_key, id, unique_prefix):
--   task_key       asynq:{<q>}:t:<id>, read before the hash is deleted
--   id             the task id the lock must still hold
--   unique_prefix  asynq:{<q>}:unique:, the only keys ever deleted
-- Returns: 1 when a lock was deleted, else 0.
-- The lock's name is the hash field unique_key when present (Go writes it on
-- enqueue and schedule), else field 10 (unique_key) of the protobuf msg: Go's
-- AddToGroupUnique writes no unique_key field, so a Go-enqueued group task
-- names its lock only inside msg (R13). The lock is deleted only while it
-- still holds this task's id and its name starts with unique_prefix, so a
-- corrupt msg cannot name another key. A key of another type is skipped.
-- asynq divergence: COMPATIBILITY.md#r13

-- The value of a varint at byte pos of s, and the position after it; nil
-- when it runs past the end or over 10 bytes. Lua numbers are doubles:
-- exact up to 2^53, which covers every key and length.
local function read_varint(s, pos)
    local value, mult = 0, 1
    for i = 0, 9 do
        local b = string.byte(s, pos + i)
        if not b then
            return nil
        end
        value = value + (b % 128) * mult
        if b < 128 then
            return value, pos + i + 1
        end
        mult = mult * 128
    end
    return nil
end

-- Field `want` (length-delimited) of a protobuf message, the last one when
-- repeated (protobuf's rule), nil when absent or when msg is malformed.
-- Skips other fields by their length: O(number of fields), not of payload size.
local function msg_field(msg, want)
    local pos, n, found = 1, #msg, nil
    while pos <= n do
        local key
        key, pos = read_varint(msg, pos)
        if not key then
            return nil
        end
        local wire, field = key % 8, math.floor(key / 8)
        if wire == 0 then
            local _
            _, pos = read_varint(msg, pos)
            if not pos then
                return nil
            end
        elseif wire == 1 then
            pos = pos + 8
        elseif wire == 5 then
            pos = pos + 4
        elseif wire == 2 then
            local len
            len, pos = read_varint(msg, pos)
            if not len or pos + len - 1 > n then
                return nil
            end
            if field == want then
                found = string.sub(msg, pos, pos + len - 1)
            end
            pos = pos + len
        else
            return nil
        end
    end
    if pos ~= n + 1 then
        return nil
    end
    return found
end

local function release_lock(task_key, id, unique_prefix)
    local lock = redis.pcall("HGET", task_key, "unique_key")
    if type(lock) ~= "string" or lock == "" then
        local msg = redis.pcall("HGET", task_key, "msg")
        if type(msg) ~= "string" then
            return 0
        end
        lock = msg_field(msg, 10)
    end
    if not lock or string.sub(lock, 1, #unique_prefix) ~= unique_prefix then
        return 0
    end
    if redis.pcall("GET", lock) == id then
        redis.call("DEL", lock)
        return 1
    end
    return 0
end
