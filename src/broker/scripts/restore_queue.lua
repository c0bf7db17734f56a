-- restore_queue: confirm that a queue missing from asynq:queues holds tasks
-- and clear a paused flag left over from its deletion, before the caller
-- adds it back with SADD asynq:queues (asynqdeck only; issue 12 R14).
-- KEYS[1] asynq:{<q>}:pending    list
-- KEYS[2] asynq:{<q>}:active     list
-- KEYS[3] asynq:{<q>}:scheduled  zset
-- KEYS[4] asynq:{<q>}:retry      zset
-- KEYS[5] asynq:{<q>}:archived   zset
-- KEYS[6] asynq:{<q>}:completed  zset
-- KEYS[7] asynq:{<q>}:groups     set of group names
-- KEYS[8] asynq:{<q>}:paused     string
-- --
-- (no ARGV)
-- Returns: 1 the queue holds tasks (the paused flag is gone); 0 it holds
-- none (nothing changed). A container key counts only with its own type
-- (a task hash whose id happens to end in ":pending" is not a queue).
local kinds = {"list", "list", "zset", "zset", "zset", "zset", "set"}
local holds = false
for i, kind in ipairs(kinds) do
    if redis.call("TYPE", KEYS[i]).ok == kind then
        holds = true
    end
end
if not holds then
    return 0
end
redis.call("DEL", KEYS[8])
return 1
