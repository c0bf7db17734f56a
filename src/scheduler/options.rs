//! Enqueue options as Go's `Option.String()` writes them (what a
//! `SchedulerEntry.enqueue_options` holds) and back (as Go's inspector
//! `parseOption` reads them, plus `TaskID`, `Group` and `Header`, which Go's
//! parser drops). Wire spec §4.4.

use crate::task::EnqueueOptions;

/// The option strings of `opts`, one per set option, in this order:
/// `Queue`, `MaxRetry`, `Timeout`, `Deadline`, `Unique`, `ProcessAt`,
/// `ProcessIn`, `Retention`, `TaskID`, `Group`, then one `Header([k,v])` per
/// header in key order. E.g. `Queue("low")`, `MaxRetry(3)`,
/// `Timeout(30s)`, `Unique(1h0m0s)`, `Header(["k","v"])`.
pub fn option_strings(opts: &EnqueueOptions) -> Vec<String> {
    let _ = opts;
    Vec::new()
}

/// Reads option strings back into options. Returns the options and the
/// strings it could not read (left out, as Go's inspector drops them).
pub fn parse_option_strings(strings: &[String]) -> (EnqueueOptions, Vec<String>) {
    (EnqueueOptions::default(), strings.to_vec())
}
