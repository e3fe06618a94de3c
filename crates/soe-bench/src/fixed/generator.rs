//! The load generator: one thread, one readiness poll over every client socket, and (for SOE
//! servers) one sans-I/O `soe_session::Endpoint` holding every client session, keyed by the
//! index of the socket it uses. Its deadlines are served in one pass, so the generator costs a
//! few microseconds per message and keeps its schedule at thousands of sessions, whatever server
//! it faces. Every server under test faces exactly this generator.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use soe_session::{
    DisconnectReason, Endpoint, EndpointConfig, Event, SessionConfig, SessionHandle,
};

use super::{Load, Outcome, Target, Timing, Wire, process_cpu};

/// First byte of a reliable message (never 0: an unreliable SOE payload may not start with it).
pub(super) const RELIABLE: u8 = 0xA5;
/// First byte of an unreliable message.
pub(super) const UNRELIABLE: u8 = 0xB6;
/// kind, session, number, send time.
const HEADER: usize = 1 + 4 + 4 + 8;

/// The message `seq` of `session`, sent `sent_us` after the run's start.
pub(super) fn message(kind: u8, session: u32, seq: u32, sent_us: u64, size: usize) -> Bytes {
    let size = size.max(HEADER);
    let mut m = Vec::with_capacity(size);
    m.push(kind);
    m.extend_from_slice(&session.to_le_bytes());
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend_from_slice(&sent_us.to_le_bytes());
    m.extend((0..size - HEADER).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8));
    Bytes::from(m)
}

/// An echo's header: (kind, session, number, send time).
fn header(data: &[u8]) -> Option<(u8, u32, u32, u64)> {
    let kind = *data.first()?;
    let session = u32::from_le_bytes(data.get(1..5)?.try_into().ok()?);
    let seq = u32::from_le_bytes(data.get(5..9)?.try_into().ok()?);
    let sent = u64::from_le_bytes(data.get(9..17)?.try_into().ok()?);
    Some((kind, session, seq, sent))
}

/// One stream of a session's schedule: every `period`, a message of `size` bytes.
#[derive(Debug, Clone, Copy)]
struct Stream {
    period: Duration,
    size: usize,
    reliable: bool,
}

/// What the receiving side records.
#[derive(Debug, Default)]
pub(super) struct Record {
    /// Round trips (µs) of echoes received inside the window.
    pub(super) rtts: Vec<u32>,
    /// Echoes received inside the window.
    pub(super) in_window: u64,
    /// Echoes that were not what was sent, or came twice or out of order (reliable).
    pub(super) bad: u64,
    pub(super) reliable_received: u64,
    pub(super) unreliable_received: u64,
}

/// The clock of a run and its measured window, as µs since the start.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    start: Instant,
    window: Option<(u64, u64)>,
}

impl Clock {
    fn us(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.start).as_micros()).unwrap_or(u64::MAX)
    }
}

impl Record {
    /// Checks one echo of session `session` against what was sent and records it.
    /// `next_reliable` is the reliable number expected next from this session, where the wire
    /// keeps order (`None`: bare UDP).
    pub(super) fn on_echo(
        &mut self,
        clock: &Clock,
        now: Instant,
        session: u32,
        data: &[u8],
        next_reliable: Option<&mut u32>,
        size_of: impl Fn(u8) -> usize,
    ) {
        let now_us = clock.us(now);
        let Some((kind, from, seq, sent)) = header(data) else {
            self.bad += 1;
            return;
        };
        let expected = message(kind, session, seq, sent, size_of(kind));
        let mut ok = from == session && data == expected.as_ref();
        match kind {
            RELIABLE => {
                if let Some(next) = next_reliable {
                    ok &= seq == *next;
                    *next = seq.wrapping_add(1);
                }
                self.reliable_received += 1;
            }
            UNRELIABLE => self.unreliable_received += 1,
            _ => ok = false,
        }
        if !ok {
            self.bad += 1;
        }
        if clock.window.is_some_and(|(a, b)| (a..b).contains(&now_us)) {
            self.in_window += 1;
            self.rtts
                .push(u32::try_from(now_us.saturating_sub(sent)).unwrap_or(u32::MAX));
        }
    }
}

/// One client: its socket and, for SOE, its session.
#[derive(Debug)]
struct Client {
    socket: UdpSocket,
    session: Option<SessionHandle>,
    /// The handshake completed (always, for bare UDP).
    opened: bool,
    /// Not ended.
    live: bool,
    next_reliable: u32,
    seqs: [u32; 2],
}

