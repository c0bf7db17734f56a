-- write_result: store a handler's result in its task's hash, only while
-- that hash exists (asynq rdb.WriteResult, guarded; issue 12 R7).
-- KEYS[1] asynq:{<q>}:t:<id>   task hash
-- --
-- ARGV[1] the result bytes
-- Returns: 1 written; 0 no task hash (deleted meanwhile, or a key of
-- another type): nothing written, so no hash holding only `result` is made.
-- asynq divergence: COMPATIBILITY.md#r7
if redis.call("TYPE", KEYS[1]).ok ~= "hash" then
    return 0
end
redis.call("HSET", KEYS[1], "result", ARGV[1])
return 1
