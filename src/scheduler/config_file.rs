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
//!
//! Options: `queue`, `max_retry`, `timeout`, `deadline` (RFC 3339),
//! `unique`, `process_in`, `retention`, `task_id`, `group` and `headers` (a
//! map). Durations are Go duration strings (`30s`, `1h30m`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;

use super::go_duration::parse_go_duration;
use super::manager::{PeriodicTaskConfig, PeriodicTaskConfigProvider};
use crate::error::{Error, Result};
use crate::task::{EnqueueOptions, Task};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    cronspec: String,
    task_type: String,
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    options: FileOptions,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileOptions {
    queue: Option<String>,
    max_retry: Option<i32>,
    timeout: Option<String>,
    deadline: Option<String>,
    unique: Option<String>,
    process_in: Option<String>,
    retention: Option<String>,
    task_id: Option<String>,
    group: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The configs of a schedule file's text, and one error per bad entry,
/// naming its place: `configs[2] (report:daily): options.timeout: time:
/// invalid duration "3x"`. Errors (nothing usable at all):
/// [`Error::InvalidArgument`] when the text is not YAML or has no
/// `configs` list.
pub fn parse_schedule(text: &str) -> Result<(Vec<PeriodicTaskConfig>, Vec<String>)> {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
        .map_err(|e| Error::InvalidArgument(format!("not YAML: {e}")))?;
    let list = match doc.get("configs") {
        Some(serde_yaml_ng::Value::Sequence(list)) => list.clone(),
        Some(serde_yaml_ng::Value::Null) => Vec::new(),
        _ => {
            return Err(Error::InvalidArgument(
                "expected a top-level `configs:` list".into(),
            ));
        }
    };
    let mut configs = Vec::new();
    let mut errors = Vec::new();
    for (i, value) in list.into_iter().enumerate() {
        let label = value
            .get("task_type")
            .and_then(|t| t.as_str())
            .map(|t| format!("configs[{i}] ({t})"))
            .unwrap_or_else(|| format!("configs[{i}]"));
        match serde_yaml_ng::from_value::<FileEntry>(value)
            .map_err(|e| e.to_string())
            .and_then(entry_config)
        {
            Ok(c) => configs.push(c),
            Err(e) => errors.push(format!("{label}: {e}")),
        }
    }
    Ok((configs, errors))
}

fn entry_config(e: FileEntry) -> std::result::Result<PeriodicTaskConfig, String> {
    if e.cronspec.trim().is_empty() {
        return Err("cronspec: cannot be empty".into());
    }
    super::CronSchedule::parse(&e.cronspec, chrono_tz::Tz::UTC)
        .map_err(|err| format!("cronspec {:?}: {err}", e.cronspec))?;
    if e.task_type.trim().is_empty() {
        return Err("task_type: cannot be empty".into());
    }
    let o = e.options;
    let dur = |name: &str, v: Option<String>| -> std::result::Result<_, String> {
        v.map(|s| parse_go_duration(&s).map_err(|err| format!("options.{name}: {err}")))
            .transpose()
    };
    let mut opts = EnqueueOptions::new();
    opts.queue = o.queue;
    opts.max_retry = o.max_retry;
    opts.timeout = dur("timeout", o.timeout)?;
    opts.unique = dur("unique", o.unique)?;
    opts.retention = dur("retention", o.retention)?;
    if let Some(d) = dur("process_in", o.process_in)? {
        opts = opts.process_in(d);
    }
    if let Some(d) = o.deadline {
        let t = chrono::DateTime::parse_from_rfc3339(&d)
            .map_err(|err| format!("options.deadline: {d:?}: {err}"))?;
        opts = opts.deadline(t.to_utc());
    }
    opts.task_id = o.task_id;
    opts.group = o.group;
    opts.headers = o.headers;
    let task = match e.payload {
        Some(p) => Task::new(e.task_type, p.into_bytes()),
        None => Task::without_payload(e.task_type),
    };
    Ok(PeriodicTaskConfig {
        cronspec: e.cronspec,
        task,
        options: opts,
    })
}

/// Reads a schedule file on every sync. A bad entry is left out and its
/// error (see [`parse_schedule`]) logged and kept in
/// [`FileConfigProvider::last_errors`]; the other entries are used. A file
/// that cannot be read or parsed at all is an error, so the manager keeps
/// the entries it has.
#[derive(Debug)]
pub struct FileConfigProvider {
    path: PathBuf,
    errors: Mutex<Vec<String>>,
}

impl FileConfigProvider {
    /// A provider reading `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileConfigProvider {
            path: path.into(),
            errors: Mutex::new(Vec::new()),
        }
    }

    /// The file it reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bad entries of the last read.
    pub fn last_errors(&self) -> Vec<String> {
        self.errors.lock().expect("errors lock").clone()
    }
}

impl PeriodicTaskConfigProvider for FileConfigProvider {
    fn get_configs(&self) -> Result<Vec<PeriodicTaskConfig>> {
        let shown = self.path.display();
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| Error::InvalidArgument(format!("schedule file {shown}: {e}")))?;
        let (configs, errors) = parse_schedule(&text)
            .map_err(|e| Error::InvalidArgument(format!("schedule file {shown}: {e}")))?;
        for e in &errors {
            tracing::error!("schedule file {shown}: {e}");
        }
        *self.errors.lock().expect("errors lock") = errors;
        Ok(configs)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn docs_shape_and_bad_entries_named() {
        let text = r#"
configs:
  - cronspec: "@every 30s"
    task_type: report:daily
    payload: '{"x":1}'
    options: {queue: low, max_retry: 3, timeout: 30s, unique: 1h, retention: 24h}
  - cronspec: "@every 1m"
    task_type: bad:timeout
    options: {timeout: 3x}
  - cronspec: "0 9 * * *"
    task_type: digest
    options: {qeue: low}
  - task_type: no:spec
"#;
        let (configs, errors) = parse_schedule(text).unwrap();
        assert_eq!(configs.len(), 1);
        let c = &configs[0];
        assert_eq!(c.cronspec, "@every 30s");
        assert_eq!(c.task, Task::new("report:daily", br#"{"x":1}"#.to_vec()));
        let want = EnqueueOptions::new()
            .queue("low")
            .max_retry(3)
            .timeout(Duration::from_secs(30))
            .unique(Duration::from_secs(3600))
            .retention(Duration::from_secs(86_400));
        assert_eq!(c.options, want);
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert_eq!(
            errors[0],
            "configs[1] (bad:timeout): options.timeout: time: unknown unit \"x\" in duration \"3x\""
        );
        assert!(
            errors[1].starts_with("configs[2] (digest): "),
            "{}",
            errors[1]
        );
        assert!(errors[1].contains("qeue"), "{}", errors[1]);
        assert!(
            errors[2].starts_with("configs[3] (no:spec): "),
            "{}",
            errors[2]
        );
        assert!(errors[2].contains("cronspec"), "{}", errors[2]);
    }

    #[test]
    fn not_a_schedule_is_an_error() {
        assert!(parse_schedule("configs: 3").is_err());
        assert!(parse_schedule(": : :").is_err());
        assert_eq!(parse_schedule("configs:").unwrap().0, vec![]);
    }
}
