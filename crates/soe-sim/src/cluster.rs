//! The cluster: one server endpoint and its client endpoints, with what each application
//! remembers of its sessions, and the configs the run drew from its seed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use soe_session::{CrcLength, Endpoint, EndpointConfig, SessionConfig, SessionHandle, SplitMix64};

use crate::network::chance;
use crate::options::{Options, Plant};
use crate::workload::Workload;

/// The server's address.
pub(crate) const SERVER: u32 = 0;
/// The application protocol every session speaks.
pub(crate) const PROTOCOL: &str = "SimProto_3";

/// Configs shared by a run.
#[derive(Debug)]
pub(crate) struct Setup {
    pub(crate) session: Arc<SessionConfig>,
    pub(crate) max_sessions: usize,
    pub(crate) max_half_open: usize,
    /// The session limit is below the number of clients.
    pub(crate) tight: bool,
    plant: Option<Plant>,
}

impl Setup {
    /// Draws the session config and the server's limits for `clients` clients.
    fn draw(rng: &mut SplitMix64, opts: &Options, clients: usize) -> Self {
        let compression = chance(rng, 0.5);
        let encrypted = chance(rng, 0.25);
        // CRC-32 (4 bytes): the simulation forges datagrams by the thousand (replays into other
        // sessions, spoofed garbage); with a 16-bit CRC one in 65,536 passes, which is a
        // property of the CRC length and not of the state machines under test.
        //
        // Heartbeats and timeouts are the defaults. (The heartbeat's default was 25 s, until
        // this simulation showed that it left an idle session five one-second tries before the
        // 30 s idle timeout: at 30 % loss each way, 3.5 % of idle stretches ended the session,
        // which the invariant "no session dies while its link delivers" rightly rejected. The
        // default is now 10 s: twenty tries.)
        let mut session = SessionConfig::new(PROTOCOL)
            .with_crc_length(CrcLength::FOUR)
            .with_compression(compression);
        if encrypted {
            let key = bytes::Bytes::from_static(
                b"\x17\xbd\x08\x6b\x1b\x94\xf0\x2f\xf0\xec\x53\xd7\x63\x58\x9b\x5f",
            );
            session = session.clone().with_encryption_key(key).unwrap_or(session);
        }
        let tight = opts.faults && chance(rng, 0.1);
        let max_sessions = if tight {
            (clients * 3 / 4).max(1)
        } else {
            clients + 16
        };
        let max_half_open = if opts.faults && chance(rng, 0.3) {
            4
        } else {
            64
        };
        Self {
            session: Arc::new(session),
            max_sessions,
            max_half_open,
            tight,
            plant: opts.plant,
        }
    }

    /// The server endpoint's config. Under [`Plant::UnboundedQueue`] its sessions are built
    /// with a send-queue limit far above the configured one (the checks still hold them to the
    /// configured one): the planted bug is a limit the code does not enforce.
    fn server_config(&self, seed: u64) -> Arc<EndpointConfig> {
        let mut session = self.session.clone();
        if self.plant == Some(Plant::UnboundedQueue) {
            let loose = (**session.reliable())
                .clone()
                .with_max_queued_messages(session.reliable().max_queued_messages * 64);
            if let Ok(c) = (*session).clone().with_reliable(Arc::new(loose)) {
                session = Arc::new(c);
            }
        }
        Arc::new(
            EndpointConfig::server(session)
                .with_max_sessions(self.max_sessions)
                .with_max_half_open(self.max_half_open)
                .with_rng_seed(seed)
                .with_secret(u128::from(seed)),
        )
    }
}

/// The server: its endpoint (replaced on a restart) and what its application knows.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) ep: Endpoint<u32>,
    /// Restarts so far.
    restarts: u64,
    /// Datagrams taken from / handed to the current endpoint.
    pub(crate) tx: u64,
    pub(crate) rx: u64,
    /// The instance (see [`crate::auditor::Ledger`]) of each session the application was told of.
    pub(crate) sessions: HashMap<SessionHandle, usize>,
}

impl Server {
    /// Hands the endpoint a datagram from `from`.
    pub(crate) fn receive(&mut self, now: Instant, from: u32, datagram: &[u8]) {
        self.rx += 1;
        self.ep.handle_datagram(now, from, datagram);
    }

    /// Whether the endpoint's own counters agree with what it handed over; the finding if not.
    pub(crate) fn counters_mismatch(&self) -> Option<String> {
        let s = self.ep.endpoint_stats();
        (s.datagrams_sent != self.tx || s.datagrams_received != self.rx).then(|| {
            format!(
                "server: endpoint counts {} sent / {} received; the network saw {} / {}",
                s.datagrams_sent, s.datagrams_received, self.tx, self.rx
            )
        })
    }
}

/// One client: its endpoint (replaced when it vanishes) and its application.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) ep: Endpoint<u32>,
    /// Endpoints this client had before the current one.
    ep_count: u64,
    pub(crate) workload: Workload,
    /// The application's session and its instance.
    pub(crate) handle: Option<SessionHandle>,
    pub(crate) instance: Option<usize>,
    /// Connected, and sending its workload.
    pub(crate) live: bool,
    /// Wants no session any more.
    pub(crate) retired: bool,
    pub(crate) reconnect_at: Option<Instant>,
    pub(crate) next_tick: Option<Instant>,
    /// Datagrams taken from / handed to the current endpoint.
    pub(crate) tx: u64,
    pub(crate) rx: u64,
}

