//! The [`Scheduler`] (Go `asynq.Scheduler`, `scheduler.go`; wire spec §8).
//!
//! One fire loop sleeps until the earliest next fire time of all entries
//! (or until an entry is registered or removed), then fires every entry due:
//! each fire runs on its own task (as robfig/cron runs each job in a
//! goroutine) and does the pre-enqueue hook, the enqueue, the post-enqueue
//! hook and, on success, records the enqueue event in the entry's history.
//! The heartbeat publishes the entries every interval, the first time one
//! interval after start (as Go), for twice the interval.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::cron::CronSchedule;
use super::options::option_strings;
use crate::broker::Broker;
use crate::broker::proto::{SchedulerEnqueueEvent, SchedulerEntry, Timestamp};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::task::{EnqueueOptions, Task, TaskInfo};

/// Go's default scheduler heartbeat interval (`defaultHeartbeatInterval`, 10 s).
pub const DEFAULT_SCHEDULER_HEARTBEAT: Duration = Duration::from_secs(10);

/// Called before each enqueue with the task and its options (Go `PreEnqueueFunc`).
pub type PreEnqueueFunc = Arc<dyn Fn(&Task, &EnqueueOptions) + Send + Sync>;
/// Called after each enqueue with its result (Go `PostEnqueueFunc`).
pub type PostEnqueueFunc = Arc<dyn Fn(&Result<TaskInfo>) + Send + Sync>;

/// Scheduler settings (Go `SchedulerOpts`).
#[derive(Clone)]
pub struct SchedulerOpts {
    /// How often the entries are published; they live 2× this. Default
    /// 10 s (Go); zero means the default.
    pub heartbeat_interval: Duration,
    /// Zone of specs without a `CRON_TZ=` prefix. Default UTC (Go).
    pub location: Tz,
    /// Go `PreEnqueueFunc`.
    pub pre_enqueue: Option<PreEnqueueFunc>,
    /// Go `PostEnqueueFunc`.
    pub post_enqueue: Option<PostEnqueueFunc>,
    /// Beyond Go: schedulers with the same replica group share one Redis
    /// lease; only its holder fires and publishes entries, and each tick of
    /// an entry (known by its config hash) is claimed once per group. The
    /// lease lives 2/3 of the heartbeat interval and is renewed every 1/3,
    /// so a standby takes over within one heartbeat of the holder's death.
    /// Ticks due while no replica holds the lease are skipped (as cron
    /// skips ticks while a scheduler is down). `None` (default): this
    /// scheduler is always active, as Go's.
    pub replica_group: Option<String>,
}

impl Default for SchedulerOpts {
    fn default() -> Self {
        SchedulerOpts {
            heartbeat_interval: DEFAULT_SCHEDULER_HEARTBEAT,
            location: Tz::UTC,
            pre_enqueue: None,
            post_enqueue: None,
            replica_group: None,
        }
    }
}

/// One registered entry as the scheduler knows it.
#[derive(Clone, Debug, PartialEq)]
pub struct EntrySnapshot {
    /// Entry id (UUID v4).
    pub id: String,
    /// Cron spec as registered.
    pub spec: String,
    /// The task.
    pub task: Task,
    /// Its options.
    pub options: EnqueueOptions,
    /// Next fire time; `None` before start (as robfig's zero `Next`).
    pub next: Option<DateTime<Utc>>,
    /// Last fire time, `None` before the first.
    pub prev: Option<DateTime<Utc>>,
}

struct Entry {
    schedule: CronSchedule,
    /// The config hash that names the entry's ticks in the replica group.
    hash: String,
    snap: EntrySnapshot,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    New,
    Active,
    Closed,
}

struct Inner {
    broker: Broker,
    client: Client,
    opts: SchedulerOpts,
    id: String,
    /// In registration order.
    entries: Mutex<Vec<Entry>>,
    state: Mutex<State>,
    changed: Notify,
    /// Holds the replica group's lease (always true without a group).
    active: AtomicBool,
    stop: CancellationToken,
    loops: tokio::sync::Mutex<JoinSet<()>>,
}

