-- scheduler_release: a replica leaving its group (asynqdeck only, issue 16):
-- drops its registration and, if it holds the lease, the lease, so a
-- standby takes over at its next renewal.
-- KEYS[1] asynqdeck:{scheduler:<group>}:leader
-- KEYS[2] asynqdeck:{scheduler:<group>}:replicas
-- --
-- ARGV[1] this replica's scheduler id
-- Returns: 1 when it held the lease, else 0.
redis.call("ZREM", KEYS[2], ARGV[1])
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
