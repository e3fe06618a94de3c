//! `bench-server`: the echo servers the fixed-load report measures beside `soe serve`, each in
//! a process of its own so that its CPU time can be read apart from the load generator's.
//!
//! ```text
//! bench-server peer        soe-protocol 2.3.0's tokio server, echoing each message on the
//!                          channel it came on (reliable or unreliable)
//! bench-server udp-tokio   bare tokio UDP: one recv_from and one send_to per datagram
//! bench-server udp-std     bare std UDP: a blocking loop, one recv_from and one send_to per
//!                          datagram
//! ```
//!
//! Each binds 127.0.0.1 on a free port, prints one line `listening 127.0.0.1:PORT` on stdout once
//! it is ready, and runs until its standard input closes (so it never outlives the report that
//! started it) or it is killed.

#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

use std::io::{BufRead, Write};
use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::Duration;

use soe_bench::echo::PEER_TICK;
use soe_bench::inmem::{Mode, peer_config};
use soe_protocol::{SocketEvent, TokioSoeServer};

fn main() -> ExitCode {
    let which = std::env::args().nth(1).unwrap_or_default();
    // The server ends when the parent goes: its end of our stdin closes.
    std::thread::spawn(|| {
        let mut line = String::new();
        while std::io::stdin()
            .lock()
            .read_line(&mut line)
            .is_ok_and(|n| n > 0)
        {
            line.clear();
        }
        std::process::exit(0);
    });
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let result = match which.as_str() {
        "peer" => peer(loopback),
        "udp-tokio" => udp_tokio(loopback),
        "udp-std" => udp_std(loopback),
        "soe-loop" => soe_loop(loopback),
        _ => {
            eprintln!("usage: bench-server peer|udp-tokio|udp-std|soe-loop");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-server {which}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Tells the parent where we listen.
fn announce(addr: SocketAddr) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening {addr}")?;
    out.flush()
}

fn tokio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// soe-protocol 2.3.0's server, echoing on the channel each message came on.
fn peer(addr: SocketAddr) -> std::io::Result<()> {
    tokio_runtime()?.block_on(async {
        let mut config = peer_config(Mode::Plain, 1);
        // Idle clients of a fixed-load run must not be dropped between their messages.
        config.default_session_params.inactivity_timeout = Duration::from_secs(3600);
        let mut server = TokioSoeServer::bind(addr, config, PEER_TICK)
            .await
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        announce(server.local_addr())?;
        let handle = server.handle();
        while let Some(event) = server.recv_event().await {
            if let SocketEvent::DataReceived {
                remote,
                data,
                channel,
            } = event
            {
                handle.enqueue_data_on(remote, data, channel);
            }
        }
        Ok(())
    })
}

/// Bare tokio UDP: one `recv_from` and one `send_to` per datagram.
fn udp_tokio(addr: SocketAddr) -> std::io::Result<()> {
    tokio_runtime()?.block_on(async {
        let socket = tokio::net::UdpSocket::bind(addr).await?;
        announce(socket.local_addr()?)?;
        let mut buf = vec![0u8; 65_536];
        loop {
            let (n, from) = socket.recv_from(&mut buf).await?;
            let Some(datagram) = buf.get(..n) else {
                continue;
            };
            // A send that fails loses one datagram, as UDP may; the echo goes on.
            let _ = socket.send_to(datagram, from).await;
        }
    })
}

/// Bare std UDP: a blocking loop, one `recv_from` and one `send_to` per datagram.
fn udp_std(addr: SocketAddr) -> std::io::Result<()> {
    let socket = UdpSocket::bind(addr)?;
    announce(socket.local_addr()?)?;
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = socket.recv_from(&mut buf)?;
        let Some(datagram) = buf.get(..n) else {
            continue;
        };
        let _ = socket.send_to(datagram, from);
    }
}

/// Our stack with no runtime at all: the sans-I/O endpoint driven by one thread's readiness
/// loop (mio), batched receives and sends, echoing each message the way it came. The floor of
/// what the protocol costs on this machine, for comparison with `soe serve`.
fn soe_loop(addr: SocketAddr) -> std::io::Result<()> {
    use std::sync::Arc;
    use std::time::Instant;

    use mio::{Events, Interest, Poll, Token};
    use soe_session::{Delivery, EndpointConfig, Event, SessionConfig};

    let socket = soe_runtime::SocketConfig::default().bind(addr)?;
    socket.set_nonblocking(true)?;
    let state = soe_runtime::udp::UdpSocketState::new((&socket).into())?;
    announce(socket.local_addr()?)?;
    let mut io = mio::net::UdpSocket::from_std(socket.try_clone()?);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut io, Token(0), Interest::READABLE)?;
    let session = Arc::new(SessionConfig::new(PROTOCOL).with_udp_length(512));
    let mut proto = soe_session::Endpoint::<SocketAddr>::new(Arc::new(
        EndpointConfig::server(session).with_max_sessions(100_000),
    ));
    let mut events = Events::with_capacity(64);
    const SLOTS: usize = 32;
    let mut bufs = vec![[0u8; 2048]; SLOTS];
    let mut metas = [soe_runtime::udp::RecvMeta::default(); SLOTS];
    let mut tx = Vec::with_capacity(2048);
    let mut batch = Vec::with_capacity(64 * 1024);
    let mut entries: Vec<soe_runtime::Outgoing> = Vec::new();
    loop {
        let timeout = proto
            .poll_timeout()
            .map(|d| d.saturating_duration_since(Instant::now()));
        poll.poll(&mut events, timeout)?;
        loop {
            let mut slices: Vec<std::io::IoSliceMut<'_>> = bufs
                .iter_mut()
                .map(|b| std::io::IoSliceMut::new(&mut b[..]))
                .collect();
            let Ok(n) = state.recv((&socket).into(), &mut slices, &mut metas) else {
                break;
            };
            let now = Instant::now();
            for (meta, buf) in metas.iter().zip(bufs.iter()).take(n) {
                proto.handle_datagram(now, meta.addr, &buf[..meta.len]);
            }
            if n < SLOTS {
                break;
            }
        }
        let now = Instant::now();
        if proto.poll_timeout().is_some_and(|d| d <= now) {
            proto.handle_timeout(now);
        }
        while let Some((h, event)) = proto.poll_event() {
            if let Event::Message {
                channel,
                data,
                kind,
                ..
            } = event
            {
                let _ = match kind {
                    Delivery::Reliable => proto.send(h, channel, data),
                    _ => proto.send_unreliable(h, data),
                };
            }
        }
        loop {
            batch.clear();
            entries.clear();
            while entries.len() < 32 {
                let Some(t) = proto.poll_transmit(now, &mut tx) else {
                    break;
                };
                entries.push(soe_runtime::Outgoing {
                    destination: t.destination,
                    offset: batch.len(),
                    len: t.len,
                    segment_size: t.len,
                });
                batch.extend_from_slice(&tx[..t.len]);
            }
            if entries.is_empty() {
                break;
            }
            let mut at = 0;
            while at < entries.len() {
                match soe_runtime::socket::send_many(&socket, &batch, &entries[at..]) {
                    Ok(0) | Err(_) => at += 1,
                    Ok(k) => at += k,
                }
            }
        }
    }
}

/// The application protocol of the SOE servers here.
const PROTOCOL: &str = soe_bench::inmem::PROTO;
