//! The YAML schedule file (`asynqdeck serve --schedule FILE`), in the shape
//! asynq's docs use:
//!
//! ```yaml
//! configs:
//!   - cronspec: "@every 30s"
//!     task_type: report:daily
//!     payload: '{"x":1}'
//!     options: {queue: low, max_retry: 3, timeout: 30s, unique: 1h, retention: 24h}
//! ```

use std::path::PathBuf;

use super::manager::{PeriodicTaskConfig, PeriodicTaskConfigProvider};
use crate::error::{Error, Result};

/// Reads a schedule file on every sync. A bad entry is left out with an
/// error naming its place (`configs[2]`), the others are used.
#[derive(Debug, Clone)]
pub struct FileConfigProvider {
    path: PathBuf,
}

impl FileConfigProvider {
    /// A provider reading `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileConfigProvider { path: path.into() }
    }
}

impl PeriodicTaskConfigProvider for FileConfigProvider {
    fn get_configs(&self) -> Result<Vec<PeriodicTaskConfig>> {
        Err(Error::Internal(format!(
            "{}: not yet implemented",
            self.path.display()
        )))
    }
}