/// Enqueues registered tasks on their cron specs (Go `asynq.Scheduler`).
///
/// ```no_run
/// use asynqdeck::scheduler::{Scheduler, SchedulerOpts};
/// use asynqdeck::{EnqueueOptions, Task};
/// # async fn demo(broker: asynqdeck::broker::Broker) -> asynqdeck::Result<()> {
/// let scheduler = Scheduler::new(broker, SchedulerOpts::default());
/// let id = scheduler.register(
///     "@every 30s",
///     Task::new("report:daily", b"{}".to_vec()),
///     EnqueueOptions::new().queue("low"),
/// )?;
/// scheduler.start().await?;
/// # scheduler.unregister(&id)?;
/// scheduler.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl Scheduler {
    /// A scheduler on `broker`; its id is `<host>:<pid>:<uuid v4>` (Go
    /// `generateSchedulerID`).
    pub fn new(broker: Broker, mut opts: SchedulerOpts) -> Self {
        if opts.heartbeat_interval.is_zero() {
            opts.heartbeat_interval = DEFAULT_SCHEDULER_HEARTBEAT;
        }
        let id = format!(
            "{}:{}:{}",
            crate::server::heartbeat::hostname(),
            std::process::id(),
            uuid::Uuid::new_v4()
        );
        let always_active = opts.replica_group.is_none();
        Scheduler {
            inner: Arc::new(Inner {
                client: Client::from_broker(broker.clone()),
                broker,
                opts,
                id,
                entries: Mutex::new(Vec::new()),
                state: Mutex::new(State::New),
                changed: Notify::new(),
                active: AtomicBool::new(always_active),
                stop: CancellationToken::new(),
                loops: tokio::sync::Mutex::new(JoinSet::new()),
            }),
        }
    }

    /// The scheduler id (`<host>:<pid>:<uuid>`), which names its entries'
    /// key `asynq:schedulers:{<id>}`.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Registers `task` with `options` on `cronspec`; returns the entry id,
    /// a new UUID v4 (Go `Register`). An entry registered while running
    /// first fires at the spec's next time after now.
    ///
    /// Errors: [`Error::InvalidArgument`] for a spec robfig/cron refuses
    /// ([`CronSchedule::parse`]).
    pub fn register(&self, cronspec: &str, task: Task, options: EnqueueOptions) -> Result<String> {
        let schedule = CronSchedule::parse(cronspec, self.inner.opts.location)?;
        let id = uuid::Uuid::new_v4().to_string();
        let hash = super::manager::PeriodicTaskConfig {
            cronspec: cronspec.to_string(),
            task: task.clone(),
            options: options.clone(),
        }
        .hash();
        let running = *self.inner.state.lock().expect("state lock") == State::Active;
        let next = running
            .then(|| schedule.next_after(self.inner.broker.now()))
            .flatten();
        self.inner
            .entries
            .lock()
            .expect("entries lock")
            .push(Entry {
                schedule,
                hash,
                snap: EntrySnapshot {
                    id: id.clone(),
                    spec: cronspec.to_string(),
                    task,
                    options,
                    next,
                    prev: None,
                },
            });
        self.inner.changed.notify_one();
        Ok(id)
    }

    /// Removes an entry (Go `Unregister`); its history stays until shutdown
    /// only if Go would keep it: Go clears history of the entries still
    /// registered at shutdown, so a removed entry's history is left.
    ///
    /// Errors: [`Error::InvalidArgument`] `asynq: no scheduler entry found`
    /// for an unknown id (Go's text).
    pub fn unregister(&self, entry_id: &str) -> Result<()> {
        let mut entries = self.inner.entries.lock().expect("entries lock");
        let before = entries.len();
        entries.retain(|e| e.snap.id != entry_id);
        if entries.len() == before {
            return Err(Error::InvalidArgument(
                "asynq: no scheduler entry found".to_string(),
            ));
        }
        drop(entries);
        self.inner.changed.notify_one();
        Ok(())
    }

    /// The registered entries, in registration order.
    pub fn entries(&self) -> Vec<EntrySnapshot> {
        let entries = self.inner.entries.lock().expect("entries lock");
        entries.iter().map(|e| e.snap.clone()).collect()
    }

    /// Whether this scheduler fires now: always without a replica group,
    /// else while it holds the group's lease.
    pub fn is_active(&self) -> bool {
        self.inner.active.load(Ordering::SeqCst)
    }

    /// Starts firing and publishing (Go `Start`): every entry's next time is
    /// computed from now; the first heartbeat is one interval later.
    ///
    /// Errors: [`Error::InvalidArgument`] `asynq: the scheduler is already
    /// running` / `asynq: the scheduler has already been stopped` (Go's texts).
    pub async fn start(&self) -> Result<()> {
        {
            let mut state = self.inner.state.lock().expect("state lock");
            match *state {
                State::Active => {
                    return Err(Error::InvalidArgument(
                        "asynq: the scheduler is already running".into(),
                    ));
                }
                State::Closed => {
                    return Err(Error::InvalidArgument(
                        "asynq: the scheduler has already been stopped".into(),
                    ));
                }
                State::New => *state = State::Active,
            }
            let now = self.inner.broker.now();
            for e in self.inner.entries.lock().expect("entries lock").iter_mut() {
                e.snap.next = e.schedule.next_after(now);
            }
        }
        let mut loops = self.inner.loops.lock().await;
        if let Some(group) = self.inner.opts.replica_group.clone() {
            lease_once(&self.inner, &group).await;
            loops.spawn(lease_loop(self.inner.clone(), group));
        }
        loops.spawn(fire_loop(self.inner.clone()));
        loops.spawn(heartbeat_loop(self.inner.clone()));
        Ok(())
    }

    /// Stops the loops as a crash would: the lease is not released and the
    /// entries are not cleared (tests of the replica handover).
    #[doc(hidden)]
    pub async fn abandon(&self) {
        *self.inner.state.lock().expect("state lock") = State::Closed;
        self.inner.stop.cancel();
        let mut loops = self.inner.loops.lock().await;
        while loops.join_next().await.is_some() {}
        self.inner.active.store(false, Ordering::SeqCst);
    }

    /// Stops firing and shuts down (Go `Shutdown`): waits for fires in
    /// flight, removes the published entries (`ClearSchedulerEntries`), then
    /// deletes the history of every entry still registered
    /// (`ClearSchedulerHistory`). A scheduler never started does nothing.
    pub async fn shutdown(&self) {
        {
            let mut state = self.inner.state.lock().expect("state lock");
            if *state != State::Active {
                return;
            }
            *state = State::Closed;
        }
        self.inner.stop.cancel();
        let mut loops = self.inner.loops.lock().await;
        while loops.join_next().await.is_some() {}
        if let Some(group) = &self.inner.opts.replica_group {
            self.inner.active.store(false, Ordering::SeqCst);
            if let Err(e) = self
                .inner
                .broker
                .scheduler_release(group, &self.inner.id)
                .await
            {
                tracing::warn!(error = %e, "scheduler could not release its lease");
            }
        }
        if let Err(e) = self
            .inner
            .broker
            .clear_scheduler_entries(&self.inner.id)
            .await
        {
            tracing::error!(error = %e, "scheduler could not clear its entries");
        }
        for entry in self.entries() {
            if let Err(e) = self.inner.broker.clear_scheduler_history(&entry.id).await {
                tracing::warn!(entry = %entry.id, error = %e, "could not clear scheduler history");
            }
        }
    }
}

