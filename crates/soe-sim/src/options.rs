//! What a run is asked to do: its [`Options`] and the bug it may plant on purpose.

use std::fmt::Write as _;
use std::time::Duration;

/// A bug planted on purpose, to prove the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Plant {
    /// The server application sees one reliable message with a byte changed.
    MutateMessage,
    /// The server application loses one reliable message silently.
    DropMessage,
    /// One server session is taken out of the endpoint's timer set.
    LoseDeadline,
    /// The server's sessions do not enforce their send-queue limit (they are built with one
    /// far above the configured `max_queued_messages`), and one server application queues
    /// more messages than the limit at once.
    UnboundedQueue,
}

impl Plant {
    /// Every plant.
    pub const ALL: [Self; 4] = [
        Self::MutateMessage,
        Self::DropMessage,
        Self::LoseDeadline,
        Self::UnboundedQueue,
    ];

    /// The name `--plant` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::MutateMessage => "mutate",
            Self::DropMessage => "drop",
            Self::LoseDeadline => "deadline",
            Self::UnboundedQueue => "queue",
        }
    }

    /// The plant named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// What a sweep runs; a run is a pure function of these and its seed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// A run has between 1 and this many clients (drawn from the seed).
    pub max_clients: usize,
    /// How long workloads and faults run.
    pub active: Duration,
    /// How long the run continues after that with no new messages and no new faults (the
    /// links keep their loss), so everything sent can arrive and every timeout can fire.
    pub settle: Duration,
    /// Whether faults are scheduled (churn, rebinding, outages, floods, replays, restarts).
    pub faults: bool,
    /// A bug to plant.
    pub plant: Option<Plant>,
    /// Audit the endpoints' timer sets every this many steps (and at the end).
    pub audit_every: u64,
}

impl Default for Options {
    /// Up to 24 clients, 150 s of activity, 75 s to settle, faults on.
    fn default() -> Self {
        Self {
            max_clients: 24,
            active: Duration::from_secs(150),
            settle: Duration::from_secs(75),
            faults: true,
            plant: None,
            audit_every: 16,
        }
    }
}

impl Options {
    /// Sets [`Options::max_clients`].
    pub fn with_max_clients(mut self, n: usize) -> Self {
        self.max_clients = n.max(1);
        self
    }

    /// Sets [`Options::active`].
    pub fn with_active(mut self, d: Duration) -> Self {
        self.active = d;
        self
    }

    /// Sets [`Options::plant`].
    pub fn with_plant(mut self, plant: Option<Plant>) -> Self {
        self.plant = plant;
        self
    }

    /// Sets [`Options::faults`].
    pub fn with_faults(mut self, on: bool) -> Self {
        self.faults = on;
        self
    }

    /// The command that replays `seed` under these options.
    pub fn replay_command(&self, seed: u64) -> String {
        let mut cmd = format!("cargo xtask sim --from {seed} --seeds 1");
        let d = Self::default();
        if self.max_clients != d.max_clients {
            let _ = write!(cmd, " --clients {}", self.max_clients);
        }
        if self.active != d.active {
            let _ = write!(cmd, " --active {}", self.active.as_secs());
        }
        if !self.faults {
            cmd.push_str(" --no-faults");
        }
        if let Some(p) = self.plant {
            let _ = write!(cmd, " --plant {}", p.name());
        }
        cmd
    }
}
