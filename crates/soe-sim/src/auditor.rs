//! The auditor: the ledger of every session opened (what each side sent and received, how it
//! ended, what faults touched it) and the invariants checked against it, at every delivery,
//! every step, and at the end. The first broken invariant is the run's violation.

use std::time::{Duration, Instant};

use soe_session::{Channel, Delivery, DisconnectReason, Endpoint, SessionHandle};

use crate::cluster::Cluster;
use crate::message::{self, Kind, UP};
use crate::network::Network;

/// How an instance (one session, seen from both sides) ended on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The application was told.
    Told(DisconnectReason, bool),
    /// The client application vanished (it knows).
    Vanished,
    /// The server restarted (its application knows).
    Restarted,
}

/// One session from connect to its end on both sides.
#[derive(Debug)]
pub(crate) struct Instance {
    pub(crate) client: usize,
    session_id: u32,
    opened: Instant,
    pub(crate) client_handle: SessionHandle,
    pub(crate) server_handle: Option<SessionHandle>,
    pub(crate) connected: bool,
    /// Messages sent and received, by direction ([`UP`], [`message::DOWN`]) and channel.
    pub(crate) sent: [[u64; 4]; 2],
    pub(crate) recv: [[u64; 4]; 2],
    pub(crate) unreliable_sent: [u64; 2],
    unreliable_recv: [u64; 2],
    ordered_last: [Option<u64>; 2],
    pub(crate) client_end: Option<End>,
    pub(crate) server_end: Option<End>,
    /// A fault that may legitimately end it struck (outage, restart, vanish, full server).
    pub(crate) disturbed: bool,
    pub(crate) app_closed: bool,
    ticks: u64,
}

/// Every instance, and each client's in the order it opened them.
#[derive(Debug)]
pub(crate) struct Ledger {
    pub(crate) instances: Vec<Instance>,
    by_client: Vec<Vec<usize>>,
}

impl Ledger {
    /// Client `i` opened session `session_id` with handle `h`: its new instance, and whether it
    /// is a reconnect (the client had a session before).
    pub(crate) fn open(
        &mut self,
        now: Instant,
        i: usize,
        session_id: u32,
        h: SessionHandle,
    ) -> (usize, bool) {
        let idx = self.instances.len();
        let reconnect = !self.by_client[i].is_empty();
        self.by_client[i].push(idx);
        self.instances.push(Instance {
            client: i,
            session_id,
            opened: now,
            client_handle: h,
            server_handle: None,
            connected: false,
            sent: [[0; 4]; 2],
            recv: [[0; 4]; 2],
            unreliable_sent: [0; 2],
            unreliable_recv: [0; 2],
            ordered_last: [None; 2],
            client_end: None,
            server_end: None,
            disturbed: false,
            app_closed: false,
            ticks: 0,
        });
        (idx, reconnect)
    }

    /// The latest instance of client `i` with `session_id`, if any.
    pub(crate) fn find(&self, i: usize, session_id: u32) -> Option<usize> {
        self.by_client
            .get(i)?
            .iter()
            .rev()
            .find(|&&x| self.instances[x].session_id == session_id)
            .copied()
    }

    /// Counts a tick of instance `idx`'s workload; returns its number (from 1).
    pub(crate) fn tick(&mut self, idx: usize) -> u64 {
        self.instances[idx].ticks += 1;
        self.instances[idx].ticks
    }

    /// Counts a message the endpoint took.
    pub(crate) fn sent(&mut self, idx: usize, dir: u8, kind: Kind, channel: u8) {
        let inst = &mut self.instances[idx];
        match kind {
            Kind::Reliable => inst.sent[dir as usize][usize::from(channel)] += 1,
            _ => inst.unreliable_sent[dir as usize] += 1,
        }
    }

    /// Instance `idx` (if any) was struck by a fault that may end it.
    pub(crate) fn disturb(&mut self, idx: Option<usize>) {
        if let Some(idx) = idx {
            self.instances[idx].disturbed = true;
        }
    }

