-- write_server_state: store a server's info and its in-flight tasks (asynq
-- rdb.WriteServerState; the two ZADDs on the global sets go before it).
-- KEYS[1] asynq:servers:{<host>:<pid>:<server id>}   string, ServerInfo
-- KEYS[2] asynq:workers:{<host>:<pid>:<server id>}   hash task id -> WorkerInfo
-- --
-- ARGV[1] TTL, whole seconds (>= 1)
-- ARGV[2] encoded ServerInfo
-- ARGV[3], ARGV[4], ... pairs of task id and encoded WorkerInfo
-- Returns: 1. The workers hash is replaced as a whole; with no workers it is
--   absent afterwards.
redis.call("SETEX", KEYS[1], ARGV[1], ARGV[2])
redis.call("DEL", KEYS[2])
for i = 3, #ARGV - 1, 2 do
    redis.call("HSET", KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call("EXPIRE", KEYS[2], ARGV[1])
return 1
