-- delete_queue: remove a queue's tasks and containers (asynq rdb.RemoveQueue,
-- both the plain and the force variant).
-- KEYS[1] asynq:{<q>}:pending            list
-- KEYS[2] asynq:{<q>}:active             list
-- KEYS[3] asynq:{<q>}:scheduled          zset
-- KEYS[4] asynq:{<q>}:retry              zset
-- KEYS[5] asynq:{<q>}:archived           zset
-- KEYS[6] asynq:{<q>}:lease              zset
-- KEYS[7] asynq:{<q>}:completed          zset
-- KEYS[8] asynq:{<q>}:groups             set of group names
-- KEYS[9] asynq:{<q>}:aggregation_sets   zset of aggregation-set key names
-- KEYS[10] asynq:{<q>}:paused             string
-- KEYS[11] asynq:{<q>}:processed          all-time counter
-- KEYS[12] asynq:{<q>}:failed             all-time counter
-- KEYS[13] asynqdeck:{<q>}:samples        asynqdeck's outage series (zset)
-- KEYS[14..] asynq:{<q>}:processed:<YYYY-MM-DD> and :failed:<YYYY-MM-DD>
--          daily counters, every day one could still exist (STATS_TTL)
-- --
-- ARGV[1] task key prefix asynq:{<q>}:t:
-- ARGV[2] group key prefix asynq:{<q>}:g:
-- ARGV[3] 1 = force (delete the tasks too), 0 = only an empty queue
-- Returns: 1 deleted; -1 not forced and the queue holds tasks (nothing
--   changed); -2 forced but the queue has active tasks (nothing changed).
-- Unlike Go, completed and aggregating tasks count as tasks, and a forced
-- delete removes them (hashes, group zsets, the groups set, aggregation sets)
-- instead of leaving them orphaned. Unlike Go, every other key of the queue
-- goes too: the paused flag, the counters, the outage samples and the
-- uniqueness lock of each deleted task (hash field unique_key, released
-- while it still holds the task's id), so a queue of the same name that
-- comes back (issue 12 R14) starts unpaused and from zero. The group and
-- aggregation-set key names are built here or read from KEYS[9]; they
-- share the queue's hash tag.
-- asynq divergence: COMPATIBILITY.md#q3, COMPATIBILITY.md#r14
local CHUNK = 100
local groups = redis.call("SMEMBERS", KEYS[8])

if ARGV[3] == "1" then
    if redis.call("LLEN", KEYS[2]) > 0 then
        return -2
    end
else
    local holds = false
    for i = 1, 2 do
        if redis.call("LLEN", KEYS[i]) > 0 then holds = true end
    end
    for _, i in ipairs({3, 4, 5, 7}) do
        if redis.call("ZCARD", KEYS[i]) > 0 then holds = true end
    end
    for _, name in ipairs(groups) do
        if redis.call("ZCARD", ARGV[2] .. name) > 0 then holds = true end
    end
    if redis.call("ZCARD", KEYS[9]) > 0 then holds = true end
    if holds then
        return -1
    end
end

-- Deletes the task hash of every member, CHUNK ids at a time.
local function delete_hashes(key, is_list)
    local start = 0
    while true do
        local ids
        if is_list then
            ids = redis.call("LRANGE", key, start, start + CHUNK - 1)
        else
            ids = redis.call("ZRANGE", key, start, start + CHUNK - 1)
        end
        if #ids == 0 then
            return
        end
        for _, id in ipairs(ids) do
            local key = ARGV[1] .. id
            local lock = redis.pcall("HGET", key, "unique_key")
            if type(lock) == "string" and lock ~= "" and redis.call("GET", lock) == id then
                redis.call("DEL", lock)
            end
            redis.call("DEL", key)
        end
        start = start + CHUNK
    end
end

delete_hashes(KEYS[1], true)
for _, i in ipairs({3, 4, 5, 7}) do
    delete_hashes(KEYS[i], false)
end
for _, name in ipairs(groups) do
    local gkey = ARGV[2] .. name
    delete_hashes(gkey, false)
    redis.call("DEL", gkey)
end
local start = 0
while true do
    local sets = redis.call("ZRANGE", KEYS[9], start, start + CHUNK - 1)
    if #sets == 0 then
        break
    end
    for _, set_key in ipairs(sets) do
        delete_hashes(set_key, false)
        redis.call("DEL", set_key)
    end
    start = start + CHUNK
end
for i = 1, #KEYS do
    redis.call("DEL", KEYS[i])
end
return 1