/// Sleeps to the earliest next fire time, fires what is due, repeats.
async fn fire_loop(inner: Arc<Inner>) {
    let mut fires = JoinSet::new();
    loop {
        let earliest = {
            let entries = inner.entries.lock().expect("entries lock");
            entries.iter().filter_map(|e| e.snap.next).min()
        };
        let wait = match earliest {
            Some(at) => (at - inner.broker.now()).to_std().unwrap_or_default(),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = inner.stop.cancelled() => break,
            _ = inner.changed.notified() => continue,
            _ = tokio::time::sleep(wait) => {}
        }
        let now = inner.broker.now();
        let due: Vec<(String, EntrySnapshot)> = {
            let mut entries = inner.entries.lock().expect("entries lock");
            entries
                .iter_mut()
                .filter(|e| e.snap.next.is_some_and(|n| n <= now))
                .map(|e| {
                    e.snap.prev = e.snap.next;
                    e.snap.next = e.schedule.next_after(now);
                    (e.hash.clone(), e.snap.clone())
                })
                .collect()
        };
        for entry in claim(&inner, due).await {
            fires.spawn(fire(inner.clone(), entry));
        }
        while fires.try_join_next().is_some() {}
    }
    while fires.join_next().await.is_some() {}
}

/// The due entries this scheduler fires: all of them without a replica
/// group; else none unless it holds the lease, and of those only the ticks
/// the group has not fired yet (one claim script for all).
async fn claim(inner: &Inner, due: Vec<(String, EntrySnapshot)>) -> Vec<EntrySnapshot> {
    let Some(group) = &inner.opts.replica_group else {
        return due.into_iter().map(|(_, e)| e).collect();
    };
    if due.is_empty() || !inner.active.load(Ordering::SeqCst) {
        return Vec::new();
    }
    let ticks: Vec<(String, DateTime<Utc>)> = due
        .iter()
        .filter_map(|(h, e)| e.prev.map(|t| (h.clone(), t)))
        .collect();
    match inner
        .broker
        .scheduler_claim_ticks(group, &inner.id, &ticks)
        .await
    {
        Ok(claimed) => {
            let mut due: Vec<Option<EntrySnapshot>> =
                due.into_iter().map(|(_, e)| Some(e)).collect();
            claimed
                .into_iter()
                .filter_map(|i| due.get_mut(i)?.take())
                .collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, "scheduler could not claim its ticks; skipped");
            Vec::new()
        }
    }
}

