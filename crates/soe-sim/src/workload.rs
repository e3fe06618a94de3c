//! The workload: what each client's application, and the server's on its behalf, sends on
//! every tick, and the sending itself (a verifiable message, counted in the ledger once the
//! endpoint takes it).

use std::time::{Duration, Instant};

use soe_session::{Channel, SendError, SplitMix64};

use crate::auditor::Auditor;
use crate::cluster::Cluster;
use crate::message::{self, DOWN, Header, Kind, UP};
use crate::network::below;

/// The traffic of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    /// A few reliable requests in flight, each echoed by the server.
    Echo,
    /// Large reliable messages both ways on two channels, keeping queues full.
    Bulk,
    /// A game's ticks: unreliable up, ordered down, some reliable both ways.
    Tick,
    /// Long-lived runs: one reliable message each way every period.
    Steady(Duration),
}

impl Workload {
    /// Draws one of echo, bulk and tick.
    pub(crate) fn draw(rng: &mut SplitMix64) -> Self {
        match below(rng, 3) {
            0 => Self::Echo,
            1 => Self::Bulk,
            _ => Self::Tick,
        }
    }

    /// Time between ticks.
    pub(crate) fn period(self) -> Duration {
        match self {
            Self::Echo => Duration::from_millis(20),
            Self::Bulk => Duration::from_millis(10),
            Self::Tick => Duration::from_millis(50),
            Self::Steady(p) => p,
        }
    }
}

/// One message to send: how, on which channel, and its size range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Msg {
    kind: Kind,
    channel: u8,
    lo: usize,
    hi: usize,
}

impl Msg {
    /// A reliable message on `channel` of `lo` to `hi` bytes.
    pub(crate) fn reliable(channel: u8, lo: usize, hi: usize) -> Self {
        Self {
            kind: Kind::Reliable,
            channel,
            lo,
            hi,
        }
    }

    /// An echo request, or its reply.
    pub(crate) fn echo() -> Self {
        Self::reliable(0, 16, 400)
    }

    fn unreliable(kind: Kind, lo: usize, hi: usize) -> Self {
        Self {
            kind,
            channel: 0,
            lo,
            hi,
        }
    }
}

/// Client `i`'s application ticks: it (and the server's application, for the downward half)
/// sends what its workload sends per tick, if its session is live.
pub(crate) fn tick(cluster: &mut Cluster, audit: &mut Auditor, now: Instant, i: usize) {
    let c = &cluster.clients[i];
    let (Some(idx), true, workload) = (c.instance, c.live, c.workload) else {
        return;
    };
    let tick = audit.ledger.tick(idx);
    let sum = |a: &[u64; 4]| a.iter().sum::<u64>();
    match workload {
        Workload::Echo => {
            // Up to four requests in flight.
            for _ in 0..4 {
                let inst = &audit.ledger.instances[idx];
                if inst.sent[0][0] >= inst.recv[1][0] + 4
                    || !send(cluster, audit, now, idx, UP, Msg::echo())
                {
                    break;
                }
            }
        }
        Workload::Bulk => {
            // Up to 24 messages in flight each way, alternating between channels 0 and 1.
            for dir in [UP, DOWN] {
                let d = dir as usize;
                for _ in 0..8 {
                    let inst = &audit.ledger.instances[idx];
                    if sum(&inst.sent[d]) >= sum(&inst.recv[d]) + 24 {
                        break;
                    }
                    let m = Msg::reliable((sum(&inst.sent[d]) % 2) as u8, 300, 6000);
                    if !send(cluster, audit, now, idx, dir, m) {
                        break;
                    }
                }
            }
        }
        Workload::Tick => {
            let m = Msg::unreliable(Kind::Unreliable, 32, 32);
            send(cluster, audit, now, idx, UP, m);
            let m = Msg::unreliable(Kind::Ordered, 120, 200);
            send(cluster, audit, now, idx, DOWN, m);
            if tick.is_multiple_of(5) {
                send(cluster, audit, now, idx, UP, Msg::reliable(0, 48, 48));
            }
            if tick.is_multiple_of(10) {
                send(cluster, audit, now, idx, DOWN, Msg::reliable(1, 100, 100));
            }
        }
        Workload::Steady(_) => {
            send(cluster, audit, now, idx, UP, Msg::reliable(0, 400, 400));
            send(cluster, audit, now, idx, DOWN, Msg::reliable(0, 400, 400));
        }
    }
}

/// Queues one message of instance `idx` in direction `dir` (on the client's session, or on
/// the server's); returns whether it was taken. A refusal other than a full queue or a closed
/// session is a violation.
pub(crate) fn send(
    cluster: &mut Cluster,
    audit: &mut Auditor,
    now: Instant,
    idx: usize,
    dir: u8,
    m: Msg,
) -> bool {
    let inst = &audit.ledger.instances[idx];
    let d = dir as usize;
    let seq = match m.kind {
        Kind::Reliable => inst.sent[d][usize::from(m.channel)],
        _ => inst.unreliable_sent[d],
    };
    let len = message::size(seq, u64::from(m.channel) << 8 | u64::from(dir), m.lo, m.hi);
    let data = message::build(
        Header {
            kind: m.kind as u8,
            direction: dir,
            channel: m.channel,
            instance: idx as u32,
            seq,
        },
        len,
    );
    let channel = Channel::new(m.channel).unwrap_or(Channel::ZERO);
    let r = if dir == UP {
        let c = &mut cluster.clients[inst.client];
        let Some(h) = c.handle else { return false };
        match m.kind {
            Kind::Reliable => c.ep.send(h, channel, data),
            Kind::Unreliable => c.ep.send_unreliable(h, data),
            Kind::Ordered => c.ep.send_ordered(h, data),
        }
    } else {
        let Some(h) = inst.server_handle.filter(|_| inst.server_end.is_none()) else {
            return false;
        };
        let ep = &mut cluster.server.ep;
        match m.kind {
            Kind::Reliable => ep.send(h, channel, data),
            Kind::Unreliable => ep.send_unreliable(h, data),
            Kind::Ordered => ep.send_ordered(h, data),
        }
    };
    match r {
        Ok(()) => {
            audit.ledger.sent(idx, dir, m.kind, m.channel);
            true
        }
        Err(SendError::QueueFull(_) | SendError::Closed | SendError::UnknownSession) => false,
        Err(e) => {
            audit.fail(now, cluster, format!("session #{idx}: send refused: {e}"));
            false
        }
    }
}