/// The generator's whole state.
struct Generator {
    poll: Poll,
    clients: Vec<Client>,
    /// Every client session (SOE), keyed by the index of its client.
    proto: Option<Endpoint<u32>>,
    server: SocketAddr,
    streams: Vec<Stream>,
    clock: Clock,
    record: Record,
    buf: Vec<u8>,
    sent: [u64; 2],
    /// Datagrams the clients sent to the server and received from it (every session).
    datagrams: Datagrams,
    /// Client index of each session.
    by_handle: std::collections::HashMap<SessionHandle, usize>,
    /// Sessions that completed their handshake.
    open: usize,
    /// Sessions that could not be started or ended before they opened.
    failed_to_open: usize,
}

/// Runs `load` against a server already running; see the module documentation.
pub(super) fn run(target: &Target, load: &Load, timing: Timing) -> Result<Outcome, String> {
    let mut g = Generator::new(target, load).map_err(|e| format!("cannot set up: {e}"))?;
    let connected = g.connect(Instant::now() + Duration::from_secs(15));
    if connected == 0 {
        return Err(format!("no session connected to {}", target.label));
    }
    let cpu_of = |pid: Option<u32>| pid.map_or(Duration::ZERO, process_cpu);
    let mut schedule = g.schedule(Instant::now() + Duration::from_millis(20));
    g.clock.start = Instant::now();

    g.drive(&mut schedule, Instant::now() + timing.warm_up);
    let (cpu0, own0, t0) = (
        cpu_of(target.pid),
        process_cpu(std::process::id()),
        Instant::now(),
    );
    g.clock.window = Some((g.clock.us(t0), u64::MAX));
    let datagrams0 = g.datagrams;
    g.drive(&mut schedule, t0 + timing.window);
    let t1 = Instant::now();
    let datagrams = g.datagrams.since(datagrams0);
    g.clock.window = Some((g.clock.us(t0), g.clock.us(t1)));
    let cpu = cpu_of(target.pid).saturating_sub(cpu0);
    let generator_cpu = process_cpu(std::process::id()).saturating_sub(own0);

    // The last echoes: up to 2 s for the reliable ones, nothing new sent.
    let drain_until = Instant::now() + Duration::from_secs(2);
    let mut nothing = BinaryHeap::new();
    while g.record.reliable_received < g.sent[1] && Instant::now() < drain_until {
        g.drive(&mut nothing, Instant::now() + Duration::from_millis(10));
    }
    g.drive(&mut nothing, Instant::now() + Duration::from_millis(50));
    let failed = g.clients.iter().filter(|c| c.opened && !c.live).count();
    let client_view = g.client_view();
    g.close();

    let mut rtts = std::mem::take(&mut g.record.rtts);
    rtts.sort_unstable();
    let pct = |p: f64| {
        rtts.get(((rtts.len() as f64 * p) as usize).min(rtts.len().saturating_sub(1)))
            .map_or(f64::NAN, |v| f64::from(*v))
    };
    Ok(Outcome {
        connected,
        messages: g.record.in_window,
        window: t1.saturating_duration_since(t0),
        cpu,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        reliable_lost: g.sent[1].saturating_sub(g.record.reliable_received),
        unreliable_lost: g.sent[0].saturating_sub(g.record.unreliable_received),
        bad: g.record.bad,
        failed,
        generator_cpu,
        server_received: datagrams.to_server,
        server_sent: datagrams.from_server,
        client_view,
        spread: None,
    })
}

/// Datagrams counted at the clients' sockets.
#[derive(Clone, Copy, Default)]
struct Datagrams {
    /// Sent to the server.
    to_server: u64,
    /// Received from the server.
    from_server: u64,
}

impl Datagrams {
    /// The datagrams counted since `earlier`.
    fn since(self, earlier: Self) -> Self {
        Self {
            to_server: self.to_server.saturating_sub(earlier.to_server),
            from_server: self.from_server.saturating_sub(earlier.from_server),
        }
    }
}

/// One scheduled send: (when, client, stream).
type Due = Reverse<(Instant, usize, usize)>;

impl Generator {
    fn new(target: &Target, load: &Load) -> io::Result<Self> {
        let poll = Poll::new()?;
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut clients = Vec::with_capacity(load.sessions);
        for i in 0..load.sessions {
            let mut socket = UdpSocket::bind(loopback)?;
            poll.registry()
                .register(&mut socket, Token(i), Interest::READABLE)?;
            clients.push(Client {
                socket,
                session: None,
                opened: target.wire == Wire::Udp,
                live: true,
                next_reliable: 0,
                seqs: [0; 2],
            });
        }
        let proto = (target.wire == Wire::Soe).then(|| {
            let session = Arc::new(
                SessionConfig::new(&target.protocol)
                    .with_udp_length(512)
                    .with_connect_timeout(Duration::from_secs(10)),
            );
            Endpoint::new(Arc::new(
                EndpointConfig::client(session).with_max_sessions(load.sessions.max(1)),
            ))
        });
        let streams = load
            .streams_on(target.wire)
            .into_iter()
            .map(|(period, size, reliable)| Stream {
                period,
                size,
                reliable,
            })
            .collect();
        Ok(Self {
            poll,
            clients,
            proto,
            server: target.addr,
            streams,
            clock: Clock {
                start: Instant::now(),
                window: None,
            },
            record: Record::default(),
            buf: Vec::with_capacity(2048),
            sent: [0; 2],
            datagrams: Datagrams::default(),
            by_handle: std::collections::HashMap::new(),
            open: 0,
            failed_to_open: 0,
        })
    }

