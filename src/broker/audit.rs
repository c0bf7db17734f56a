//! The dashboard's audit log (issue 17): a Redis stream under
//! [`keys::AUDIT_LOG`], appended once per mutating action and capped at
//! [`keys::AUDIT_LOG_MAX`] entries. Every call here is bounded: an append
//! trims at most the entries past the cap, a read returns at most `count`
//! entries.

use std::collections::BTreeMap;

use super::{Broker, keys};
use crate::error::Result;

/// One stored entry: its stream id (`<unix ms>-<seq>`) and its fields.
pub type StoredAuditEntry = (String, BTreeMap<String, String>);

impl Broker {
    /// Appends one entry with `fields` (`XADD … MAXLEN 10000 *`) and returns
    /// its stream id. Errors: [`crate::Error::Redis`] (also when the key
    /// holds another type).
    pub async fn append_audit(&self, fields: &[(&str, String)]) -> Result<String> {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(keys::AUDIT_LOG)
            .arg("MAXLEN")
            .arg(keys::AUDIT_LOG_MAX)
            .arg("*");
        for (k, v) in fields {
            cmd.arg(*k).arg(v);
        }
        Ok(cmd.query_async(&mut self.conn()).await?)
    }

    /// Up to `count` entries, newest first, starting at stream id `from`
    /// (inclusive; `None`: the newest). `XREVRANGE key from - COUNT n`.
    /// A key of another type reads as empty. Errors: [`crate::Error::Redis`].
    pub async fn read_audit(
        &self,
        from: Option<&str>,
        count: usize,
    ) -> Result<Vec<StoredAuditEntry>> {
        let mut conn = self.conn();
        let kind: String = redis::cmd("TYPE")
            .arg(keys::AUDIT_LOG)
            .query_async(&mut conn)
            .await?;
        if kind != "stream" {
            return Ok(Vec::new());
        }
        let reply: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(keys::AUDIT_LOG)
            .arg(from.unwrap_or("+"))
            .arg("-")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut conn)
            .await?;
        Ok(reply
            .into_iter()
            .map(|(id, fields)| (id, fields.into_iter().collect()))
            .collect())
    }
}
