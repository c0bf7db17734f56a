//! The `+switch-master` watcher: one task per Sentinel-backed broker,
//! subscribed on one sentinel at a time to the channel on which the
//! sentinels announce the end of a failover
//! (`+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>`). On an
//! announcement for our master it makes the resolver look the master up,
//! which starts a new generation: every connection of the broker moves at
//! its next command, and the connections of their own reopen
//! (`sentinel.rs`).
//!
//! When the subscription cannot be made or drops (that sentinel died), the
//! next sentinel is tried; after a round of failures it waits
//! [`RETRY_WAIT`]. Each new subscription is followed by a lookup, so a
//! failover announced while unsubscribed is not missed. The task holds only
//! a weak reference to the resolver and ends when the resolver's
//! [`DropGuard`] is dropped (with the broker's last clone).

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::sentinel::SentinelResolver;

/// The channel the sentinels announce a completed failover on.
pub(crate) const SWITCH_MASTER: &str = "+switch-master";
/// Wait after every sentinel refused the subscription.
const RETRY_WAIT: Duration = Duration::from_secs(1);
/// Longest a connection and subscription to one sentinel may take.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Spawns the watcher of `resolver` on the current Tokio runtime; dropping
/// the returned guard stops it.
pub(super) fn spawn(resolver: &Arc<SentinelResolver>) -> DropGuard {
    let stop = CancellationToken::new();
    let weak = Arc::downgrade(resolver);
    let clients = resolver.sentinel_clients().to_vec();
    let master = resolver.options().master.clone();
    let token = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = token.cancelled() => {}
            _ = watch(weak, clients, master) => {}
        }
        tracing::debug!("Sentinel watcher stopped");
    });
    stop.drop_guard()
}

/// The new master a `+switch-master` payload announces for `master`.
fn announced(payload: &str, master: &str) -> Option<(String, u16)> {
    let f: Vec<&str> = payload.split_whitespace().collect();
    match f.as_slice() {
        [name, _, _, ip, port] if *name == master => Some((ip.to_string(), port.parse().ok()?)),
        _ => None,
    }
}

async fn watch(resolver: Weak<SentinelResolver>, clients: Vec<redis::Client>, master: String) {
    loop {
        for client in &clients {
            let subscribed = tokio::time::timeout(SUBSCRIBE_TIMEOUT, async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(SWITCH_MASTER).await?;
                Ok::<_, redis::RedisError>(pubsub)
            })
            .await;
            let pubsub = match subscribed {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "Sentinel watcher: cannot subscribe");
                    continue;
                }
                Err(_) => continue,
            };
            if !look_up(&resolver).await {
                return;
            }
            let mut messages = pubsub.into_on_message();
            while let Some(msg) = messages.next().await {
                let payload = String::from_utf8_lossy(msg.get_payload_bytes()).into_owned();
                if let Some(new) = announced(&payload, &master) {
                    tracing::info!(%payload, "Sentinel announced a failover");
                    if !follow_announcement(&resolver, &new).await {
                        return;
                    }
                }
            }
            tracing::debug!("Sentinel watcher: subscription lost; trying the next sentinel");
        }
        tokio::time::sleep(RETRY_WAIT).await;
    }
}

/// Adopts the announced master `new` (a new generation when it is another
/// one); false when the resolver is gone. The announcing sentinel has
/// switched; one asked first by a lookup may not have yet, so the
/// announcement is taken as it is (`SentinelResolver::master_client`).
async fn follow_announcement(resolver: &Weak<SentinelResolver>, new: &(String, u16)) -> bool {
    let Some(r) = resolver.upgrade() else {
        return false;
    };
    r.adopt(new.clone());
    true
}

/// Asks the sentinels for the master (recording a change); false when the
/// resolver is gone.
async fn look_up(resolver: &Weak<SentinelResolver>) -> bool {
    let Some(r) = resolver.upgrade() else {
        return false;
    };
    if let Err(e) = r.master_client().await {
        tracing::warn!(error = %e, "Sentinel watcher: looking up the master failed");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::announced;

    #[test]
    fn payload_names_its_master() {
        assert_eq!(
            announced("deckmaster 127.0.0.1 7000 127.0.0.1 7001", "deckmaster"),
            Some(("127.0.0.1".to_string(), 7001))
        );
        assert_eq!(
            announced("deckmaster2 127.0.0.1 7000 127.0.0.1 7001", "deckmaster"),
            None
        );
        assert_eq!(announced("deckmaster 127.0.0.1 7000", "deckmaster"), None);
        assert_eq!(announced("", "deckmaster"), None);
    }
}
