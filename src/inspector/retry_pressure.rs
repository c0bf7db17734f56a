//! Retry pressure (issue 17 item 3): retries of a queue due in the next 1,
//! 5 and 60 minutes ([`RetryPressure`]), beside the retry set's growth. The
//! growth says how fast others fail now; the pressure says how much work
//! comes back soon (S14: the retry tab is others' failures).

use super::Inspector;
use crate::broker::RetryPressure;
use crate::error::{Error, Result};

impl Inspector {
    /// Retries of `queue` due within the next 60, 300 and 3,600 seconds
    /// of the broker's clock (cumulative counts; retries already due are
    /// not counted): three `ZCOUNT`s in one pipeline, O(log n) each.
    /// A queue that does not exist counts 0.
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::Internal`] when the
    /// retry key is not a sorted set; [`Error::Redis`].
    pub async fn retry_pressure(&self, queue: &str) -> Result<RetryPressure> {
        self.broker.check_queue_name(queue)?;
        let mut all = self.broker.retry_pressure(&[queue.to_string()]).await?;
        all.pop()
            .unwrap_or_else(|| Err(Error::Internal("retry pressure: no reply".into())))
    }

    /// [`Inspector::retry_pressure`] of each of `queues`, in order, in one
    /// pipelined call (on a Cluster, per key concurrently per node). A
    /// queue whose name is invalid or whose key is of the wrong type gets
    /// its own error. Costs
    /// [`RETRY_PRESSURE_COMMANDS`](crate::broker::RETRY_PRESSURE_COMMANDS)
    /// commands per valid queue.
    ///
    /// Errors: [`Error::Redis`] when Redis cannot be reached.
    pub async fn retry_pressures(&self, queues: &[String]) -> Result<Vec<Result<RetryPressure>>> {
        let valid: Vec<String> = queues
            .iter()
            .filter(|q| self.broker.check_queue_name(q).is_ok())
            .cloned()
            .collect();
        let mut read = self.broker.retry_pressure(&valid).await?.into_iter();
        Ok(queues
            .iter()
            .map(|q| match self.broker.check_queue_name(q) {
                Ok(()) => read
                    .next()
                    .unwrap_or_else(|| Err(Error::Internal("retry pressure: no reply".into()))),
                Err(e) => Err(e),
            })
            .collect())
    }
}
