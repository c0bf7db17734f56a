//! `INFO commandstats` of a server the test started itself: how many times
//! Redis ran each command (commands inside scripts included). Only
//! meaningful on a private server (other tests' commands count too on a
//! shared one).

use std::collections::BTreeMap;

use super::redis::RawConn;

/// Calls per command name (`get`, `evalsha`, `client|list`, …) since the
/// server started or the last [`reset`].
pub async fn calls(conn: &mut RawConn) -> BTreeMap<String, u64> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    parse(&stats)
}

/// Zeroes the counts (`CONFIG RESETSTAT`).
pub async fn reset(conn: &mut RawConn) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .unwrap();
}

/// [`calls`], then [`reset`]: the commands run since the previous call.
pub async fn since_last(conn: &mut RawConn) -> BTreeMap<String, u64> {
    let out = calls(conn).await;
    reset(conn).await;
    out
}

/// Parses `cmdstat_<name>:calls=<n>,…` lines.
pub fn parse(stats: &str) -> BTreeMap<String, u64> {
    stats
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}
