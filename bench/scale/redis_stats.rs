//! What Redis did: INFO snapshots (CPU, `total_commands_processed`,
//! commandstats calls) and their rates over a window, and the slow log
//! (`slowlog-log-slower-than 10000`: every command of 10 ms or more).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::sampling::machine_busy_ms;

/// Redis counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snap {
    /// used_cpu_user + used_cpu_sys, s.
    pub cpu_s: f64,
    /// total_commands_processed.
    pub commands: u64,
    /// commandstats: command → calls (commands inside scripts included).
    pub calls: BTreeMap<String, u64>,
    pub at: Option<Instant>,
    /// The whole machine's busy CPU time so far, ms.
    pub machine_ms: f64,
}

/// One `INFO cpu stats commandstats`.
pub async fn snap(conn: &mut MultiplexedConnection) -> anyhow::Result<Snap> {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .arg("stats")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let mut calls = BTreeMap::new();
    for line in info.lines() {
        if let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
            && let Some(n) = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|v| v.parse().ok())
        {
            calls.insert(name.to_string(), n);
        }
    }
    Ok(Snap {
        cpu_s: field("used_cpu_user:") + field("used_cpu_sys:"),
        commands: field("total_commands_processed:") as u64,
        calls,
        at: Some(Instant::now()),
        machine_ms: machine_busy_ms(),
    })
}

/// Redis's load over a window.
#[derive(Clone, Debug, Default)]
pub struct Load {
    /// Redis CPU in % of one core.
    pub cpu_pct: f64,
    /// total_commands_processed per second, the bench's own INFO left out.
    pub commands_per_s: f64,
    /// EVALSHA + EVAL calls per second.
    pub scripts_per_s: f64,
    /// The three commands called most (commandstats, per second).
    pub top: Vec<(String, f64)>,
    /// The whole machine's busy CPU in % of one core (other helpers'
    /// builds show here).
    pub machine_pct: f64,
}

/// The load between `before` and now.
pub async fn load_since(conn: &mut MultiplexedConnection, before: &Snap) -> anyhow::Result<Load> {
    let after = snap(conn).await?;
    let secs = before
        .at
        .map_or(1.0, |t| t.elapsed().as_secs_f64())
        .max(1e-3);
    let mut per: Vec<(String, f64)> = after
        .calls
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .filter_map(|(name, n)| {
            let d = n.saturating_sub(before.calls.get(name).copied().unwrap_or(0));
            (d > 0).then(|| (name.clone(), d as f64 / secs))
        })
        .collect();
    per.sort_by(|a, b| b.1.total_cmp(&a.1));
    let scripts = per
        .iter()
        .filter(|(n, _)| n == "evalsha" || n == "eval")
        .fold(0.0, |sum, (_, r)| sum + r);
    per.truncate(3);
    Ok(Load {
        cpu_pct: (after.cpu_s - before.cpu_s) / secs * 100.0,
        // The first INFO is counted in `after`, the second in neither.
        commands_per_s: after.commands.saturating_sub(before.commands + 1) as f64 / secs,
        scripts_per_s: scripts,
        top: per,
        machine_pct: (after.machine_ms - before.machine_ms) / 10.0 / secs,
    })
}

/// Redis's load over `window` of doing nothing but wait.
pub async fn idle_load(conn: &mut MultiplexedConnection, window: Duration) -> anyhow::Result<Load> {
    let before = snap(conn).await?;
    tokio::time::sleep(window).await;
    load_since(conn, &before).await
}

impl Load {
    /// `evalsha 1,980/s, hset 3/s` (the top commands).
    pub fn top_text(&self) -> String {
        if self.top.is_empty() {
            return "—".into();
        }
        self.top
            .iter()
            .map(|(n, r)| format!("{n} {r:.1}/s"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Logs every command of 10 ms or more from now on (`slowlog-log-slower-than
/// 10000`, `slowlog-max-len 1024`, `SLOWLOG RESET`).
pub async fn slowlog_arm(conn: &mut MultiplexedConnection) -> anyhow::Result<()> {
    for (k, v) in [
        ("slowlog-log-slower-than", "10000"),
        ("slowlog-max-len", "1024"),
    ] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query_async::<()>(conn)
            .await?;
    }
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(conn)
        .await?;
    Ok(())
}

/// The slow log since [`slowlog_arm`]: entries of ≥ 10 ms sent by clients
/// (the bench's own SLOWLOG/CONFIG/INFO calls and the commands a script
/// issues, logged from client `?:0`, left out).
#[derive(Clone, Debug, Default)]
pub struct Slow {
    pub count: usize,
    pub longest_ms: f64,
    /// The longest entry's command and first arguments, shortened.
    pub longest: String,
}

pub async fn slowlog_read(conn: &mut MultiplexedConnection) -> anyhow::Result<Slow> {
    let entries: redis::Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1024)
        .query_async(conn)
        .await?;
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(i) => i.to_string(),
        _ => String::new(),
    };
    let mut out = Slow::default();
    let redis::Value::Array(entries) = entries else {
        return Ok(out);
    };
    for e in entries {
        let redis::Value::Array(fields) = e else {
            continue;
        };
        let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) =
            (fields.get(2), fields.get(3))
        else {
            continue;
        };
        if fields.get(4).map(text).as_deref() == Some("?:0") {
            continue;
        }
        let cmd = args.first().map(text).unwrap_or_default().to_uppercase();
        if matches!(cmd.as_str(), "SLOWLOG" | "CONFIG" | "INFO" | "FLUSHALL") {
            continue;
        }
        out.count += 1;
        let ms = *us as f64 / 1e3;
        if ms > out.longest_ms {
            out.longest_ms = ms;
            // EVALSHA <sha> <numkeys> <key1>: keep the command and KEYS[1].
            let shown: Vec<String> = match cmd.as_str() {
                "EVALSHA" | "EVAL" => [Some(cmd.clone()), args.get(3).map(text)]
                    .into_iter()
                    .flatten()
                    .collect(),
                _ => args.iter().take(2).map(text).collect(),
            };
            out.longest = shown.join(" ").chars().take(60).collect();
        }
    }
    Ok(out)
}

/// `redis_version` of INFO server.
pub async fn redis_version(conn: &mut MultiplexedConnection) -> anyhow::Result<String> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string())
}

/// `used_memory_human` of INFO memory.
pub async fn used_memory(conn: &mut MultiplexedConnection) -> anyhow::Result<String> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_human:"))
        .unwrap_or("?")
        .trim()
        .to_string())
}
