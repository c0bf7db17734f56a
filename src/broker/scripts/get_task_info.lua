-- get_task_info: read one task with its state and due time (asynq rdb.GetTaskInfo).
-- KEYS[1] asynq:{<q>}:t:<id>  task hash
-- --
-- ARGV[1] task id
-- ARGV[2] asynq:{<q>}:  queue key prefix (container = prefix .. state)
-- Returns: an empty array when the hash is missing; else {msg, state, score,
-- result}: msg and state as stored (nil when the field is absent); score is
-- the task's score in asynq:{<q>}:<state> as a decimal string for scheduled
-- and retry, its lease expiry (asynq:{<q>}:lease) for active (nil when it
-- has no lease: an orphan, issue 12 R4), nil otherwise; result nil when
-- absent. A key of another type: {"wrongtype:<type>", nil, nil, nil}.
if redis.call("EXISTS", KEYS[1]) == 0 then
    return {}
end
local fields = redis.pcall("HMGET", KEYS[1], "msg", "state", "result")
if fields.err then
    return {"wrongtype:" .. redis.call("TYPE", KEYS[1]).ok, false, false, false}
end
local state = fields[2]
local score = false
if state == "scheduled" or state == "retry" then
    score = redis.call("ZSCORE", ARGV[2] .. state, ARGV[1])
elseif state == "active" then
    score = redis.call("ZSCORE", ARGV[2] .. "lease", ARGV[1])
end
return {fields[1], state, score, fields[3]}
