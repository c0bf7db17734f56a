//! [`Conn`]: the broker's connection, one type for a standalone Redis, a
//! Redis Cluster and a Sentinel-elected master. Every broker call sends its
//! commands through it unchanged; on a cluster redis-rs routes each command
//! (and each script, by its first key) to the node owning the slot and
//! follows `MOVED`/`ASK`.

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::sentinel::SentinelConn;

/// A multiplexed connection to the deployment; cheap to clone (clones share
/// it).
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server, reconnecting.
    Single(ConnectionManager),
    /// One server, a connection of its own (no reconnect; blocking waits).
    Plain(MultiplexedConnection),
    /// A Redis Cluster: one connection per node, commands routed by slot.
    Cluster(ClusterConnection),
    /// The master Sentinel elects, followed across failovers.
    Sentinel(SentinelConn),
}

impl Conn {
    /// The cluster connection, when this is one.
    pub fn as_cluster(&mut self) -> Option<&mut ClusterConnection> {
        match self {
            Conn::Cluster(c) => Some(c),
            _ => None,
        }
    }

    /// Whether commands go to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Plain(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Plain(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Plain(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
        }
    }
}
