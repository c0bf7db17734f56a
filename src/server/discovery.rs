//! Scaffolding (R14).
use crate::broker::Broker;
use crate::error::Result;

/// Scaffolding.
#[derive(Debug)]
pub struct QueueDiscovery {
    _broker: Broker,
}

/// Scaffolding.
#[derive(Debug, Default)]
pub struct DiscoveryOutcome {
    /// Scaffolding.
    pub restored: Vec<String>,
    /// Scaffolding.
    pub cycle_done: bool,
}

impl QueueDiscovery {
    /// Scaffolding.
    pub fn new(broker: Broker) -> Self {
        QueueDiscovery { _broker: broker }
    }

    /// Scaffolding.
    pub async fn tick(&mut self) -> Result<DiscoveryOutcome> {
        Ok(DiscoveryOutcome {
            restored: Vec::new(),
            cycle_done: true,
        })
    }
}
