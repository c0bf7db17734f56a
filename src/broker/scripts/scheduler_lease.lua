-- scheduler_lease: register one scheduler replica and take or renew its
-- group's lease (asynqdeck only, issue 16: one active scheduler among
-- replicas).
-- KEYS[1] asynqdeck:{scheduler:<group>}:leader    string, holder's scheduler id
-- KEYS[2] asynqdeck:{scheduler:<group>}:replicas  zset id -> expiry (unix s)
-- --
-- ARGV[1] this replica's scheduler id
-- ARGV[2] lease TTL, ms
-- ARGV[3] this registration's expiry, unix s
-- ARGV[4] now, unix s (lapsed registrations below it are dropped)
-- Returns: 1 when this replica holds the lease after the call, else 0.
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[4])
local holder = redis.call("GET", KEYS[1])
if not holder then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1
end
return 0
