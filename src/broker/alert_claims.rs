//! Claims that keep alert webhooks to one post per alert episode across
//! every dashboard sharing a Redis (issue 17 item 6, COMPATIBILITY.md N6).
//! A claim is one `SET key token NX PX ttl`, and when the key is already
//! held, one `GET` for the holder's token: two bounded calls. Many claims
//! go [`CLAIM_CHUNK`] per pipeline ([`Broker::claim_alerts`]): at most two
//! round trips per chunk (every key carries the `{alerts}` hash tag, so a
//! chunk goes to one node of a Cluster).

use std::time::Duration;

use redis::Value;

use super::{Broker, keys};

/// Most claims one pipeline of [`Broker::claim_alerts`] sends.
pub const CLAIM_CHUNK: usize = 100;

/// One claim of a batch ([`Broker::claim_alerts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimRequest {
    /// The "firing" post of `(queue, signal)` for the new episode `token`
    /// (`SET asynqdeck:{alerts}:firing:… token NX PX ttl`).
    Firing {
        /// The queue, or empty.
        queue: String,
        /// The signal.
        signal: String,
        /// The new episode's token.
        token: String,
    },
    /// The "resolved" post of the episode `token` (as
    /// `SET asynqdeck:{alerts}:resolved:<token> 1 NX PX ttl`).
    Resolved {
        /// The episode's token.
        token: String,
    },
}

impl ClaimRequest {
    fn key_value(&self) -> (String, &str) {
        match self {
            ClaimRequest::Firing {
                queue,
                signal,
                token,
            } => (keys::alert_firing_key(queue, signal), token),
            ClaimRequest::Resolved { token } => (keys::alert_resolved_key(token), "1"),
        }
    }
}

/// The outcome of one claim of [`Broker::claim_alerts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlertClaim {
    /// This caller holds the claim: it posts the message.
    Claimed,
    /// Another dashboard (or this one before a restart) holds it, for the
    /// episode with this token; `None` when the key is not a string.
    Held(Option<String>),
}

impl Broker {
    /// Makes every claim of `claims`, each held for `ttl`, [`CLAIM_CHUNK`]
    /// per pipeline: one pipeline of `SET … NX PX` per chunk, then one of
    /// `GET`s for the keys already held. One answer per claim, in order;
    /// `None` for the claims of a chunk Redis did not answer (a connection
    /// error or an error reply such as OOM).
    pub async fn claim_alerts(
        &self,
        claims: &[ClaimRequest],
        ttl: Duration,
    ) -> Vec<Option<AlertClaim>> {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut out = Vec::with_capacity(claims.len());
        let mut conn = self.conn();
        for chunk in claims.chunks(CLAIM_CHUNK) {
            let kv: Vec<(String, &str)> = chunk.iter().map(ClaimRequest::key_value).collect();
            let mut pipe = redis::pipe();
            for (key, value) in &kv {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(*value)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms);
            }
            let set: Vec<Value> = match pipe.query_async(&mut conn).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(claims = chunk.len(), "alert claims failed: {e}");
                    out.extend(std::iter::repeat_n(None, chunk.len()));
                    continue;
                }
            };
            let held: Vec<usize> = (0..kv.len())
                .filter(|i| matches!(set.get(*i), Some(Value::Nil)))
                .collect();
            let mut holders: Vec<Option<String>> = vec![None; held.len()];
            if !held.is_empty() {
                let mut pipe = redis::pipe();
                for i in &held {
                    pipe.cmd("GET").arg(&kv[*i].0);
                }
                let got: redis::RedisResult<Vec<Option<String>>> =
                    pipe.query_async(&mut conn).await;
                if let Ok(got) = got {
                    holders = got;
                }
            }
            let mut holders: std::collections::HashMap<usize, Option<String>> =
                held.into_iter().zip(holders).collect();
            for (i, reply) in set.iter().enumerate() {
                out.push(match reply {
                    Value::Nil => Some(AlertClaim::Held(holders.remove(&i).flatten())),
                    Value::Okay | Value::SimpleString(_) => Some(AlertClaim::Claimed),
                    _ => None,
                });
            }
            out.extend(std::iter::repeat_n(
                None,
                chunk.len().saturating_sub(set.len()),
            ));
        }
        out
    }

    /// For each held firing claim (queue, signal, the holder's episode
    /// token): when its episode is over (its "resolved" post was claimed:
    /// `EXISTS asynqdeck:{alerts}:resolved:<token>`), how long the claim
    /// still lives (`PTTL` of the firing key, 0 when gone); `None` for an
    /// episode still on, and where Redis did not answer. [`CLAIM_CHUNK`]
    /// items per pipeline.
    pub async fn alert_held_claims(
        &self,
        held: &[(String, String, String)],
    ) -> Vec<Option<Duration>> {
        let mut out = Vec::with_capacity(held.len());
        let mut conn = self.conn();
        for chunk in held.chunks(CLAIM_CHUNK) {
            let mut pipe = redis::pipe();
            for (queue, signal, token) in chunk {
                pipe.cmd("EXISTS").arg(keys::alert_resolved_key(token));
                pipe.cmd("PTTL").arg(keys::alert_firing_key(queue, signal));
            }
            let got: redis::RedisResult<Vec<i64>> = pipe.query_async(&mut conn).await;
            match got {
                Ok(v) if v.len() == 2 * chunk.len() => out.extend(v.chunks(2).map(|p| {
                    (p[0] > 0).then(|| Duration::from_millis(u64::try_from(p[1]).unwrap_or(0)))
                })),
                _ => out.extend(std::iter::repeat_n(None, chunk.len())),
            }
        }
        out
    }
}
