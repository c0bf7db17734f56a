-- left_behind: find, and optionally delete, left-behind task hashes among
-- the given task keys (asynqdeck only; Go has no such operation).
-- KEYS[1..n] asynq:{<q>}:t:<id>  candidate task keys (one SCAN batch)
-- --
-- ARGV[1] asynq:{<q>}:     queue key prefix (container = prefix .. state)
-- ARGV[2] asynq:{<q>}:t:   task key prefix (id = key without it)
-- ARGV[3] queue name, as msg field 4 must hold it
-- ARGV[4] "count" or "delete"
-- Returns: {found, deleted}.
-- A task is left behind when its hash says scheduled, retry, archived or
-- completed and that zset does not hold its id (Go's archive trim drops ids
-- and keeps their hashes), or says aggregating and neither its group nor any
-- aggregation set holds it (not judged when over 100 sets exist). Pending
-- and active hashes are not judged: list membership costs O(list length).
-- Its msg must name this queue (a key of a queue whose name starts with
-- "<q>}:t:" also matches the prefix). A key of another type is skipped.
-- Deleting releases the task's lock (lib/release_lock), as delete_task.
-- asynq divergence: COMPATIBILITY.md#r12
local found, deleted = 0, 0
local sets = nil
local function in_some_set(id)
    if not sets then
        sets = redis.call("ZRANGE", ARGV[1] .. "aggregation_sets", 0, 100)
    end
    if #sets > 100 then
        return true
    end
    for _, set_key in ipairs(sets) do
        if redis.call("ZSCORE", set_key, id) then
            return true
        end
    end
    return false
end
for _, key in ipairs(KEYS) do
    local fields = redis.pcall("HMGET", key, "state", "group")
    if type(fields) == "table" and not fields.err and fields[1] then
        local state, group = fields[1], fields[2]
        local id = string.sub(key, #ARGV[2] + 1)
        local left = false
        if state == "scheduled" or state == "retry" or state == "archived"
            or state == "completed" then
            left = not redis.call("ZSCORE", ARGV[1] .. state, id)
        elseif state == "aggregating" then
            left = not (group and redis.call("ZSCORE", ARGV[1] .. "g:" .. group, id))
                and not in_some_set(id)
        end
        if left then
            local msg = redis.call("HGET", key, "msg")
            left = msg and msg_field(msg, 4) == ARGV[3]
        end
        if left then
            found = found + 1
            if ARGV[4] == "delete" then
                release_lock(key, id, ARGV[1] .. "unique:")
                redis.call("DEL", key)
                deleted = deleted + 1
            end
        end
    end
end
return {found, deleted}
