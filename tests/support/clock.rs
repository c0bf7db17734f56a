//! Time in the tests: the fixed "now" most of them run at
//! (2026-03-10T12:00:00Z), the protobuf timestamps Go writes
//! ([`ts`]), and a broker whose clock is a [`SimulatedClock`] the test
//! moves ([`broker_at`]).

use std::sync::Arc;

use asynqdeck::broker::Broker;
use asynqdeck::broker::proto::Timestamp;
use asynqdeck::clock::SimulatedClock;
use chrono::{DateTime, Utc};

use super::TestDb;

/// The fixed "now" of these tests: 2026-03-10T12:00:00Z (unix 1773144000).
pub fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-10T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// `t` as the protobuf timestamp field Go writes (`timestamppb.New(t)`).
pub fn ts(t: DateTime<Utc>) -> Option<Timestamp> {
    Some(Timestamp::from_utc(Some(t)))
}

/// The instant `s` seconds after the unix epoch.
pub fn at(s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(s, 0).unwrap()
}

/// A broker on `db` whose clock is `clock`.
pub async fn broker_at(db: &TestDb, clock: &SimulatedClock) -> Broker {
    Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
}

/// `n` seconds, as a chrono duration.
pub fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

/// A fresh database with a broker, a client and an inspector on one
/// simulated clock, and a raw connection for checking keys.
pub struct Clocked {
    pub db: TestDb,
    pub broker: Broker,
    pub client: asynqdeck::Client,
    pub inspector: asynqdeck::Inspector,
    pub clock: SimulatedClock,
    pub conn: super::redis::RawConn,
}

/// [`Clocked`] on a fresh database, its clock at `at`.
pub async fn clocked(at: DateTime<Utc>) -> Clocked {
    clocked_on(super::redis(), at).await
}

/// [`Clocked`] on `db`, its clock at `at`.
pub async fn clocked_on(db: TestDb, at: DateTime<Utc>) -> Clocked {
    let clock = SimulatedClock::new(at);
    let broker = broker_at(&db, &clock).await;
    Clocked {
        client: asynqdeck::Client::from_broker(broker.clone()),
        inspector: asynqdeck::Inspector::from_broker(broker.clone()),
        conn: db.raw().await,
        db,
        broker,
        clock,
    }
}
