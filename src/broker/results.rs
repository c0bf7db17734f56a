//! Task results written by handlers (Go `rdb.WriteResult`; wire spec §6.18).

use super::{Broker, keys, scripts};
use crate::error::{Error, Result};

impl Broker {
    /// Stores the bytes a handler produced for its task in field `result`
    /// of `asynq:{<queue>}:t:<id>` and returns `data.len()` (Go
    /// `rdb.WriteResult`).
    ///
    /// Unlike Go's plain `HSET`, the write happens only while the task hash
    /// exists (script `write_result.lua`): a task deleted while its handler
    /// ran is not brought back as a hash holding only `result` (issue 12
    /// R7, COMPATIBILITY.md#r7). The caller (the server's `ResultWriter`)
    /// refuses once the task's context is cancelled. Errors: [`Error::TaskNotFound`] when
    /// there is no task hash (nothing written); [`Error::Redis`].
    // asynq divergence: COMPATIBILITY.md#r7
    pub async fn write_result(&self, queue: &str, id: &str, data: &[u8]) -> Result<usize> {
        let code: i64 = scripts::WRITE_RESULT
            .key(keys::task_key(queue, id))
            .arg(data)
            .invoke_async(&mut self.conn())
            .await?;
        match code {
            1 => Ok(data.len()),
            0 => Err(Error::TaskNotFound {
                queue: queue.to_string(),
                id: id.to_string(),
            }),
            other => Err(Error::Internal(format!(
                "write_result script replied {other}"
            ))),
        }
    }
}
