-- archive_undecodable: move a leased task whose msg cannot be decoded out of
-- active into the archive, msg untouched, so it stops holding a lease and
-- operators see it (and can delete it) on the archived tab; trims the
-- archive like every archive write (S16).
-- KEYS[1] asynq:{<q>}:t:<id>    task hash
-- KEYS[2] asynq:{<q>}:active    list
-- KEYS[3] asynq:{<q>}:lease     zset
-- KEYS[4] asynq:{<q>}:archived  zset, score = archived at (unix s)
-- --
-- ARGV[1] task id
-- ARGV[2] now, unix s
-- ARGV[3] trim cutoff, unix s (now - 90 days)
-- ARGV[4] archive size limit (10000)
-- ARGV[5] task key prefix asynq:{<q>}:t:
-- Returns: 1 archived; 0 the id is neither active nor leased (nothing changed).
-- No counter moves: no attempt was made. A task key that is not a hash is
-- left as it is (only the id moves), so the call never fails half-way.
local removed = redis.call("LREM", KEYS[2], 0, ARGV[1]) + redis.call("ZREM", KEYS[3], ARGV[1])
if removed == 0 then
    return 0
end
redis.call("ZADD", KEYS[4], ARGV[2], ARGV[1])
-- A key of another type (which the lease and the recoverer pass on as
-- undecodable, COMPATIBILITY.md#w13) is archived as it is: no state field.
local key_type = redis.call("TYPE", KEYS[1]).ok
if key_type == "hash" or key_type == "none" then
    redis.call("HSET", KEYS[1], "state", "archived")
end
trim_archive(KEYS[4], ARGV[5], ARGV[3], ARGV[4])
return 1
