-- record_scheduler_enqueue_event: add one enqueue to a scheduler entry's
-- history, keeping the newest events only (asynq
-- rdb.RecordSchedulerEnqueueEvent).
-- KEYS[1] asynq:scheduler_history:<entry id>   zset event -> enqueue time (unix s)
-- --
-- ARGV[1] enqueue time, unix seconds (the score)
-- ARGV[2] encoded SchedulerEnqueueEvent (the member)
-- ARGV[3] history cap (Go: 1000)
-- Returns: 1. Trims first (ranks 0 .. -cap, keeping the cap-1 highest
--   scores), then adds, so at most cap events remain.
redis.call("ZREMRANGEBYRANK", KEYS[1], 0, -tonumber(ARGV[3]))
redis.call("ZADD", KEYS[1], ARGV[1], ARGV[2])
return 1
