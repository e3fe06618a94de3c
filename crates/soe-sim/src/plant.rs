//! Where a planted bug ([`Plant`]) strikes: once, 5 s into the run. (The fourth,
//! [`Plant::UnboundedQueue`], is also in the server's config: see [`crate::cluster`].)

use std::time::Duration;

use bytes::Bytes;
use soe_session::Delivery;

use crate::options::Plant;

/// How long into a run a planted bug waits before it strikes.
const AFTER: Duration = Duration::from_secs(5);

/// The bug to plant, and whether it struck.
#[derive(Debug)]
pub(crate) struct Planter {
    plant: Option<Plant>,
    planted: bool,
}

impl Planter {
    /// Plants `plant`, if any.
    pub(crate) fn new(plant: Option<Plant>) -> Self {
        Self {
            plant,
            planted: false,
        }
    }

    /// Whether the bug struck (from then on the auditor checks every step).
    pub(crate) fn planted(&self) -> bool {
        self.planted
    }

    /// A reliable message on its way to the server application at `since` into the run, as
    /// the application sees it: changed ([`Plant::MutateMessage`]), or lost (`None`,
    /// [`Plant::DropMessage`]).
    pub(crate) fn tamper(&mut self, since: Duration, kind: Delivery, data: Bytes) -> Option<Bytes> {
        if kind != Delivery::Reliable || self.planted || since <= AFTER {
            return Some(data);
        }
        match self.plant {
            Some(Plant::MutateMessage) => {
                self.planted = true;
                let mut v = data.to_vec();
                let k = v.len() - 1;
                v[k] ^= 0x40;
                Some(v.into())
            }
            Some(Plant::DropMessage) => {
                self.planted = true;
                None
            }
            _ => Some(data),
        }
    }

    /// The bug due to strike in the server's state at `since` into the run, if any:
    /// [`Plant::LoseDeadline`] or [`Plant::UnboundedQueue`]. Call [`Planter::struck`] when it did.
    pub(crate) fn due(&self, since: Duration) -> Option<Plant> {
        self.plant
            .filter(|p| matches!(p, Plant::LoseDeadline | Plant::UnboundedQueue))
            .filter(|_| !self.planted && since > AFTER)
    }

    /// The bug struck.
    pub(crate) fn struck(&mut self) {
        self.planted = true;
    }
}
