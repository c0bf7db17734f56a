//! Claiming the alerts of one evaluation in Redis before posting them
//! (COMPATIBILITY.md N6): every firing alert claims a new episode for its
//! (queue, signal), every resolved one its episode's resolution, all in
//! pipelined chunks ([`crate::broker::CLAIM_CHUNK`] per round trip), so
//! 3,000 transitions cost 30 round trips, not 3,000.

use super::{Alert, AlertState};
use crate::inspector::{AlertClaim, ClaimRequest};
use crate::web::AppState;

/// Which of `alerts` this dashboard posts: a firing alert whose new
/// episode it claimed, a resolved alert whose episode's resolution it
/// claimed. False where another dashboard (or this one before a restart)
/// holds the claim; true where Redis did not answer (a duplicate beats a
/// missed page), where no episode is known, and for a test. Records each
/// firing alert's episode token (ours or the holder's).
pub async fn claim_all(state: &AppState, alerts: &[Alert]) -> Vec<bool> {
    let ttl = state.alerts.claim_ttl();
    let mut asks = Vec::new();
    // For each alert: the index of its claim in `asks`, if it makes one.
    let mut ask_of = Vec::with_capacity(alerts.len());
    for a in alerts {
        let ask = match a.state {
            AlertState::Test => None,
            AlertState::Firing => Some(ClaimRequest::Firing {
                queue: a.queue.clone(),
                signal: a.signal.clone(),
                token: uuid::Uuid::new_v4().simple().to_string(),
            }),
            AlertState::Resolved => state
                .alerts
                .episode(&a.queue, &a.signal)
                .map(|token| ClaimRequest::Resolved { token }),
        };
        ask_of.push(ask.map(|r| {
            asks.push(r);
            asks.len() - 1
        }));
    }
    let answers = if asks.is_empty() {
        Vec::new()
    } else {
        state.inspector.claim_alerts(&asks, ttl).await
    };
    // A firing claim held for an episode that is over (its resolution was
    // claimed): this episode started within the cooldown of that one, and
    // is posted when the claim lapses (its PTTL) if it still holds.
    let held: Vec<(String, String, String)> = asks
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match (r, answers.get(i)) {
            (ClaimRequest::Firing { queue, signal, .. }, Some(Some(AlertClaim::Held(Some(t))))) => {
                Some((queue.clone(), signal.clone(), t.clone()))
            }
            _ => None,
        })
        .collect();
    if !held.is_empty() {
        let lapse = state.inspector.alert_held_claims(&held).await;
        let now = std::time::Instant::now();
        for ((queue, signal, _), left) in held.iter().zip(lapse) {
            if let Some(left) = left {
                state.alerts.defer(queue, signal, now + left);
            }
        }
    }
    alerts
        .iter()
        .zip(ask_of)
        .map(|(a, ask)| {
            let Some(i) = ask else { return true };
            let (queue, signal) = (&a.queue, &a.signal);
            let answer = answers.get(i).cloned().flatten();
            if let ClaimRequest::Firing { token, .. } = &asks[i] {
                match &answer {
                    Some(AlertClaim::Claimed) => {
                        state.alerts.set_episode(queue, signal, Some(token.clone()))
                    }
                    Some(AlertClaim::Held(other)) => {
                        state.alerts.set_episode(queue, signal, other.clone())
                    }
                    None => {}
                }
            }
            match answer {
                Some(AlertClaim::Claimed) => true,
                Some(AlertClaim::Held(_)) => {
                    tracing::debug!(%queue, %signal, state = a.state.as_str(), "alert already posted by another dashboard");
                    false
                }
                None => {
                    tracing::warn!(%queue, %signal, "alert claim failed, posting anyway");
                    true
                }
            }
        })
        .collect()
}
