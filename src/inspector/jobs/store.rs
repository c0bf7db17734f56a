//! A job to and from its Redis hash (field names: broker `jobs.rs`).
//! A hash that cannot be read back (a field missing or not a number, an
//! unknown state or action) is [`Error::Corrupt`], never a panic.

use chrono::{DateTime, Utc};

use super::{JobPhase, JobSpec, JobStatus};
use crate::broker::{StoredJob, job_key};
use crate::error::{Error, Result};
use crate::inspector::{SearchQuery, TabFilter, TaskAction};
use crate::task::TaskState;

/// The hash fields of a new job (phase queued, counts 0).
pub(super) fn new_fields(
    spec: &JobSpec,
    total: u64,
    actor: Option<&str>,
    created: DateTime<Utc>,
) -> Vec<(&'static str, String)> {
    let f = spec.filter.clone().unwrap_or_default();
    let has_filter = spec.filter.is_some();
    vec![
        ("queue", spec.queue.clone()),
        ("state", spec.state.as_str().to_string()),
        ("group", spec.group.clone().unwrap_or_default()),
        ("action", spec.action.as_str().to_string()),
        ("filtered", if has_filter { "1" } else { "0" }.to_string()),
        ("f_type", f.task_type),
        ("f_id", f.id),
        ("f_payload", f.payload),
        ("f_err", f.err),
        (
            "f_search",
            f.search.as_ref().map(|q| q.to_text()).unwrap_or_default(),
        ),
        ("phase", JobPhase::Queued.as_str().to_string()),
        ("total", total.to_string()),
        ("done", "0".to_string()),
        ("skipped", "0".to_string()),
        ("failed", "0".to_string()),
        ("cursor", "0".to_string()),
        ("actor", actor.unwrap_or_default().to_string()),
        ("created_ms", created.timestamp_millis().to_string()),
        ("updated_ms", created.timestamp_millis().to_string()),
        ("owner", String::new()),
        ("lease_ms", "0".to_string()),
    ]
}

fn phase_of(s: &str) -> Option<JobPhase> {
    Some(match s {
        "queued" => JobPhase::Queued,
        "running" => JobPhase::Running,
        "cancelling" => JobPhase::Cancelling,
        "cancelled" => JobPhase::Cancelled,
        "done" => JobPhase::Done,
        "failed" => JobPhase::Failed,
        _ => return None,
    })
}

/// A job read back, with its stored scan cursor.
pub(super) struct Loaded {
    pub status: JobStatus,
    pub cursor: u64,
}

/// Reads a stored job. Errors: [`Error::Corrupt`] for a field that is
/// missing or unreadable.
pub(super) fn load(queue: &str, id: &str, stored: StoredJob) -> Result<Loaded> {
    let key = job_key(queue, id);
    let f = &stored.fields;
    let corrupt = |field: &str| Error::Corrupt {
        key: format!("{key} {field}"),
        reason: "missing or unreadable job field".to_string(),
    };
    let text = |name: &str| f.get(name).map(String::as_str).unwrap_or_default();
    let opt = |name: &str| Some(text(name).to_string()).filter(|s| !s.is_empty());
    let num = |name: &str| -> Result<u64> {
        match f.get(name) {
            None => Ok(0),
            Some(v) => v.parse().map_err(|_| corrupt(name)),
        }
    };
    let time = |name: &str| -> Result<Option<DateTime<Utc>>> {
        match f.get(name).filter(|v| !v.is_empty() && *v != "0") {
            None => Ok(None),
            Some(v) => {
                let ms: i64 = v.parse().map_err(|_| corrupt(name))?;
                Ok(DateTime::from_timestamp_millis(ms))
            }
        }
    };
    let state: TaskState = text("state").parse().map_err(|_| corrupt("state"))?;
    let action = TaskAction::parse(text("action")).ok_or_else(|| corrupt("action"))?;
    let phase = phase_of(text("phase")).ok_or_else(|| corrupt("phase"))?;
    let search = match text("f_search") {
        "" => None,
        t => Some(SearchQuery::parse(t).map_err(|_| corrupt("f_search"))?),
    };
    let filter = (text("filtered") == "1").then(|| TabFilter {
        task_type: text("f_type").to_string(),
        id: text("f_id").to_string(),
        payload: text("f_payload").to_string(),
        err: text("f_err").to_string(),
        search,
    });
    let created_at = time("created_ms")?.ok_or_else(|| corrupt("created_ms"))?;
    let failed_ids = stored
        .failed
        .into_iter()
        .map(|e| match e.split_once('\n') {
            Some((id, err)) => (id.to_string(), err.to_string()),
            None => (e, String::new()),
        })
        .collect();
    let status = JobStatus {
        id: id.to_string(),
        spec: JobSpec {
            queue: opt("queue").unwrap_or_else(|| queue.to_string()),
            state,
            group: opt("group"),
            action,
            filter,
        },
        phase,
        total: num("total")?,
        done: num("done")?,
        skipped: num("skipped")?,
        failed: num("failed")?,
        skipped_ids: stored.skipped,
        failed_ids,
        actor: opt("actor"),
        created_at,
        started_at: time("started_ms")?,
        updated_at: time("updated_ms")?.unwrap_or(created_at),
        finished_at: time("finished_ms")?,
        error: opt("error"),
    };
    Ok(Loaded {
        status,
        cursor: num("cursor")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new job's fields read back as the spec, queued, counts 0.
    #[test]
    fn round_trip() {
        let spec = JobSpec {
            queue: "q".into(),
            state: TaskState::Aggregating,
            group: Some("g".into()),
            action: TaskAction::Archive,
            filter: Some(TabFilter {
                task_type: "email".into(),
                ..TabFilter::default()
            }),
        };
        let now = DateTime::from_timestamp_millis(1_700_000_000_123).unwrap();
        let fields = new_fields(&spec, 42, Some("ann"), now)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let stored = StoredJob {
            fields,
            skipped: vec!["a".into()],
            failed: vec!["b\nboom".into()],
        };
        let got = load("q", "j", stored).unwrap().status;
        assert_eq!(got.spec.group.as_deref(), Some("g"));
        assert_eq!(got.spec.action, TaskAction::Archive);
        assert_eq!(got.spec.filter.unwrap().task_type, "email");
        assert_eq!((got.phase, got.total, got.done), (JobPhase::Queued, 42, 0));
        assert_eq!(got.actor.as_deref(), Some("ann"));
        assert_eq!(got.created_at, now);
        assert_eq!(got.failed_ids, vec![("b".to_string(), "boom".to_string())]);
        assert_eq!(got.skipped_ids, vec!["a".to_string()]);
    }

    /// An unknown phase is corrupt data, not a panic.
    #[test]
    fn corrupt_phase() {
        let mut stored = StoredJob::default();
        stored.fields.insert("phase".into(), "exploded".into());
        stored.fields.insert("state".into(), "pending".into());
        stored.fields.insert("action".into(), "delete".into());
        assert!(matches!(load("q", "j", stored), Err(Error::Corrupt { .. })));
    }
}
