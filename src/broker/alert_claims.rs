//! Claims that keep alert webhooks to one post per alert episode across
//! every dashboard sharing a Redis (issue 17 item 6, COMPATIBILITY.md N6).
//! A claim is one `SET key token NX PX ttl`, and when the key is already
//! held, one `GET` for the holder's token: two bounded calls.

use std::time::Duration;

use super::{Broker, keys};
use crate::error::Result;

/// The outcome of [`Broker::claim_alert_firing`] or
/// [`Broker::claim_alert_resolved`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlertClaim {
    /// This caller holds the claim: it posts the message.
    Claimed,
    /// Another dashboard (or this one before a restart) holds it, for the
    /// episode with this token; `None` when the key is not a string.
    Held(Option<String>),
}

impl Broker {
    /// Claims the "firing" message of `(queue, signal)` for a new episode
    /// `token`, held for `ttl` (the alert cooldown; at least 1 ms):
    /// `SET asynqdeck:{alerts}:firing:… token NX PX ttl`. Errors:
    /// [`crate::Error::Redis`].
    pub async fn claim_alert_firing(
        &self,
        queue: &str,
        signal: &str,
        token: &str,
        ttl: Duration,
    ) -> Result<AlertClaim> {
        self.claim(&keys::alert_firing_key(queue, signal), token, ttl)
            .await
    }

    /// Claims the "resolved" message of the episode `token`, held for
    /// `ttl`: `SET asynqdeck:{alerts}:resolved:<token> 1 NX PX ttl`.
    /// Errors: [`crate::Error::Redis`].
    pub async fn claim_alert_resolved(&self, token: &str, ttl: Duration) -> Result<AlertClaim> {
        self.claim(&keys::alert_resolved_key(token), "1", ttl).await
    }

    async fn claim(&self, key: &str, value: &str, ttl: Duration) -> Result<AlertClaim> {
        let mut conn = self.conn();
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(ms)
            .query_async(&mut conn)
            .await?;
        if set.is_some() {
            return Ok(AlertClaim::Claimed);
        }
        let held: redis::RedisResult<Option<String>> =
            redis::cmd("GET").arg(key).query_async(&mut conn).await;
        Ok(AlertClaim::Held(held.ok().flatten()))
    }
}
