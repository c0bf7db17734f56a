-- record_queue_sample: append one sample (time, retry size, archived size) to
-- a queue's outage-signal series and trim the series, in one step
-- (asynqdeck only; Go asynq has no counterpart). The series key lives in
-- asynqdeck's own namespace and shares the queue's hash tag, so the three
-- keys hash to one cluster slot.
-- KEYS[1] asynq:{<q>}:retry            zset (read only: ZCARD)
-- KEYS[2] asynq:{<q>}:archived         zset (read only: ZCARD)
-- KEYS[3] asynqdeck:{<q>}:samples      zset "<unix s>:<retry>:<archived>" -> unix s
-- --
-- ARGV[1] now, unix seconds (the sample's time and score)
-- ARGV[2] oldest time kept, unix seconds (samples scored below are removed)
-- ARGV[3] most samples kept, at least 1 (the oldest beyond it are removed)
-- ARGV[4] TTL of the series key, whole seconds (refreshed on every write, so
--         the series of a queue nobody samples any more disappears)
-- Returns: {retry size, archived size} as recorded.
local retry = redis.call("ZCARD", KEYS[1])
local archived = redis.call("ZCARD", KEYS[2])
redis.call("ZADD", KEYS[3], ARGV[1], ARGV[1] .. ":" .. retry .. ":" .. archived)
redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", "(" .. ARGV[2])
redis.call("ZREMRANGEBYRANK", KEYS[3], 0, -tonumber(ARGV[3]) - 1)
redis.call("EXPIRE", KEYS[3], ARGV[4])
return {retry, archived}