impl Client {
    /// Whether the endpoint's own counters agree with what it handed over; the finding if not.
    pub(crate) fn counters_mismatch(&self, i: usize) -> Option<String> {
        let s = self.ep.endpoint_stats();
        (s.datagrams_sent != self.tx || s.datagrams_received != self.rx).then(|| {
            format!(
                "client {i}: endpoint counts {} sent / {} received; the network saw {} / {}",
                s.datagrams_sent, s.datagrams_received, self.tx, self.rx
            )
        })
    }

    /// The client's own deadlines: its endpoint's and its application's.
    pub(crate) fn deadlines(&self) -> [Option<Instant>; 3] {
        [self.ep.poll_timeout(), self.next_tick, self.reconnect_at]
    }
}

/// The server and its clients.
#[derive(Debug)]
pub(crate) struct Cluster {
    seed: u64,
    pub(crate) setup: Setup,
    pub(crate) server: Server,
    pub(crate) clients: Vec<Client>,
}

impl Cluster {
    /// Draws the configs and the clients' workloads (the network draws each client's path
    /// in between: see [`crate::world`]). The clients are added with [`Cluster::add_client`].
    pub(crate) fn new(rng: &mut SplitMix64, opts: &Options, seed: u64, clients: usize) -> Self {
        let setup = Setup::draw(rng, opts, clients);
        let server = Server {
            ep: Endpoint::new(setup.server_config(seed ^ 0x5E5E)),
            restarts: 0,
            tx: 0,
            rx: 0,
            sessions: HashMap::new(),
        };
        Self {
            seed,
            setup,
            server,
            clients: Vec::with_capacity(clients),
        }
    }

    fn client_endpoint(&self, i: usize, count: u64) -> Endpoint<u32> {
        let cfg = EndpointConfig::client(self.setup.session.clone())
            .with_rng_seed(self.seed ^ ((i as u64) << 20) ^ (count << 44) ^ 0xC1C1);
        Endpoint::new(Arc::new(cfg))
    }

    /// Adds the next client, with `workload`.
    pub(crate) fn add_client(&mut self, workload: Workload) {
        let ep = self.client_endpoint(self.clients.len(), 0);
        self.clients.push(Client {
            ep,
            ep_count: 0,
            workload,
            handle: None,
            instance: None,
            live: false,
            retired: false,
            reconnect_at: None,
            next_tick: None,
            tx: 0,
            rx: 0,
        });
    }

    /// Client `i`'s application closes its session; returns the instance closed, if any.
    pub(crate) fn close(&mut self, now: Instant, i: usize, retire: bool) -> Option<usize> {
        let c = &mut self.clients[i];
        c.retired = retire;
        let (h, idx) = (c.handle?, c.instance?);
        c.ep.close(now, h, soe_session::DisconnectReason::Application);
        c.next_tick = None;
        c.live = false;
        Some(idx)
    }

    /// Client `i` vanishes without a word: a new endpoint, and (unless `retire`) a new
    /// session after `back`. Returns the instance it abandoned, if any.
    pub(crate) fn vanish(
        &mut self,
        now: Instant,
        i: usize,
        retire: bool,
        back: Duration,
    ) -> Option<usize> {
        let count = self.clients[i].ep_count + 1;
        let ep = self.client_endpoint(i, count);
        let c = &mut self.clients[i];
        c.ep = ep;
        c.ep_count = count;
        c.tx = 0;
        c.rx = 0;
        c.live = false;
        c.next_tick = None;
        c.handle = None;
        c.retired = retire;
        c.reconnect_at = (!retire).then_some(now + back);
        c.instance.take()
    }

    /// Client `i` learns its session ended; it reconnects after `back`, if given (none for a
    /// retired client).
    pub(crate) fn ended(&mut self, now: Instant, i: usize, back: Option<Duration>) {
        let c = &mut self.clients[i];
        c.handle = None;
        c.instance = None;
        c.live = false;
        c.next_tick = None;
        if let Some(back) = back {
            c.reconnect_at = Some(now + back);
        }
    }

    /// The server restarts: a new endpoint, every session lost.
    pub(crate) fn restart_server(&mut self) {
        let s = &mut self.server;
        s.restarts += 1;
        s.ep = Endpoint::new(
            self.setup
                .server_config(self.seed ^ 0x5E5E ^ (s.restarts << 32)),
        );
        s.tx = 0;
        s.rx = 0;
        s.sessions.clear();
    }

    /// What a violation report adds about the run's configs and the server's flood counters.
    pub(crate) fn context(&self) -> String {
        let s = &self.setup.session;
        let e = self.server.ep.endpoint_stats();
        format!(
            "compression {}, rc4 {}; server limits {} sessions, {} half-open; {} half-open \
             evicted, {} recovered, {} remaps, {} requests rate-limited, {} replies dropped",
            s.compression(),
            s.encryption_key().is_some(),
            self.setup.max_sessions,
            self.setup.max_half_open,
            e.half_open_evicted,
            e.recovered,
            e.remaps,
            e.requests_rate_limited,
            e.replies_dropped,
        )
    }
}
