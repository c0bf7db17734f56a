//! Registry of the Lua scripts, one `.lua` file per operation.
//!
//! Each [`redis::Script`] is built once (hashed once) and run with EVALSHA,
//! falling back to loading it on NOSCRIPT. Scripts that write to the archive
//! are prefixed with `lib/trim_archive.lua`, which defines the shared
//! `trim_archive` function (Lua has no includes); likewise `lib/release_lock`
//! (a deleted task's uniqueness lock, named by its hash or its msg), `lib/count_stats`
//! (statistics counters), `lib/lease_tasks` (dequeue), `lib/finish_tasks`
//! (done), `lib/queue_counts` (one queue's counts), `lib/memory_usage`
//! (one queue's memory estimate) and `lib/remove_from_container` (taking one
//! task out of the list or zset its state names: run, archive and delete one
//! task).
//!
//! Every script uses only commands Redis 6.0 has and answers with integer
//! codes or data, never an error reply.
//!
//! **Strict form on a Redis Cluster ≥ 7** (issue 14, COMPATIBILITY.md
//! K10): every script touches keys of one slot only (one queue's
//! `{<queue>}` tag). Redis 7 holds a script to that only when it opens
//! with a `#!lua` shebang: an old-style script may touch keys of several
//! slots as long as one node serves them, which would hide a mistake until
//! the slots move. So each script exists in two forms, the plain one (as
//! Go sends) and the strict one (`#!lua`, plus `flags=no-writes` for the
//! scripts marked `read_only`, which Redis then also runs under OOM); once
//! this process connects to a Redis Cluster of version 7 or later
//! ([`use_strict_form`]), every script it sends is the strict one, and a
//! script reaching outside its slot fails with `ERR Script attempted to
//! access keys that do not hash to the same slot`. Redis < 7 would not
//! parse the shebang: there the plain form stays (Redis 6 still refuses a
//! key of another node).
// asynq divergence: COMPATIBILITY.md#g1, COMPATIBILITY.md#g2

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::Script;

#[cfg(test)]
mod tests;

/// Whether scripts are sent in their strict (`#!lua`) form; see the module doc.
static STRICT: AtomicBool = AtomicBool::new(false);

/// Sends every script in its strict `#!lua` form from now on (called when
/// the process connects to a Redis Cluster ≥ 7). Never switched back: a
/// Redis ≥ 7 runs the strict form whatever its mode.
pub(crate) fn use_strict_form() {
    STRICT.store(true, Ordering::Relaxed);
}

/// Whether [`use_strict_form`] was called.
pub fn strict_form() -> bool {
    STRICT.load(Ordering::Relaxed)
}

/// One script in its plain and its strict form; dereferences to the form in
/// use ([`strict_form`]).
// asynq divergence: COMPATIBILITY.md#k10
pub(crate) struct Lua {
    plain: Script,
    strict: Script,
}

impl Lua {
    fn new(code: &str, read_only: bool) -> Lua {
        let shebang = if read_only {
            "#!lua flags=no-writes\n"
        } else {
            "#!lua\n"
        };
        Lua {
            plain: Script::new(code),
            strict: Script::new(&format!("{shebang}{code}")),
        }
    }

    /// The strict form (tests: its SHA1 is what Redis lists once it ran).
    pub(crate) fn strict(&self) -> &Script {
        &self.strict
    }
}

impl std::ops::Deref for Lua {
    type Target = Script;

    fn deref(&self) -> &Script {
        if strict_form() {
            &self.strict
        } else {
            &self.plain
        }
    }
}

/// Name and strict-form SHA1 of every registered script, for the cluster
/// pass's audit (tests/zz_cluster_audit.rs): once the suites ran on a
/// cluster, each of these hashes is loaded on its masters, so each script
/// ran there in its strict form. Names are the registry's (`ENQUEUE`, ...).
pub fn strict_hashes() -> Vec<(&'static str, String)> {
    catalog()
        .into_iter()
        .map(|(name, lua)| (name, lua.strict().get_hash().to_string()))
        .collect()
}

/// One registered script (tests only): the static's name, its files as
/// (name without `.lua`, text) in concatenation order, whether it is marked
/// read-only, and the script.
#[cfg(test)]
pub(crate) struct Registered {
    pub(crate) name: &'static str,
    pub(crate) files: Vec<(&'static str, &'static str)>,
    pub(crate) read_only: bool,
    pub(crate) script: &'static Lua,
}

macro_rules! read_only {
    () => {
        false
    };
    (read_only) => {
        true
    };
}

