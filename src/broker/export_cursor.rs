//! The cursor of the engine's archive exporter (S31,
//! `server::archive_export`): which archived tasks of a queue it already
//! wrote, kept in Redis so a restart does not write them again.

use super::{Broker, keys};
use crate::error::Result;

/// How long the exporter's cursor lives after its last write: 100 days,
/// longer than asynq keeps an archived task (90 days).
pub const EXPORT_CURSOR_TTL_SECS: i64 = 100 * 86_400;

/// `asynqdeck:{<queue>}:export_cursor`: ZSET of the archived task ids the
/// engine's archive exporter wrote recently, score = their archived score
/// (unix s). Its highest score is how far the export got; members older
/// than the exporter's look-back are pruned. TTL
/// [`EXPORT_CURSOR_TTL_SECS`], refreshed on every write. Not an asynq key.
// asynqdeck addition: COMPATIBILITY.md#n1
pub fn export_cursor_key(queue: &str) -> String {
    format!("asynqdeck:{{{queue}}}:export_cursor")
}

impl Broker {
    /// The highest archived score (unix s) of `queue`, `None` when the
    /// archive is empty: `ZRANGE archived -1 -1 WITHSCORES`.
    ///
    /// Errors: [`Error::Redis`].
    pub(crate) async fn archived_top_score(&self, queue: &str) -> Result<Option<i64>> {
        top_score(self, &keys::archived_key(queue)).await
    }

    /// The highest score in the exporter's cursor of `queue` (how far the
    /// export got), `None` when it has none.
    ///
    /// Errors: [`Error::Redis`].
    pub(crate) async fn export_cursor_top(&self, queue: &str) -> Result<Option<i64>> {
        top_score(self, &export_cursor_key(queue)).await
    }

    /// The ids in the exporter's cursor of `queue` with a score of at least
    /// `from` (the look-back window; bounded by what was archived in it).
    ///
    /// Errors: [`Error::Redis`].
    pub(crate) async fn export_cursor_ids(&self, queue: &str, from: i64) -> Result<Vec<String>> {
        Ok(redis::cmd("ZRANGEBYSCORE")
            .arg(export_cursor_key(queue))
            .arg(from)
            .arg("+inf")
            .query_async(&mut self.conn())
            .await?)
    }

    /// Records `exported` (id, archived score) in the cursor of `queue`,
    /// drops members scored under `prune_below` and refreshes its TTL
    /// (three commands on one key; a failure between them leaves more
    /// members, never fewer).
    ///
    /// Errors: [`Error::Redis`].
    pub(crate) async fn export_cursor_add(
        &self,
        queue: &str,
        exported: &[(String, i64)],
        prune_below: i64,
    ) -> Result<()> {
        let key = export_cursor_key(queue);
        let mut conn = self.conn();
        for chunk in exported.chunks(500) {
            let mut cmd = redis::cmd("ZADD");
            cmd.arg(&key);
            for (id, score) in chunk {
                cmd.arg(*score).arg(id);
            }
            let _: i64 = cmd.query_async(&mut conn).await?;
        }
        let _: i64 = redis::cmd("ZREMRANGEBYSCORE")
            .arg(&key)
            .arg("-inf")
            .arg(format!("({prune_below}"))
            .query_async(&mut conn)
            .await?;
        let _: i64 = redis::cmd("EXPIRE")
            .arg(&key)
            .arg(EXPORT_CURSOR_TTL_SECS)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

async fn top_score(broker: &Broker, key: &str) -> Result<Option<i64>> {
    let top: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(-1)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut broker.conn())
        .await?;
    Ok(top.first().map(|(_, s)| s.floor() as i64))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cursor_key_carries_the_queue_tag() {
        assert_eq!(super::export_cursor_key("q"), "asynqdeck:{q}:export_cursor");
    }
}
