local from, n, now = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for i = from, from + n - 1 do
  local q = string.format("queue-%05d", i)
  redis.call("SADD", "asynq:queues", q)
  for j = 1, 3 do
    local id = q .. "-t" .. j
    redis.call("HSET", "asynq:{" .. q .. "}:t:" .. id, "msg", "x", "state", "pending", "pending_since", now)
    redis.call("LPUSH", "asynq:{" .. q .. "}:pending", id)
  end
end
return n