    /// Opens every session (SOE), at most 64 handshakes in flight; returns how many are open
    /// (every client, for bare UDP).
    fn connect(&mut self, give_up: Instant) -> usize {
        if self.proto.is_none() {
            return self.clients.len();
        }
        let mut started = 0;
        let mut events = Events::with_capacity(1024);
        while Instant::now() < give_up {
            let open = self.open;
            if open + self.failed_to_open >= self.clients.len() {
                break;
            }
            let now = Instant::now();
            while started < self.clients.len() && started < open + self.failed_to_open + 64 {
                if let Some(proto) = self.proto.as_mut() {
                    match proto.connect(now, started as u32) {
                        Ok(h) => {
                            self.clients[started].session = Some(h);
                            self.by_handle.insert(h, started);
                        }
                        Err(_) => self.failed_to_open += 1,
                    }
                }
                started += 1;
            }
            self.flush();
            let _ = self.poll.poll(&mut events, Some(Duration::from_millis(5)));
            for event in &events {
                self.read(event.token().0);
            }
            let now = Instant::now();
            if let Some(proto) = self.proto.as_mut()
                && proto.poll_timeout().is_some_and(|d| d <= now)
            {
                proto.handle_timeout(now);
            }
            self.take_events(now);
        }
        self.flush();
        self.open
    }

    /// Every client's streams, each with its own phase so the load is spread evenly.
    fn schedule(&self, begin: Instant) -> BinaryHeap<Due> {
        let mut heap = BinaryHeap::new();
        let n = self.clients.len().max(1);
        for i in 0..self.clients.len() {
            for (s, stream) in self.streams.iter().enumerate() {
                let phase = stream
                    .period
                    .mul_f64(((i * 7919 + s * 104_729) % n) as f64 / n as f64);
                heap.push(Reverse((begin + phase, i, s)));
            }
        }
        heap
    }

    /// Sends what is due, reads what arrives and serves the session deadlines, until `until`.
    fn drive(&mut self, schedule: &mut BinaryHeap<Due>, until: Instant) {
        let mut events = Events::with_capacity(1024);
        loop {
            let now = Instant::now();
            if now >= until {
                return;
            }
            self.send_due(schedule, now);
            if let Some(proto) = self.proto.as_mut()
                && proto.poll_timeout().is_some_and(|d| d <= now)
            {
                proto.handle_timeout(now);
            }
            self.take_events(now);
            self.flush();
            let mut wake = until;
            if let Some(Reverse((when, _, _))) = schedule.peek() {
                wake = wake.min(*when);
            }
            if let Some(d) = self.proto.as_ref().and_then(Endpoint::poll_timeout) {
                wake = wake.min(d);
            }
            let timeout = wake.saturating_duration_since(Instant::now());
            if self.poll.poll(&mut events, Some(timeout)).is_err() {
                continue;
            }
            for event in &events {
                self.read(event.token().0);
            }
        }
    }

    /// Sends every scheduled message whose time has come.
    fn send_due(&mut self, schedule: &mut BinaryHeap<Due>, now: Instant) {
        while let Some(Reverse((when, i, s))) = schedule.peek().copied() {
            if when > now {
                return;
            }
            schedule.pop();
            let stream = self.streams[s];
            schedule.push(Reverse((when + stream.period, i, s)));
            let client = &mut self.clients[i];
            if !client.live || !client.opened {
                continue;
            }
            let slot = usize::from(stream.reliable);
            let seq = client.seqs[slot];
            let kind = if stream.reliable {
                RELIABLE
            } else {
                UNRELIABLE
            };
            let data = message(kind, i as u32, seq, self.clock.us(now), stream.size);
            let queued = match (&mut self.proto, client.session) {
                (Some(proto), Some(h)) if stream.reliable => {
                    proto.send(h, soe_session::Channel::ZERO, data).is_ok()
                }
                (Some(proto), Some(h)) => proto.send_unreliable(h, data).is_ok(),
                (Some(_), None) => false,
                (None, _) => {
                    let sent = client.socket.send_to(&data, self.server).is_ok();
                    self.datagrams.to_server += u64::from(sent);
                    sent
                }
            };
            if queued {
                client.seqs[slot] = seq.wrapping_add(1);
                self.sent[slot] += 1;
            }
        }
    }

