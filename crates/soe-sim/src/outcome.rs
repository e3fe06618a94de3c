//! What a run did and found.

use std::time::Duration;

/// Faults injected in a run, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FaultCounts {
    /// Graceful closes by a client application.
    pub closes: u64,
    /// Clients that vanished without a Disconnect.
    pub vanishes: u64,
    /// Reconnects (a new session id from the same address).
    pub reconnects: u64,
    /// NAT rebindings (a new source port mid-session).
    pub rebinds: u64,
    /// Outages longer than the idle timeout.
    pub long_outages: u64,
    /// Outages shorter than it.
    pub short_outages: u64,
    /// Server restarts.
    pub restarts: u64,
    /// SessionRequests from strangers.
    pub flood_requests: u64,
    /// Garbage datagrams (from strangers and spoofed from clients).
    pub garbage: u64,
    /// Captured datagrams replayed.
    pub replays: u64,
    /// Datagrams with a bit flipped by a link.
    pub corrupted: u64,
}

impl FaultCounts {
    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &Self) {
        self.closes += o.closes;
        self.vanishes += o.vanishes;
        self.reconnects += o.reconnects;
        self.rebinds += o.rebinds;
        self.long_outages += o.long_outages;
        self.short_outages += o.short_outages;
        self.restarts += o.restarts;
        self.flood_requests += o.flood_requests;
        self.garbage += o.garbage;
        self.replays += o.replays;
        self.corrupted += o.corrupted;
    }
}

/// What one run did and found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Clients.
    pub clients: usize,
    /// Sessions opened (client side).
    pub sessions: u64,
    /// Reliable messages delivered and verified (both directions).
    pub reliable_delivered: u64,
    /// Unreliable and ordered messages delivered and verified.
    pub unreliable_delivered: u64,
    /// Reliable data packets the clients sent (first transmissions, from the session stats of
    /// the sessions live at the end).
    pub reliable_packets_up: u64,
    /// Reliable data packets the server sent (likewise).
    pub reliable_packets_down: u64,
    /// Datagrams that crossed the emulated network.
    pub datagrams: u64,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Loop iterations.
    pub steps: u64,
    /// Virtual time simulated.
    pub simulated: Duration,
    /// The first broken invariant, if any.
    pub violation: Option<String>,
}

impl Outcome {
    /// Whether every invariant held.
    pub fn is_ok(&self) -> bool {
        self.violation.is_none()
    }
}
