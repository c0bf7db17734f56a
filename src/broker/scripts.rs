//! Registry of the Lua scripts, one `.lua` file per operation.
//!
//! Each [`redis::Script`] is built once (hashed once) and run with EVALSHA,
//! falling back to loading it on NOSCRIPT. Scripts that write to the archive
//! are prefixed with `lib/trim_archive.lua`, which defines the shared
//! `trim_archive` function (Lua has no includes).

use std::sync::LazyLock;

use redis::Script;

macro_rules! scripts {
    ($( $(#[$doc:meta])* $name:ident => [$($file:literal),+]; )*) => {
        $(
            $(#[$doc])*
            pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
                Script::new(concat!($(include_str!(concat!("scripts/", $file, ".lua"))),+))
            });
        )*

        /// Every script with its file name, for header checks and preloading.
        #[allow(dead_code)]
        pub(crate) fn all() -> Vec<(&'static str, &'static Script)> {
            vec![$((concat!($($file, " "),+), &*$name)),*]
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
}
