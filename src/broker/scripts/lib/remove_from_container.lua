-- lib/remove_from_container: taking one task id out of the container its
-- state names, shared by the scripts that move or delete one task
-- (run_task, archive_task, delete_task); prepended to them by scripts.rs.
-- Defines remove_from_container(id, state, group, queue_prefix, group_prefix,
--                               groups_key, lrem_count):
--   id            the task id
--   state         the hash's state field (nil when missing)
--   group         the hash's group field (nil when missing)
--   queue_prefix  asynq:{<q>}:    container = prefix .. state
--   group_prefix  asynq:{<q>}:g:  group zset = prefix .. group
--   groups_key    asynq:{<q>}:groups, set of group names
--   lrem_count    LREM count for pending: 1 removes the first occurrence
--                 (Go's ArchiveTask), 0 every occurrence (Go's DeleteTask)
-- Returns: true when the id was removed; false when the container does not
-- hold it (an aggregating task without a group included); nil, with nothing
-- changed, for a missing state or one without a container here (active and
-- unknown states: callers answer active before calling). An aggregating
-- task's group leaves groups_key once its zset is empty.
local function remove_from_container(id, state, group, queue_prefix, group_prefix,
                                     groups_key, lrem_count)
    if state == "pending" then
        return redis.call("LREM", queue_prefix .. "pending", lrem_count, id) > 0
    elseif state == "aggregating" then
        if not group then
            return false
        end
        local group_key = group_prefix .. group
        if redis.call("ZREM", group_key, id) == 0 then
            return false
        end
        if redis.call("ZCARD", group_key) == 0 then
            redis.call("SREM", groups_key, group)
        end
        return true
    elseif state == "scheduled" or state == "retry" or state == "archived"
        or state == "completed" then
        return redis.call("ZREM", queue_prefix .. state, id) > 0
    end
    return nil
end
