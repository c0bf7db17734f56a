-- list_live_members: read a heartbeat registry and prune it (asynq
-- listServerKeysCmd, listWorkersCmd, listSchedulerKeysCmd).
-- KEYS[1] asynq:servers | asynq:workers | asynq:schedulers   zset key name -> expiry (unix s)
-- --
-- ARGV[1] now, unix seconds
-- Returns: the members whose expiry is >= now (ascending expiry); members
--   that expired before now (score <= now - 1) are removed.
local now = tonumber(ARGV[1])
local live = redis.call("ZRANGEBYSCORE", KEYS[1], now, "+inf")
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - 1)
return live