    /// The server restarted: every instance it held ended there.
    pub(crate) fn server_restarted(&mut self) {
        for inst in &mut self.instances {
            if inst.server_end.is_none() {
                inst.disturbed = true;
                if inst.server_handle.is_some() {
                    inst.server_end = Some(End::Restarted);
                }
            }
        }
    }
}

/// The ledger, the invariants, and what they found.
#[derive(Debug)]
pub(crate) struct Auditor {
    pub(crate) ledger: Ledger,
    start: Instant,
    /// The client whose state a failure report prints to stderr.
    trace: Option<usize>,
    violation: Option<String>,
    /// Long outages under way: (client, until).
    dark_marks: Vec<(usize, Instant)>,
    /// Reliable messages verified.
    pub(crate) reliable_delivered: u64,
    /// Unreliable and ordered messages verified.
    pub(crate) unreliable_delivered: u64,
    /// Reliable data packets sent by the sessions live on both sides at the end.
    pub(crate) reliable_packets_up: u64,
    pub(crate) reliable_packets_down: u64,
}

impl Auditor {
    /// An auditor of `clients` clients with nothing seen yet.
    pub(crate) fn new(start: Instant, clients: usize, trace: Option<usize>) -> Self {
        Self {
            ledger: Ledger {
                instances: Vec::new(),
                by_client: vec![Vec::new(); clients],
            },
            start,
            trace,
            violation: None,
            dark_marks: Vec::new(),
            reliable_delivered: 0,
            unreliable_delivered: 0,
            reliable_packets_up: 0,
            reliable_packets_down: 0,
        }
    }

    /// Whether every invariant held so far.
    pub(crate) fn ok(&self) -> bool {
        self.violation.is_none()
    }

    /// The first broken invariant, taken.
    pub(crate) fn take_violation(&mut self) -> Option<String> {
        self.violation.take()
    }

    /// Records a broken invariant (the first one counts), with the run's configs and the
    /// server's flood counters as they are now.
    pub(crate) fn fail(&mut self, now: Instant, cluster: &Cluster, what: String) {
        if let Some(i) = self.trace {
            let c = &cluster.clients[i];
            if let Some(h) = c.handle {
                eprintln!(
                    "traced client {i} at the failure: state {:?}, {:?}",
                    c.ep.state(h),
                    c.ep.stats(h)
                );
            }
        }
        if self.violation.is_none() {
            let t = now - self.start;
            self.violation = Some(format!(
                "t={:.3}s: {what} [{}]",
                t.as_secs_f64(),
                cluster.context()
            ));
        }
    }

    // ----- at every delivery and every end -----