/// Takes or renews the replica group's lease once.
async fn lease_once(inner: &Inner, group: &str) {
    let beat = inner.opts.heartbeat_interval;
    let held = inner
        .broker
        .scheduler_lease(group, &inner.id, beat * 2 / 3, beat * 2)
        .await;
    let held = match held {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "scheduler could not renew its lease");
            false
        }
    };
    let was = inner.active.swap(held, Ordering::SeqCst);
    if held != was {
        tracing::info!(group, active = held, "scheduler replica lease changed");
    }
}

/// Renews the lease every third of the heartbeat interval.
async fn lease_loop(inner: Arc<Inner>, group: String) {
    loop {
        tokio::select! {
            _ = inner.stop.cancelled() => break,
            _ = tokio::time::sleep(inner.opts.heartbeat_interval / 3) => {}
        }
        lease_once(&inner, &group).await;
    }
}

/// One fire of one entry (Go `enqueueJob.Run`).
async fn fire(inner: Arc<Inner>, entry: EntrySnapshot) {
    if let Some(pre) = &inner.opts.pre_enqueue {
        pre(&entry.task, &entry.options);
    }
    let result = inner
        .client
        .enqueue(&entry.task, entry.options.clone())
        .await;
    if let Some(post) = &inner.opts.post_enqueue {
        post(&result);
    }
    let info = match result {
        Ok(info) => info,
        Err(e) => {
            tracing::warn!(entry = %entry.id, error = %e, "scheduler could not enqueue a task");
            return;
        }
    };
    let event = SchedulerEnqueueEvent {
        task_id: info.id.clone(),
        enqueue_time: Some(Timestamp::from_utc(Some(inner.broker.now()))),
    };
    if let Err(e) = inner
        .broker
        .record_scheduler_enqueue_event(&entry.id, &event)
        .await
    {
        tracing::warn!(task = %info.id, error = %e, "scheduler could not record an enqueue event");
    }
}

/// Publishes the entries every interval, the first time one interval after
/// start (Go `runHeartbeater`).
async fn heartbeat_loop(inner: Arc<Inner>) {
    let interval = inner.opts.heartbeat_interval;
    let mut published = false;
    loop {
        tokio::select! {
            _ = inner.stop.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
        if !inner.active.load(Ordering::SeqCst) {
            // A standby publishes nothing; one that lost the lease takes
            // its entries down.
            if published
                && inner
                    .broker
                    .clear_scheduler_entries(&inner.id)
                    .await
                    .is_ok()
            {
                published = false;
            }
            continue;
        }
        published = true;
        let entries: Vec<SchedulerEntry> = {
            let entries = inner.entries.lock().expect("entries lock");
            entries.iter().map(|e| wire_entry(&e.snap)).collect()
        };
        if let Err(e) = inner
            .broker
            .write_scheduler_entries(&inner.id, &entries, interval * 2)
            .await
        {
            tracing::warn!(error = %e, "scheduler could not write heartbeat data");
        }
    }
}

/// The entry as Go publishes it (wire spec §4.4).
fn wire_entry(e: &EntrySnapshot) -> SchedulerEntry {
    SchedulerEntry {
        id: e.id.clone(),
        spec: e.spec.clone(),
        task_type: e.task.type_name().to_string(),
        task_payload: e.task.payload().to_vec(),
        enqueue_options: option_strings(&e.options),
        next_enqueue_time: Some(Timestamp::from_utc(e.next)),
        prev_enqueue_time: Some(Timestamp::from_utc(e.prev)),
    }
}
