//! Task results written by handlers (Go `rdb.WriteResult`; wire spec §6.18).

use super::{Broker, keys};
use crate::error::Result;

impl Broker {
    /// `HSET asynq:{<queue>}:t:<id> result <data>`: stores the bytes a handler
    /// produced for its task and returns `data.len()` (Go `rdb.WriteResult`).
    ///
    /// One command, so no script. Like Go there is no existence check: a task
    /// deleted meanwhile gets a hash holding only `result` (wire spec §6.18
    /// QUIRK). The caller ([`ResultWriter`](crate::server::ResultWriter))
    /// refuses once the task's context is cancelled. Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn write_result(&self, queue: &str, id: &str, data: &[u8]) -> Result<usize> {
        let _: i64 = redis::cmd("HSET")
            .arg(keys::task_key(queue, id))
            .arg("result")
            .arg(data)
            .query_async(&mut self.conn())
            .await?;
        Ok(data.len())
    }
}
