-- scheduler_claim_ticks: the lease holder claims fire ticks, each at most
-- once per group (asynqdeck only, issue 16), so a tick fired before a
-- handover is not fired again after it.
-- KEYS[1] asynqdeck:{scheduler:<group>}:leader   string, holder's scheduler id
-- KEYS[2] asynqdeck:{scheduler:<group>}:fired    hash entry hash -> last tick (unix ms)
-- --
-- ARGV[1] this replica's scheduler id
-- ARGV[2..] pairs: entry hash, tick (unix ms)
-- Returns: the 1-based pair numbers claimed (empty when this replica does
--   not hold the lease). A tick is claimed when it is later than the
--   entry's last claimed tick.
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return {}
end
local claimed = {}
local n = 0
for i = 2, #ARGV, 2 do
  n = n + 1
  local last = redis.call("HGET", KEYS[2], ARGV[i])
  if (not last) or tonumber(last) < tonumber(ARGV[i + 1]) then
    redis.call("HSET", KEYS[2], ARGV[i], ARGV[i + 1])
    table.insert(claimed, n)
  end
end
return claimed
