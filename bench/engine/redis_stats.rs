//! What Redis did: INFO cpu and commandstats snapshots and their deltas,
//! and SLOWLOG capture grouped by script.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;

use crate::harness::Env;

/// Redis counters at one moment: main-process CPU and per-command stats.
#[derive(Debug, Default, Clone)]
pub struct RedisSnap {
    pub cpu_us: f64,
    /// Of `cpu_us`, the part spent in the kernel (`used_cpu_sys`).
    pub sys_us: f64,
    /// command → (calls, usec)
    pub commands: BTreeMap<String, (u64, u64)>,
}

pub async fn redis_snap(conn: &mut MultiplexedConnection) -> anyhow::Result<RedisSnap> {
    let cpu: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    let field = |name: &str| -> f64 {
        cpu.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let cpu_us = (field("used_cpu_sys:") + field("used_cpu_user:")) * 1e6;
    let sys_us = field("used_cpu_sys:") * 1e6;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut commands = BTreeMap::new();
    for line in stats.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let get = |k: &str| -> u64 {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(k))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        commands.insert(name.to_string(), (get("calls="), get("usec=")));
    }
    Ok(RedisSnap {
        cpu_us,
        sys_us,
        commands,
    })
}

/// Commands Redis ran between two snapshots: (name, calls, usec), most
/// time first; the bench's own INFO calls are left out.
pub fn command_delta(before: &RedisSnap, after: &RedisSnap) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = after
        .commands
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .filter_map(|(name, (calls, usec))| {
            let (c0, u0) = before.commands.get(name).copied().unwrap_or((0, 0));
            (calls > &c0).then(|| (name.clone(), calls - c0, usec - u0))
        })
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.2));
    out
}

/// Script calls and blocking waits: commands only a client sends (the
/// plain commands a worker sends outside scripts, such as the heartbeat's,
/// cannot be told apart from script-issued ones in INFO commandstats and
/// are left out; they are a few per second).
pub fn is_client_call(cmd: &str) -> bool {
    matches!(cmd, "evalsha" | "eval" | "blmove" | "brpoplpush")
}

/// SLOWLOG entries grouped by command and key count, e.g.
/// `EVALSHA 4 keys, asynq:{default}:pending`: (label, calls, µs total).
pub async fn slowlog_groups(
    conn: &mut MultiplexedConnection,
) -> anyhow::Result<Vec<(String, u64, u64)>> {
    let entries: redis::Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await?;
    let mut groups: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(i) => i.to_string(),
        _ => String::new(),
    };
    if let redis::Value::Array(entries) = entries {
        for e in entries {
            let redis::Value::Array(fields) = e else {
                continue;
            };
            let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) =
                (fields.get(2), fields.get(3))
            else {
                continue;
            };
            // Commands a script issues are logged too, from the client "?:0".
            if fields.get(4).map(text).as_deref() == Some("?:0") {
                continue;
            }
            let cmd = args.first().map(text).unwrap_or_default().to_uppercase();
            let label = match cmd.as_str() {
                "EVALSHA" | "EVAL" => {
                    let nkeys = args.get(2).map(text).unwrap_or_default();
                    let key = args.get(3).map(text).unwrap_or_default();
                    // Task hash keys differ per task: keep only the prefix.
                    let key = match key.find(":t:") {
                        Some(i) => format!("{}:t:<id>", &key[..i]),
                        None => key,
                    };
                    format!("{cmd} {nkeys} keys, KEYS[1] {key}")
                }
                "SLOWLOG" | "CONFIG" | "INFO" => continue,
                _ => cmd,
            };
            let g = groups.entry(label).or_default();
            g.0 += 1;
            g.1 += *us as u64;
        }
    }
    let mut out: Vec<(String, u64, u64)> =
        groups.into_iter().map(|(k, (c, u))| (k, c, u)).collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.1));
    Ok(out)
}

pub async fn slowlog_on(env: &mut Env, max_len: usize) -> anyhow::Result<()> {
    env.config_set("slowlog-max-len", &max_len.to_string())
        .await?;
    env.config_set("slowlog-log-slower-than", "0").await?;
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(&mut env.admin)
        .await?;
    Ok(())
}

pub async fn slowlog_off(env: &mut Env) -> anyhow::Result<()> {
    env.config_set("slowlog-log-slower-than", "10000").await?;
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(&mut env.admin)
        .await?;
    env.config_set("slowlog-max-len", "128").await
}
