-- write_scheduler_entries: replace a scheduler's registered entries (asynq
-- rdb.WriteSchedulerEntries; the ZADD on asynq:schedulers goes before it).
-- KEYS[1] asynq:schedulers:{<scheduler id>}   list of SchedulerEntry
-- --
-- ARGV[1] TTL, whole seconds (>= 1)
-- ARGV[2], ARGV[3], ... encoded SchedulerEntry, in registration order
-- Returns: 1. Entries are LPUSHed one by one, so the list holds them in
--   reverse registration order (as Go); with no entries the key is absent.
redis.call("DEL", KEYS[1])
for i = 2, #ARGV do
    redis.call("LPUSH", KEYS[1], ARGV[i])
end
redis.call("EXPIRE", KEYS[1], ARGV[1])
return 1