    /// Reads every datagram waiting on client `i`'s socket.
    fn read(&mut self, i: usize) {
        let mut buf = [0u8; 2048];
        loop {
            let Some(client) = self.clients.get_mut(i) else {
                return;
            };
            let Ok((n, from)) = client.socket.recv_from(&mut buf) else {
                return;
            };
            if from != self.server {
                continue;
            }
            self.datagrams.from_server += 1;
            let data = buf.get(..n).unwrap_or_default();
            let now = Instant::now();
            match self.proto.as_mut() {
                Some(proto) => proto.handle_datagram(now, i as u32, data),
                None => {
                    let streams = &self.streams;
                    let size_of = |kind: u8| size_of(streams, kind);
                    self.record
                        .on_echo(&self.clock, now, i as u32, data, None, size_of);
                }
            }
        }
    }

    /// Takes the sessions' events: handshakes counted, echoes checked and recorded, closes
    /// noted.
    fn take_events(&mut self, now: Instant) {
        let Some(proto) = self.proto.as_mut() else {
            return;
        };
        while let Some((h, event)) = proto.poll_event() {
            let Some(&i) = self.by_handle.get(&h) else {
                continue;
            };
            let Some(client) = self.clients.get_mut(i) else {
                continue;
            };
            match event {
                Event::Connected => {
                    client.opened = true;
                    self.open += 1;
                }
                Event::Message { data, .. } => {
                    let streams = &self.streams;
                    self.record.on_echo(
                        &self.clock,
                        now,
                        i as u32,
                        &data,
                        Some(&mut client.next_reliable),
                        |kind| size_of(streams, kind),
                    );
                }
                Event::Closed { .. } => {
                    if !client.opened {
                        self.failed_to_open += 1;
                    }
                    client.live = false;
                }
                _ => {}
            }
        }
    }

    /// Sends every datagram the sessions have ready.
    fn flush(&mut self) {
        let Some(proto) = self.proto.as_mut() else {
            return;
        };
        let now = Instant::now();
        while let Some(t) = proto.poll_transmit(now, &mut self.buf) {
            if let Some(client) = self.clients.get(t.destination as usize) {
                let sent = client
                    .socket
                    .send_to(self.buf.get(..t.len).unwrap_or_default(), self.server)
                    .is_ok();
                self.datagrams.to_server += u64::from(sent);
            }
        }
    }

    /// The clients' sessions' counters in a few words.
    fn client_view(&self) -> String {
        let Some(proto) = self.proto.as_ref() else {
            return String::new();
        };
        let stats: Vec<soe_session::SessionStats> = self
            .clients
            .iter()
            .filter_map(|c| proto.stats(c.session?))
            .collect();
        let mut rtts: Vec<Duration> = stats.iter().filter_map(|s| s.rtt).collect();
        rtts.sort_unstable();
        let sum = |f: fn(&soe_session::SessionStats) -> u64| stats.iter().map(f).sum::<u64>();
        format!(
            "clients: {} resends, {} datagrams sent, {} received, smoothed RTT median {:?} max {:?}",
            sum(|s| s.resends),
            sum(|s| s.datagrams_sent),
            sum(|s| s.datagrams_received),
            rtts.get(rtts.len() / 2).copied().unwrap_or_default(),
            rtts.last().copied().unwrap_or_default(),
        )
    }

    /// Closes every session and sends the Disconnects.
    fn close(&mut self) {
        if let Some(proto) = self.proto.as_mut() {
            proto.close_all(Instant::now(), DisconnectReason::Application);
        }
        self.flush();
    }
}

/// The size of the stream that sends messages of `kind`.
fn size_of(streams: &[Stream], kind: u8) -> usize {
    let reliable = kind == RELIABLE;
    streams
        .iter()
        .find(|s| s.reliable == reliable)
        .map_or(0, |s| s.size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_checked_against_what_was_sent() {
        let clock = Clock {
            start: Instant::now(),
            window: Some((0, u64::MAX)),
        };
        let mut record = Record::default();
        let size_of = |_| 100;
        let mut next = 0;
        let now = Instant::now();
        let good = message(RELIABLE, 3, 0, 0, 100);
        record.on_echo(&clock, now, 3, &good, Some(&mut next), size_of);
        assert_eq!((record.bad, record.in_window), (0, 1));
        // Another session's message, a changed byte, a repeat: each counted bad.
        record.on_echo(
            &clock,
            now,
            4,
            &message(RELIABLE, 3, 1, 0, 100),
            Some(&mut next),
            size_of,
        );
        let mut changed = message(RELIABLE, 3, 2, 0, 100).to_vec();
        changed[50] ^= 1;
        record.on_echo(&clock, now, 3, &changed, Some(&mut next), size_of);
        record.on_echo(&clock, now, 3, &good, Some(&mut next), size_of);
        assert_eq!(record.bad, 3);
    }
}