    /// Checks a delivered message: for this session, this direction, intact, and (reliable)
    /// exactly the next one of its channel.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn delivered(
        &mut self,
        now: Instant,
        cluster: &Cluster,
        idx: usize,
        dir: u8,
        channel: Channel,
        kind: Delivery,
        data: &[u8],
    ) {
        let side = if dir == UP { "server" } else { "client" };
        let Some(h) = message::parse(data) else {
            self.fail(
                now,
                cluster,
                format!(
                    "{side} of session #{idx} received a corrupted {}-byte message ({kind:?})",
                    data.len()
                ),
            );
            return;
        };
        if h.instance != idx as u32 || h.direction != dir {
            self.fail(
                now,
                cluster,
                format!(
                    "{side} of session #{idx} received a message of session #{} direction {}",
                    h.instance, h.direction
                ),
            );
            return;
        }
        let inst = &mut self.ledger.instances[idx];
        let d = dir as usize;
        let problem = match kind {
            Delivery::Reliable => {
                let ch = channel.index();
                let expected = inst.recv[d][ch];
                if h.kind != Kind::Reliable as u8 || usize::from(h.channel) != ch {
                    Some(format!(
                        "{side} of session #{idx}: a reliable delivery on channel {ch} carries \
                         kind {} channel {}",
                        h.kind, h.channel
                    ))
                } else if h.seq != expected {
                    Some(format!(
                        "{side} of session #{idx} channel {ch}: received message {} where {} was \
                         next ({})",
                        h.seq,
                        expected,
                        if h.seq < expected {
                            "duplicate"
                        } else {
                            "gap: a message was lost"
                        }
                    ))
                } else {
                    inst.recv[d][ch] += 1;
                    self.reliable_delivered += 1;
                    None
                }
            }
            Delivery::Ordered => {
                let last = inst.ordered_last[d];
                inst.ordered_last[d] = Some(h.seq);
                inst.unreliable_recv[d] += 1;
                self.unreliable_delivered += 1;
                last.filter(|&l| h.seq <= l).map(|l| {
                    format!(
                        "{side} of session #{idx}: ordered message {} after {l}",
                        h.seq
                    )
                })
            }
            _ => {
                inst.unreliable_recv[d] += 1;
                self.unreliable_delivered += 1;
                None
            }
        };
        if let Some(p) = problem {
            self.fail(now, cluster, p);
        }
    }

    /// Judges why one side of an instance ended (`server`: the server side): an established
    /// session that no fault disturbed ends only by its application's close (or, on a tight
    /// server, by a refusal).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn judge_end(
        &mut self,
        now: Instant,
        cluster: &Cluster,
        net: &Network,
        idx: usize,
        server: bool,
        reason: DisconnectReason,
        by_peer: bool,
    ) {
        let inst = &self.ledger.instances[idx];
        if !inst.connected || inst.disturbed {
            return;
        }
        use DisconnectReason as R;
        let ok = match (server, reason, by_peer) {
            // A full server refuses, and does not rebuild from its cookie a session whose
            // half-open state a flood evicted (the client then gives up remapping).
            (_, R::ConnectionRefused | R::UnreachableConnection, _) if cluster.setup.tight => true,
            (false, R::Application, false) => inst.app_closed,
            (true, R::Application, true) => inst.app_closed,
            // The client's Disconnects all lost, or sent from a port the server does not know
            // (a NAT rebinding just before the close); or it came back with a new session id.
            (true, R::Timeout | R::UnacknowledgedTimeout | R::NewConnectionAttempt, _) => {
                inst.app_closed
            }
            _ => false,
        };
        if !ok {
            let side = if server { "server" } else { "client" };
            let path = &net.paths[inst.client];
            let link = path.up.config();
            let msg = format!(
                "{side} side of session #{idx} (client {}, {:?}, opened at {:.1}s) ended with \
                 {reason:?} (by_peer {by_peer}) while its link delivered (loss {}, bursts {}, \
                 delay {:?}, {} NAT rebinds) and no fault explained it",
                inst.client,
                cluster.clients[inst.client].workload,
                (inst.opened - self.start).as_secs_f64(),
                link.loss,
                link.burst.is_some(),
                link.delay,
                path.rebinds,
            );
            self.fail(now, cluster, msg);
        }
    }

    // ----- at every step -----

    /// The server's sessions and half-open sessions stay within their limits.
    pub(crate) fn check_limits(&mut self, now: Instant, cluster: &Cluster) {
        let server = &cluster.server.ep;
        let (len, half) = (server.len(), server.half_open());
        let s = &cluster.setup;
        if half > s.max_half_open || len > s.max_sessions + s.max_half_open {
            let msg = format!(
                "server holds {len} sessions ({half} half-open); limits {} + {}",
                s.max_sessions, s.max_half_open
            );
            self.fail(now, cluster, msg);
        }
    }

    /// Every endpoint's timer set files each session under its current deadline.
    pub(crate) fn check_timers(&mut self, now: Instant, cluster: &Cluster) {
        if let Err(e) = cluster.server.ep.audit_timers() {
            self.fail(now, cluster, format!("server timer set: {e}"));
        }
        for (i, c) in cluster.clients.iter().enumerate() {
            if let Err(e) = c.ep.audit_timers() {
                self.fail(now, cluster, format!("client {i} timer set: {e}"));
            }
        }
    }

    /// Every live session's reliable channels, on both sides, hold no more than the reliable
    /// config allows: messages queued to send, packets received early, a partial message,
    /// messages received and not yet taken (the applications take them as they come).
    pub(crate) fn check_queues(&mut self, now: Instant, cluster: &Cluster) {
        let r = cluster.setup.session.reliable();
        let window = usize::from(r.receive_window);
        let (max_queued, max_message) = (r.max_queued_messages, r.max_message_size);
        let over = |side: String, ep: &Endpoint<u32>, h: SessionHandle| -> Option<String> {
            (0..4u8).find_map(|ch| {
                let channel = Channel::new(ch)?;
                let queued = ep.queued(h, channel)?;
                let b = ep.receive_backlog(h, channel)?;
                (queued > max_queued
                    || b.early_packets > window
                    || b.reassembly_bytes > max_message + 1
                    || b.messages > max_queued
                    || b.bytes > max_message)
                    .then(|| {
                        format!(
                            "{side} channel {ch} holds more than its limits: {queued} messages \
                             queued to send (limit {max_queued}), {b:?} (limits: {window} \
                             early packets, {max_queued} messages, {max_message} bytes)"
                        )
                    })
            })
        };
        let server = &cluster.server;
        let found = server
            .sessions
            .iter()
            .find_map(|(&h, &idx)| over(format!("server session #{idx}"), &server.ep, h))
            .or_else(|| {
                cluster.clients.iter().enumerate().find_map(|(i, c)| {
                    let h = c.handle?;
                    over(format!("client {i}"), &c.ep, h)
                })
            });
        if let Some(msg) = found {
            self.fail(now, cluster, msg);
        }
    }

    /// A long outage of `client`'s path under way until `until`: sessions opened during it are
    /// disturbed too.
    pub(crate) fn mark_dark(&mut self, client: usize, until: Instant) {
        self.dark_marks.push((client, until));
    }

    /// Marks disturbed the sessions of clients whose long outage is still under way.
    pub(crate) fn disturb_dark(&mut self, now: Instant, cluster: &Cluster) {
        self.dark_marks.retain(|&(_, until)| until > now);
        for &(client, _) in &self.dark_marks {
            self.ledger.disturb(cluster.clients[client].instance);
        }
    }

    /// Endpoint counters equal the datagrams the network moved: the server's.
    pub(crate) fn check_server_counters(&mut self, now: Instant, cluster: &Cluster) {
        if let Some(msg) = cluster.server.counters_mismatch() {
            self.fail(now, cluster, msg);
        }
    }

    /// Likewise, client `i`'s.
    pub(crate) fn check_client_counters(&mut self, now: Instant, cluster: &Cluster, i: usize) {
        if let Some(msg) = cluster.clients[i].counters_mismatch(i) {
            self.fail(now, cluster, msg);
        }
    }

    // ----- at the end -----

    /// The checks at the end of a run: `settle_from` is when new traffic and faults stopped,
    /// `end` when the run ended.
    pub(crate) fn check_end(
        &mut self,
        now: Instant,
        cluster: &Cluster,
        settle_from: Instant,
        end: Instant,
    ) {
        self.check_timers(now, cluster);
        self.check_server_counters(now, cluster);
        for i in 0..cluster.clients.len() {
            self.check_client_counters(now, cluster, i);
        }
        for idx in 0..self.ledger.instances.len() {
            if !self.ok() {
                return;
            }
            self.check_instance_end(now, cluster, (settle_from, end), idx);
        }
        self.check_everyone_connected(now, cluster, end);
    }

    /// A session live on both sides has delivered everything and counted it; a session that
    /// ended was reported to both applications; every handshake completed.
    fn check_instance_end(
        &mut self,
        now: Instant,
        cluster: &Cluster,
        (settle_from, end): (Instant, Instant),
        idx: usize,
    ) {
        let inst = &self.ledger.instances[idx];
        let i = inst.client;
        match (inst.client_end, inst.server_end) {
            (None, None) => {
                if !inst.connected || inst.server_handle.is_none() {
                    if inst.opened + Duration::from_secs(30) < end {
                        let msg = format!(
                            "session #{idx} (client {i}) opened at {:.1}s never completed its \
                             handshake",
                            (inst.opened - self.start).as_secs_f64()
                        );
                        self.fail(now, cluster, msg);
                    }
                    return;
                }
                for (d, ch) in (0..2).flat_map(|d| (0..4).map(move |ch| (d, ch))) {
                    if inst.sent[d][ch] != inst.recv[d][ch] {
                        let msg = format!(
                            "session #{idx} (client {i}) is live but {} of {} messages {} on \
                             channel {ch} arrived ({:.0} s after sending stopped)",
                            inst.recv[d][ch],
                            inst.sent[d][ch],
                            if d == 0 { "up" } else { "down" },
                            (end - settle_from).as_secs_f64()
                        );
                        self.fail(now, cluster, msg);
                        return;
                    }
                }
                self.check_session_stats(now, cluster, idx);
            }
            (Some(_), None) | (None, Some(_)) => {
                // One side still holds the session: fine only if it is still being closed.
                // A server session refused or dropped while half-open never reached the
                // server application: there was nobody to tell.
                if inst.connected && inst.server_handle.is_some() {
                    let server = &cluster.server.ep;
                    let server_state = inst
                        .server_handle
                        .and_then(|h| Some((server.state(h)?, server.remote(h)?)));
                    let msg = format!(
                        "session #{idx} (client {i}): only one side was told it ended (client \
                         {:?}, server {:?}, server session {server_state:?}; disturbed {})",
                        inst.client_end, inst.server_end, inst.disturbed
                    );
                    self.fail(now, cluster, msg);
                }
            }
            (Some(_), Some(_)) => {}
        }
    }

    /// Every client that still wants a session has one (a client whose server restarted
    /// learned so and reconnected).
    fn check_everyone_connected(&mut self, now: Instant, cluster: &Cluster, end: Instant) {
        for (i, c) in cluster.clients.iter().enumerate() {
            if !c.retired && !c.live && self.ok() {
                let last = self.ledger.by_client[i]
                    .last()
                    .map(|&x| self.ledger.instances[x].opened);
                if last.is_some_and(|t| t + Duration::from_secs(40) < end) {
                    let msg = format!("client {i} wants a session but has none at the end");
                    self.fail(now, cluster, msg);
                }
            }
        }
    }

    /// Session counters equal the messages the applications sent and received.
    fn check_session_stats(&mut self, now: Instant, cluster: &Cluster, idx: usize) {
        let inst = &self.ledger.instances[idx];
        let c = &cluster.clients[inst.client];
        let (Some(cs), Some(ss)) = (
            c.ep.stats(inst.client_handle),
            inst.server_handle.and_then(|h| cluster.server.ep.stats(h)),
        ) else {
            let msg = format!("session #{idx}: live on both sides but a side has no stats");
            self.fail(now, cluster, msg);
            return;
        };
        let up: u64 = inst.sent[0].iter().sum();
        let down: u64 = inst.sent[1].iter().sum();
        let checks = [
            (
                "client reliable_messages_sent",
                cs.reliable_messages_sent,
                up,
            ),
            (
                "server reliable_messages_received",
                ss.reliable_messages_received,
                up,
            ),
            (
                "server reliable_messages_sent",
                ss.reliable_messages_sent,
                down,
            ),
            (
                "client reliable_messages_received",
                cs.reliable_messages_received,
                down,
            ),
            (
                "client unreliable_sent",
                cs.unreliable_sent,
                inst.unreliable_sent[0],
            ),
            (
                "server unreliable_sent",
                ss.unreliable_sent,
                inst.unreliable_sent[1],
            ),
            (
                "server unreliable_received",
                ss.unreliable_received,
                inst.unreliable_recv[0],
            ),
            (
                "client unreliable_received",
                cs.unreliable_received,
                inst.unreliable_recv[1],
            ),
        ];
        if let Some((what, counted, seen)) = checks.into_iter().find(|c| c.1 != c.2) {
            let msg = format!("session #{idx}: {what} is {counted}; the applications saw {seen}");
            self.fail(now, cluster, msg);
            return;
        }
        if cs.datagrams_sent > c.tx || cs.datagrams_received > c.rx {
            let msg = format!(
                "session #{idx}: the client session counts more datagrams than its endpoint moved"
            );
            self.fail(now, cluster, msg);
        }
        self.reliable_packets_up += cs.reliable_packets_sent;
        self.reliable_packets_down += ss.reliable_packets_sent;
    }
}
