//! A deterministic simulation of a whole SOE server in virtual time, in the manner of
//! FoundationDB's simulator and TigerBeetle's VOPR: one server [`soe_session::Endpoint`] and up
//! to hundreds of client endpoints, each client on its own seeded [`soe_netem::Link`] pair (loss,
//! bursts, reordering, duplication, a bottleneck) plus bit corruption, running echo, bulk or
//! game-tick traffic, while faults drawn from the seed strike:
//!
//! * churn: a client closes gracefully or vanishes without a word, and may come back from the
//!   same address with a new session id;
//! * NAT rebinding: a client's source port changes mid-session (the server answers
//!   UnknownSender, the client sends RemapConnection);
//! * outages, one or both directions, shorter or longer than the idle timeout;
//! * a stranger flooding SessionRequests and garbage (some spoofed from clients' addresses);
//! * replays of captured datagrams into other sessions;
//! * a server restart that loses every session;
//! * a server whose session or half-open limits are tight.
//!
//! Every run is a pure function of its seed and [`Options`]; a failing run reports the one
//! command that replays it ([`Options::replay_command`]). The invariants checked:
//!
//! * every reliable message handed to a session arrives exactly once, in order, byte for byte,
//!   at the session it was sent on (checked at every delivery); unreliable and ordered messages
//!   arrive intact, ordered ones never older than one delivered;
//! * at the end, after a settling period with no new traffic and no new faults, a session live
//!   on both sides has delivered everything; a session that ended was reported to **both**
//!   applications (an application that vanished or restarted knows it already);
//! * no established session ends while its link delivers (at most 30 % random loss, or 10 %
//!   in bursts) unless a fault explains it (an outage longer than the idle timeout, a restart, a
//!   vanished peer, a full server, a close by the application);
//! * the server's sessions and half-open sessions stay within their limits; every live
//!   session's reliable channels, on both sides, hold no more messages queued to send, early
//!   packets, partial-message bytes or undelivered messages than the reliable config allows;
//!   every datagram fits udp_length;
//! * every endpoint's timer set files each session under its current deadline and every
//!   unfinished session has one (audited through a hidden hook of soe-session); the clock never
//!   stalls at one instant;
//! * endpoint counters equal the datagrams the network moved, and session counters equal the
//!   messages the applications sent and received;
//! * a client whose server restarted (or whose session otherwise ended) learns so and
//!   reconnects: at the end every client that wants a session has one.
//!
//! [`run`] runs one seed, [`sweep`] many; `cargo xtask sim --seeds N [--from S]` drives it.
//! To see what went wrong in a failing seed, replay it with `SOE_SIM_TRACE=<client index>`:
//! every datagram that client sends and receives (time, length, first bytes), its session
//! events and its NAT rebinds go to stderr.
//! [`Plant`] plants a bug on purpose, to prove the checks catch it.
//!
//! # Layout
//!
//! As in FoundationDB's simulation and TigerBeetle's VOPR, one loop and the parts it ties:
//!
//! * `world`: the loop. It advances virtual time to the next thing due, services it, moves
//!   what the endpoints send, hands events to the applications, and runs the checks.
//! * `cluster`: the server endpoint and the client endpoints, with what each application
//!   remembers of its sessions, and the configs drawn from the seed.
//! * `network`: each client's path (a seeded link each way, corruption, a NAT, outages), the
//!   strangers' link for floods and replays, and how those are made.
//! * `faults`: the fault schedule drawn from the seed.
//! * `workload`: what the applications send on each tick (echo, bulk, game ticks).
//! * `auditor`: the ledger of every session and the invariants checked against it.
//! * `message`: the self-verifying messages; `plant`: where a planted bug strikes.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

mod auditor;
mod cluster;
mod faults;
mod message;
mod network;
mod options;
mod outcome;
mod plant;
mod workload;
mod world;

pub use options::{Options, Plant};
pub use outcome::{FaultCounts, Outcome};
pub use world::{run, run_long_lived};

use std::time::Duration;

/// What a sweep found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SweepReport {
    /// Seeds run.
    pub seeds: u64,
    /// Failing runs: (seed, violation, replay command), in seed order.
    pub failures: Vec<(u64, String, String)>,
    /// Sessions opened, summed.
    pub sessions: u64,
    /// Clients, summed.
    pub clients: u64,
    /// Reliable messages verified, summed.
    pub reliable_delivered: u64,
    /// Unreliable and ordered messages verified, summed.
    pub unreliable_delivered: u64,
    /// Datagrams across the network, summed.
    pub datagrams: u64,
    /// Faults, summed.
    pub faults: FaultCounts,
    /// Virtual time, summed.
    pub simulated: Duration,
}

impl SweepReport {
    /// Adds one run.
    pub fn add(&mut self, o: &Outcome, opts: &Options) {
        self.seeds += 1;
        self.sessions += o.sessions;
        self.clients += o.clients as u64;
        self.reliable_delivered += o.reliable_delivered;
        self.unreliable_delivered += o.unreliable_delivered;
        self.datagrams += o.datagrams;
        self.faults.add(&o.faults);
        self.simulated += o.simulated;
        if let Some(v) = &o.violation {
            self.failures
                .push((o.seed, v.clone(), opts.replay_command(o.seed)));
        }
    }

    /// A multi-line summary.
    pub fn summary(&self) -> String {
        let f = &self.faults;
        format!(
            "{} seeds, {} failing; {} clients, {} sessions; {} reliable and {} unreliable \
             messages verified; {} datagrams; {:.1} simulated hours\nfaults: {} closes, {} \
             vanishes, {} reconnects, {} NAT rebinds, {} long and {} short outages, {} server \
             restarts, {} flood requests, {} garbage datagrams, {} replays, {} corrupted \
             datagrams",
            self.seeds,
            self.failures.len(),
            self.clients,
            self.sessions,
            self.reliable_delivered,
            self.unreliable_delivered,
            self.datagrams,
            self.simulated.as_secs_f64() / 3600.0,
            f.closes,
            f.vanishes,
            f.reconnects,
            f.rebinds,
            f.long_outages,
            f.short_outages,
            f.restarts,
            f.flood_requests,
            f.garbage,
            f.replays,
            f.corrupted
        )
    }
}

/// Runs seeds `from..from + seeds` under `opts`, calling `progress` after each run.
pub fn sweep(from: u64, seeds: u64, opts: &Options, progress: impl FnMut(&Outcome)) -> SweepReport {
    sweep_parallel(from, seeds, opts, 1, progress)
}

/// Runs seeds `from..from + seeds` under `opts` on `jobs` threads (at least one), calling
/// `progress` on the calling thread after each run, in the order runs finish. Every run is a
/// pure function of its seed, so the report is the same whatever `jobs` is (failures are
/// listed in seed order).
pub fn sweep_parallel(
    from: u64,
    seeds: u64,
    opts: &Options,
    jobs: usize,
    mut progress: impl FnMut(&Outcome),
) -> SweepReport {
    let end = from.saturating_add(seeds);
    let mut report = SweepReport::default();
    if jobs <= 1 {
        for seed in from..end {
            let o = run(seed, opts);
            progress(&o);
            report.add(&o, opts);
        }
        return report;
    }
    let next = std::sync::atomic::AtomicU64::new(from);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || {
                loop {
                    let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    if tx.send(run(seed, opts)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for o in rx {
            progress(&o);
            report.add(&o, opts);
        }
    });
    report.failures.sort_by_key(|f| f.0);
    report
}
