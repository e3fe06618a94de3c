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
        _ => {
            eprintln!("usage: bench-server peer|udp-tokio|udp-std");
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
