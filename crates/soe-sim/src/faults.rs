//! The fault schedule: what strikes whom and when, drawn from the seed before the run starts
//! (floods and replays reschedule their next wave as they strike). The network carries out the
//! faults that are the network's ([`crate::network`]); the loop ([`crate::world`]) applies
//! each to the cluster, the network and the ledger.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use soe_session::SplitMix64;

use crate::network::{below, between, chance};
use crate::options::Options;

/// A fault, or a client's start.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fault {
    /// Client `i` opens its first session.
    Start(usize),
    /// Client `i`'s application closes its session gracefully.
    Close(usize),
    /// Client `i` vanishes without a word (and may come back with a new endpoint).
    Vanish(usize),
    /// Client `i`'s NAT gives it a new port.
    Rebind(usize),
    /// Client `client`'s path goes dark one or both ways for `length`.
    Dark {
        client: usize,
        up: bool,
        down: bool,
        length: Duration,
    },
    /// The server restarts and loses every session.
    Restart,
    /// A wave of strangers' SessionRequests and garbage; `left` waves to go, 500 ms apart.
    Flood { left: u32 },
    /// A wave of captured datagrams replayed; `left` waves to go, 1 s apart.
    Replay { left: u32 },
}

/// The faults to come, in time order (ties in the order they were scheduled).
#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    queue: BTreeMap<(Instant, u64), Fault>,
    order: u64,
}

impl FaultPlan {
    /// Draws the plan of a run starting at `start` with `clients` clients: every client
    /// starts within 3 s; with faults on (and at least 60 s of activity), each client may be
    /// closed or vanish, be rebound and go dark, and the server may restart, be flooded and
    /// see replays, all before the last 20 s of activity.
    pub(crate) fn draw(
        rng: &mut SplitMix64,
        start: Instant,
        clients: usize,
        opts: &Options,
    ) -> Self {
        let mut plan = Self::default();
        for i in 0..clients {
            let at = start + between(rng, Duration::ZERO, Duration::from_secs(3));
            plan.schedule(at, Fault::Start(i));
        }
        let active = opts.active;
        if !opts.faults || active < Duration::from_secs(60) {
            return plan;
        }
        let late = active - Duration::from_secs(20);
        let mut faults = Vec::new();
        for i in 0..clients {
            client_faults(rng, i, active, &mut faults);
        }
        if chance(rng, 0.15) {
            faults.push((between(rng, Duration::from_secs(10), late), Fault::Restart));
        }
        if chance(rng, 0.3) {
            let at = between(rng, Duration::from_secs(1), late);
            faults.push((at, Fault::Flood { left: 20 }));
        }
        if chance(rng, 0.3) {
            let at = between(rng, Duration::from_secs(5), late);
            faults.push((at, Fault::Replay { left: 20 }));
        }
        for (at, f) in faults {
            plan.schedule(start + at, f);
        }
        plan
    }

    /// Adds `f` at `at`.
    pub(crate) fn schedule(&mut self, at: Instant, f: Fault) {
        self.order += 1;
        self.queue.insert((at, self.order), f);
    }

    /// When the next fault strikes.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.queue.keys().next().map(|k| k.0)
    }

    /// The next fault due at `now`, taken.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Fault> {
        let (&(at, _), _) = self.queue.first_key_value()?;
        if at > now {
            return None;
        }
        self.queue.pop_first().map(|(_, f)| f)
    }
}

/// Client `i`'s faults, at offsets from the start: a close or a vanish (30 %), a rebinding
/// (25 %), an outage (20 %, half of them longer than the idle timeout).
fn client_faults(r: &mut SplitMix64, i: usize, active: Duration, out: &mut Vec<(Duration, Fault)>) {
    let late = active - Duration::from_secs(20);
    if chance(r, 0.3) {
        let at = between(r, Duration::from_secs(5), late);
        let f = if chance(r, 0.5) {
            Fault::Close(i)
        } else {
            Fault::Vanish(i)
        };
        out.push((at, f));
    }
    if chance(r, 0.25) {
        out.push((between(r, Duration::from_secs(5), late), Fault::Rebind(i)));
    }
    if chance(r, 0.2) {
        let long = chance(r, 0.5);
        let length = if long {
            between(r, Duration::from_secs(35), Duration::from_secs(45))
        } else {
            between(r, Duration::from_millis(500), Duration::from_secs(4))
        };
        let (up, down) = match below(r, 3) {
            0 => (true, true),
            1 => (true, false),
            _ => (false, true),
        };
        let latest = active.saturating_sub(length + Duration::from_secs(5));
        let at = between(
            r,
            Duration::from_secs(5),
            latest.max(Duration::from_secs(5)),
        );
        out.push((
            at,
            Fault::Dark {
                client: i,
                up,
                down,
                length,
            },
        ));
    }
}
