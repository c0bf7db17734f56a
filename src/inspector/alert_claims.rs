//! The alert webhooks' shared claims (issue 17 item 6, N6): one post per
//! alert episode across every dashboard on the Redis. See
//! `broker/alert_claims.rs`.

use std::time::Duration;

use super::Inspector;
use crate::broker::{AlertClaim, ClaimRequest};

impl Inspector {
    /// For each held firing claim (queue, signal, holder's token): how long
    /// the claim still lives when its episode is over, `None` while it is
    /// on (see [`crate::broker::Broker::alert_held_claims`]).
    pub async fn alert_held_claims(
        &self,
        held: &[(String, String, String)],
    ) -> Vec<Option<Duration>> {
        self.broker.alert_held_claims(held).await
    }

    /// Makes every claim of `claims` for `ttl`, pipelined
    /// ([`crate::broker::CLAIM_CHUNK`] per round trip): one answer per
    /// claim, `None` where Redis did not answer.
    pub async fn claim_alerts(
        &self,
        claims: &[ClaimRequest],
        ttl: Duration,
    ) -> Vec<Option<AlertClaim>> {
        self.broker.claim_alerts(claims, ttl).await
    }
}
