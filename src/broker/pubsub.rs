//! The cancellation channel, subscriber side (Go `rdb.CancelationPubSub`;
//! wire spec §6.18).
//!
//! Pub/sub needs a connection of its own: once subscribed, a Redis
//! connection accepts no other commands, so the multiplexed connection the
//! rest of the broker shares cannot be used.

use std::time::Duration;

use futures_util::{Stream, StreamExt};

use super::{Broker, keys};
use crate::error::{Error, Result};

/// How long opening the dedicated pub/sub connection may take.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

impl Broker {
    /// Opens a dedicated connection, `SUBSCRIBE`s to `asynq:cancel` and
    /// returns the stream of published task ids (one item per `PUBLISH`;
    /// a payload that is not UTF-8 is decoded lossily). The subscription is
    /// confirmed by Redis before this returns, so a publish made afterwards
    /// is seen. The stream ends when the connection is lost, and behind
    /// Sentinel when the broker sees a change of master (the subscription
    /// is on the former master, which hears no more publishes); the caller
    /// resubscribes. Dropping the stream closes the connection.
    ///
    /// Go `rdb.CancelationPubSub`. Errors: [`Error::Redis`] when the
    /// connection or the subscription fails, or takes over 5 s.
    pub async fn subscribe_cancellations(
        &self,
    ) -> Result<impl Stream<Item = String> + Send + Unpin + 'static> {
        let generation = self.target.generation();
        let changes = self.target.changes();
        let open = async {
            // A cluster delivers every PUBLISH to the subscribers of every
            // node: the first seed that answers will do.
            let mut last = None;
            for client in self.target.server_clients().await? {
                match client.get_async_pubsub().await {
                    Ok(mut pubsub) => {
                        pubsub.subscribe(keys::CANCEL_CHANNEL).await?;
                        return Ok::<_, Error>(pubsub);
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(Error::Redis(last.unwrap_or_else(|| {
                redis::RedisError::from((redis::ErrorKind::Io, "no server to subscribe on"))
            })))
        };
        let pubsub = tokio::time::timeout(SUBSCRIBE_TIMEOUT, open)
            .await
            .map_err(|_| {
                Error::Redis(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "subscribing to asynq:cancel timed out",
                )))
            })??;
        let master_changed = Box::pin(async move {
            match changes {
                Some(mut rx) => {
                    let _ = rx.wait_for(|g| *g != generation).await;
                }
                None => std::future::pending().await,
            }
        });
        Ok(pubsub
            .into_on_message()
            .map(|msg| String::from_utf8_lossy(msg.get_payload_bytes()).into_owned())
            .take_until(master_changed))
    }
}