macro_rules! scripts {
    ($( $(#[$doc:meta])* $name:ident => [$($file:literal),+] $($ro:ident)?; )*) => {
        $(
            $(#[$doc])*
            pub(crate) static $name: LazyLock<Lua> = LazyLock::new(|| {
                Lua::new(
                    concat!($(include_str!(concat!("scripts/", $file, ".lua"))),+),
                    read_only!($($ro)?),
                )
            });
        )*

        /// Every script with its name.
        fn catalog() -> Vec<(&'static str, &'static Lua)> {
            vec![$((stringify!($name), &*$name)),*]
        }

        /// Every script with its files, in the order they are concatenated
        /// (`lib/` files first, the operation's own file last), for the
        /// header checks in `scripts/tests.rs`.
        #[cfg(test)]
        pub(crate) fn all() -> Vec<Registered> {
            vec![$(Registered {
                name: stringify!($name),
                files: vec![$(($file, include_str!(concat!("scripts/", $file, ".lua")))),+],
                read_only: read_only!($($ro)?),
                script: &*$name,
            }),*]
        }
    };
}

scripts! {
    /// Create a pending task (asynq rdb.Enqueue / EnqueueUnique).
    ENQUEUE => ["enqueue"];
    /// Create a scheduled task (asynq rdb.Schedule / ScheduleUnique).
    SCHEDULE => ["schedule"];
    /// Create an aggregating task in a group (asynq rdb.AddToGroup / AddToGroupUnique).
    ADD_TO_GROUP => ["add_to_group"];
    /// Lease up to N pending tasks of one queue (asynq rdb.Dequeue, batched).
    DEQUEUE => ["lib/lease_tasks", "dequeue"];
    /// Finish successful tasks of one queue (asynq rdb.Done, batched).
    DONE => ["lib/count_stats", "lib/finish_tasks", "done"];
    /// Finish successful tasks of one queue and lease the next ones, one round trip (asynq rdb.Done + rdb.Dequeue).
    DONE_AND_DEQUEUE => ["lib/count_stats", "lib/finish_tasks", "lib/lease_tasks", "done_and_dequeue"];
    /// Keep a successful task as completed (asynq rdb.MarkAsComplete).
    MARK_COMPLETE => ["lib/count_stats", "mark_complete"];
    /// Store a handler's result while its task hash exists (asynq rdb.WriteResult, guarded).
    WRITE_RESULT => ["write_result"];
    /// Give an unfinished task back to pending at shutdown (asynq rdb.Requeue).
    REQUEUE => ["requeue"];
    /// Schedule a failed task's next attempt (asynq rdb.Retry).
    RETRY => ["lib/count_stats", "retry"];
    /// Archive a failed task and trim the archive (asynq rdb.Archive).
    ARCHIVE => ["lib/count_stats", "lib/trim_archive", "archive"];
    /// Move due scheduled/retry tasks to pending (asynq rdb.ForwardIfReady, one batch).
    FORWARD => ["lib/trim_archive", "forward"];
    /// Move an undecodable leased task to the archive, msg untouched.
    ARCHIVE_UNDECODABLE => ["lib/trim_archive", "archive_undecodable"];
    /// Messages of tasks whose lease expired (asynq rdb.ListLeaseExpired).
    LIST_LEASE_EXPIRED => ["list_lease_expired"] read_only;
    /// One chunk of active checked against lease and task keys (asynqdeck orphan scan, issue 12 R4).
    SCAN_ACTIVE => ["scan_active"] read_only;
    /// Give a lease-less active task an expired lease, or drop an id whose task key is gone (issue 12 R4).
    ADOPT_ORPHAN => ["adopt_orphan"];
    /// Confirm a queue missing from asynq:queues holds tasks and clear its leftover paused flag (issue 12 R14).
    RESTORE_QUEUE => ["restore_queue"];
    /// Delete completed tasks past retention (asynq rdb.DeleteExpiredCompletedTasks, one batch).
    DELETE_EXPIRED_COMPLETED => ["delete_expired_completed"];
    /// Return stale aggregation sets to their groups (asynq rdb.ReclaimStaleAggregationSets).
    RECLAIM_STALE_AGGREGATION_SETS => ["reclaim_stale_aggregation_sets"];
    /// Move a ready group's oldest tasks into a new aggregation set (asynq rdb.AggregationCheck).
    AGGREGATION_CHECK => ["aggregation_check"];
    /// One chunk of an aggregation set's messages and its deadline (asynq rdb.ReadAggregationSet).
    READ_AGGREGATION_SET => ["read_aggregation_set"] read_only;
    /// Delete one chunk of an aggregated set's tasks (asynq rdb.DeleteAggregationSet).
    DELETE_AGGREGATION_SET => ["delete_aggregation_set"];
    /// One page of a task container with msg, result and score (asynq rdb.listMessages / listZSetEntries).
    LIST_TASKS => ["list_tasks"] read_only;
    /// Read one task with its state and due time (asynq rdb.GetTaskInfo).
    GET_TASK_INFO => ["get_task_info"] read_only;
    /// Move one task to pending (asynq rdb.RunTask).
    RUN_TASK => ["lib/remove_from_container", "run_task"];
    /// Move one task to the archive and trim it (asynq rdb.ArchiveTask).
    ARCHIVE_TASK => ["lib/trim_archive", "lib/remove_from_container", "archive_task"];
    /// Delete one task and release its lock (asynq rdb.DeleteTask).
    DELETE_TASK => ["lib/release_lock", "lib/remove_from_container", "delete_task"];
    /// Move every task of a zset to pending (asynq rdb.RunAll*Tasks).
    RUN_ALL => ["run_all"];
    /// Move every task of a container to the archive and trim it (asynq rdb.ArchiveAll*Tasks).
    ARCHIVE_ALL => ["lib/trim_archive", "archive_all"];
    /// Delete every task of a container and release their locks (asynq rdb.DeleteAll*Tasks).
    DELETE_ALL => ["lib/release_lock", "delete_all"];
    /// Count or delete the left-behind task hashes among some task keys (asynqdeck only, R12).
    LEFT_BEHIND => ["lib/release_lock", "left_behind"];
    /// Store a new background job and index it in its queue (asynqdeck only, issue 15).
    JOB_CREATE => ["job_create"];
    /// Add a job to the global job index, dropping expired entries (asynqdeck only, issue 15).
    JOB_INDEX => ["job_index"];
    /// Take a job's lease: one runner per job (asynqdeck only, issue 15).
    JOB_CLAIM => ["job_claim"];
    /// Give a job's lease back (asynqdeck only, issue 15).
    JOB_RELEASE => ["job_release"];
    /// Ask a job to stop (asynqdeck only, issue 15).
    JOB_CANCEL => ["lib/job_progress", "job_cancel"];
    /// Stop a job with an error (asynqdeck only, issue 15).
    JOB_FAIL => ["lib/job_progress", "job_fail"];
    /// One chunk of an "all" job: run, archive or delete the oldest tasks, progress in the same call (issue 15).
    JOB_CHUNK => ["lib/release_lock", "lib/trim_archive", "lib/job_progress", "job_chunk"];
    /// One chunk of a filtered or cancel job: act on picked ids, re-checked, progress in the same call (issue 15).
    JOB_APPLY => ["lib/release_lock", "lib/trim_archive", "lib/remove_from_container", "lib/job_progress", "job_apply"];
    /// Replace a task's msg, compare-and-set (asynq rdb.UpdateTaskPayload; also the dashboard's payload edit).
    UPDATE_TASK_PAYLOAD => ["update_task_payload"];
    /// Counts of one queue for QueueInfo (asynq rdb.CurrentStats).
    QUEUE_STATS => ["lib/group_total", "lib/queue_counts", "queue_stats"] read_only;
    /// Pending sizes, latencies, other sizes asked for and growth samples of many queues, errors caught per queue (dashboard snapshot, inside a MULTI).
    QUEUES_STATS => ["lib/group_total", "queues_stats"] read_only;
    /// Sampled memory estimate of one queue (asynq rdb.memoryUsage, guarded form).
    QUEUE_MEMORY_USAGE => ["lib/group_total", "lib/memory_usage", "queue_memory_usage"] read_only;
    /// Sampled memory estimates of many queues, errors caught per queue (dashboard memory run).
    QUEUES_MEMORY_USAGE => ["lib/group_total", "lib/memory_usage", "queues_memory_usage"] read_only;
    /// Groups of a queue with their sizes (asynq rdb.GroupStats).
    GROUP_STATS => ["group_stats"] read_only;
    /// Remove a queue, forced or only when empty (asynq rdb.RemoveQueue).
    DELETE_QUEUE => ["delete_queue"];
    /// Store a server's info and workers (asynq rdb.WriteServerState).
    WRITE_SERVER_STATE => ["write_server_state"];
    /// Replace a scheduler's entries (asynq rdb.WriteSchedulerEntries).
    WRITE_SCHEDULER_ENTRIES => ["write_scheduler_entries"];
    /// Append to a scheduler entry's capped history (asynq rdb.RecordSchedulerEnqueueEvent).
    RECORD_SCHEDULER_ENQUEUE_EVENT => ["record_scheduler_enqueue_event"];
    /// Read and prune a heartbeat registry zset (asynq ListServers/ListWorkers/ListSchedulerEntries).
    LIST_LIVE_MEMBERS => ["list_live_members"];
    /// Register a scheduler replica and take or renew its group's lease (asynqdeck only).
    SCHEDULER_LEASE => ["scheduler_lease"];
    /// A scheduler replica leaves its group, dropping the lease it holds (asynqdeck only).
    SCHEDULER_RELEASE => ["scheduler_release"];
    /// The lease holder claims fire ticks, each once per group (asynqdeck only).
    SCHEDULER_CLAIM_TICKS => ["scheduler_claim_ticks"];
    /// Append a retry/archived size sample to a queue's outage series and trim it (asynqdeck only).
    RECORD_QUEUE_SAMPLE => ["record_queue_sample"];
}
