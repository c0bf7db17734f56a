//! Time source. Go: `internal/timeutil` (`Clock`, `SimulatedClock`).
//!
//! Every component reads "now" through a [`Clock`], and scripts receive time
//! as arguments (never Redis `TIME`), so tests can fix the clock.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// A source of the current time (UTC).
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time, UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stays where it is set (for tests). Cloning shares the time.
#[derive(Debug, Clone)]
pub struct SimulatedClock(Arc<Mutex<DateTime<Utc>>>);

impl SimulatedClock {
    /// A clock fixed at `t`.
    pub fn new(t: DateTime<Utc>) -> Self {
        SimulatedClock(Arc::new(Mutex::new(t)))
    }

    /// Moves the clock to `t`.
    pub fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().expect("clock lock") = t;
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: std::time::Duration) {
        let mut t = self.0.lock().expect("clock lock");
        *t += chrono::Duration::from_std(d).expect("duration in range");
    }
}

impl Clock for SimulatedClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().expect("clock lock")
    }
}

/// The shared clock handle components hold.
pub type SharedClock = Arc<dyn Clock>;
