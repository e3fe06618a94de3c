//! `soe ping`: connect, check the RC4 key, send messages one at a time, print each round trip,
//! then a summary.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use soe_tokio::{Channel, Delivery, DisconnectReason};
use tokio::sync::watch;

use crate::client::{Incoming, Opened, Opening, Unsolicited, message, open, seq_of};
use crate::flags::{NotForClients, SessionFlags, parse_size};
use crate::keycheck::{KeyCheck, is_noise};
use crate::out::{self, say};
use crate::serve::{interrupted, parse_seconds};

/// Arguments of `soe ping`.
#[derive(Debug, Args)]
pub(crate) struct PingArgs {
    /// The server's address: `HOST:PORT` or `IP:PORT`.
    #[arg(value_parser = crate::net::parse_addr)]
    addr: SocketAddr,
    /// How many messages to send (0: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N", default_value_t = 10)]
    count: u64,
    /// The size of each message in bytes: 1 to the session's largest message (4 MiB); large
    /// ones travel as fragments.
    #[arg(long, value_name = "B", default_value = "64", value_parser = parse_size)]
    size: usize,
    /// Milliseconds between the start of one round trip and the next.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    interval: u64,
    /// How long to wait for each echo before counting it lost (and for each answer of the key
    /// check), in seconds.
    #[arg(long, value_name = "S", default_value = "3", value_parser = parse_seconds)]
    timeout: Duration,
    #[command(flatten)]
    session: SessionFlags,
    #[command(flatten)]
    not_for_clients: NotForClients,
}

/// Runs the command.
pub(crate) fn run(args: PingArgs) -> Result<ExitCode> {
    crate::block_on(false, ping(args))?
}

async fn ping(args: PingArgs) -> Result<ExitCode> {
    args.not_for_clients.refuse("ping")?;
    let session = args.session.session_config(None)?;
    let key = args.session.rc4_key.is_some();
    let how = Opening {
        port_probe: true,
        rc4_after_first: args.session.rc4_after_first_message,
        key,
        timeout: args.timeout,
        random: crate::client::random_u64(),
    };
    let opened = open(args.addr, session, how)
        .await
        .map_err(|e| anyhow::anyhow!(e.describe(args.addr, None)))?;
    say!(
        "PING {} ({} bytes per message): connected in {:.3} ms",
        args.addr,
        args.size,
        opened.connect_time.as_secs_f64() * 1e3
    );
    if let KeyCheck::Differ(why) = &opened.key {
        close(&opened).await;
        anyhow::bail!("RC4 key mismatch with {}: {why}", args.addr);
    }
    say!(
        "{} ({:.3} ms)",
        opened.key.describe(key),
        opened.check_time.as_secs_f64() * 1e3
    );
    let mut run = Pinging::new(&args, opened.unsolicited)?;
    let stop = interrupted();
    run.rounds(&opened, stop).await;
    let stats = opened.conn.stats().unwrap_or_default();
    close(&opened).await;
    run.summary(&stats);
    if out::gone() {
        return Ok(ExitCode::from(out::GONE_EXIT));
    }
    Ok(if run.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Closes the session and waits (briefly) for the Disconnect to go out.
async fn close(opened: &Opened) {
    opened.conn.close(DisconnectReason::Application);
    let _ = tokio::time::timeout(Duration::from_secs(1), opened.endpoint.wait_idle()).await;
}

/// What one round trip came to.
enum Round {
    /// The echo came back (or was lost, or differed): go on.
    Next,
    /// The session ended, the port closed, Ctrl-C, or stdout went away: stop.
    Stop,
}

/// What a message from the server is to the round waiting for echo `seq`.
enum Reply {
    /// The echo, as sent.
    Echo,
    /// It carries the id of the message sent, but differs.
    Differs,
    /// The echo of an earlier message, whose round gave up on it.
    Late(u64),
    /// Not an echo: the server sent it on its own.
    Unsolicited,
    /// A late message of the key check's.
    Noise,
}

/// The figures of a ping run.
struct Pinging<'a> {
    args: &'a PingArgs,
    /// The random tag in every message's id ([`message`]).
    tag: u64,
    histogram: Histogram<u64>,
    exact: Exact,
    sent: u64,
    received: u64,
    mismatched: u64,
    unsolicited: Unsolicited,
    /// Why the session ended early, if it did.
    ended: Option<String>,
}

impl<'a> Pinging<'a> {
    fn new(args: &'a PingArgs, unsolicited: Unsolicited) -> Result<Self> {
        Ok(Self {
            args,
            tag: crate::client::random_u64(),
            histogram: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .context("histogram bounds")?,
            exact: Exact::default(),
            sent: 0,
            received: 0,
            mismatched: 0,
            unsolicited,
            ended: None,
        })
    }

    /// Sends the messages one at a time, `--interval` apart, until `--count` or `stop`.
    async fn rounds(&mut self, opened: &Opened, mut stop: watch::Receiver<bool>) {
        let interval = Duration::from_millis(self.args.interval);
        let mut seq = 0u64;
        while self.args.count == 0 || seq < self.args.count {
            let round_start = Instant::now();
            if let Round::Stop = self.round(opened, seq, &mut stop).await {
                break;
            }
            seq += 1;
            if (self.args.count != 0 && seq >= self.args.count) || out::gone() {
                break;
            }
            let next = tokio::time::Instant::from_std(round_start + interval);
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                _ = stop.wait_for(|&s| s) => break,
            }
        }
    }

    /// One round trip: send message `seq`, wait for its echo (skipping late echoes of earlier
    /// ones and what the server sends on its own). A closed port ends the ping: the system
    /// reports it to the session's socket as soon as a datagram meets it (or, where it cannot,
    /// a probe asks after a probe period).
    async fn round(
        &mut self,
        opened: &Opened,
        seq: u64,
        stop: &mut watch::Receiver<bool>,
    ) -> Round {
        let (args, conn) = (self.args, &opened.conn);
        let round_start = Instant::now();
        let expected = message(seq, self.tag, args.size);
        if let Err(e) = conn.send(expected.clone()).await {
            self.ended = Some(e.to_string());
            return Round::Stop;
        }
        if seq == 0 && opened.switch_after_first {
            conn.set_encryption(true);
        }
        self.sent += 1;
        let deadline = tokio::time::Instant::from_std(round_start + args.timeout);
        // Reliable messages of the echo's length that were not it: an echo that differs
        // entirely (through another RC4 key, say), or the server's own.
        let mut unmatched_same_length = 0u64;
        loop {
            let reply = tokio::select! {
                reply = tokio::time::timeout_at(deadline, opened.inbox.next()) => reply,
                () = opened.watch.closed() => {
                    let reason = format!("{} stopped listening (ICMP port unreachable)", args.addr);
                    say!("seq={seq}: no echo: {reason}");
                    self.ended = Some(reason);
                    return Round::Stop;
                }
                _ = stop.wait_for(|&s| s) => return Round::Stop,
            };
            let incoming = match reply {
                Err(_) => {
                    let secs = args.timeout.as_secs_f64();
                    let hint = match unmatched_same_length {
                        0 => String::new(),
                        n => format!(
                            " ({n} reliable message(s) of its length came that were not it: an \
                             echo that differs throughout, as through another RC4 key, or the \
                             server's own)"
                        ),
                    };
                    say!("seq={seq}: no echo within {secs:.1} s{hint}");
                    return Round::Next;
                }
                Ok(None) => {
                    let reason = conn
                        .close_reason()
                        .map_or_else(|| "closed".to_owned(), |r| r.to_string());
                    say!("seq={seq}: no echo: the session ended ({reason})");
                    self.ended = Some(reason);
                    return Round::Stop;
                }
                Ok(Some(incoming)) => incoming,
            };
            match self.classify(seq, &expected, &incoming) {
                Reply::Echo => {
                    self.record(seq, incoming.data.len(), round_start.elapsed());
                    return Round::Next;
                }
                Reply::Differs => {
                    self.mismatched += 1;
                    let len = incoming.data.len();
                    say!("seq={seq}: echo differs from what was sent ({len} bytes)");
                    return Round::Next;
                }
                Reply::Late(late) => say!("seq={late}: late echo"),
                Reply::Noise => {}
                Reply::Unsolicited => {
                    if incoming.kind == Delivery::Reliable && incoming.data.len() == expected.len()
                    {
                        unmatched_same_length += 1;
                    }
                }
            }
        }
    }

    /// What a message is to the round waiting for echo `seq` (`expected`): an echo is a
    /// reliable message on channel 0 that carries the id of a message sent; anything else is
    /// the server's own (counted), or the key check's (skipped).
    fn classify(&mut self, seq: u64, expected: &[u8], incoming: &Incoming) -> Reply {
        let data = &incoming.data[..];
        if is_noise(data) {
            return Reply::Noise;
        }
        if incoming.kind != Delivery::Reliable || incoming.channel != Channel::ZERO {
            self.unsolicited.count(incoming.kind);
            return Reply::Unsolicited;
        }
        if data == expected {
            return Reply::Echo;
        }
        match seq_of(data, self.tag) {
            Some(s) if s == seq => Reply::Differs,
            Some(s) if s < seq && data == message(s, self.tag, self.args.size) => Reply::Late(s),
            _ => {
                self.unsolicited.count(incoming.kind);
                Reply::Unsolicited
            }
        }
    }

    /// Counts a verified echo and prints its line.
    fn record(&mut self, seq: u64, len: usize, rtt: Duration) {
        self.received += 1;
        let _ = self.histogram.record((rtt.as_micros() as u64).max(1));
        self.exact.add(rtt);
        say!(
            "{len} bytes from {}: seq={seq} time={:.3} ms",
            self.args.addr,
            rtt.as_secs_f64() * 1e3
        );
    }

    /// Prints the summary.
    fn summary(&self, stats: &soe_tokio::SessionStats) {
        let lost = self.sent.saturating_sub(self.received + self.mismatched);
        say!();
        say!("--- {} soe ping statistics ---", self.args.addr);
        say!(
            "{} sent, {} received, {} mismatched, {:.1}% loss, {} resend(s), {} datagram(s) out, {} in",
            self.sent,
            self.received,
            self.mismatched,
            if self.sent == 0 {
                0.0
            } else {
                lost as f64 * 100.0 / self.sent as f64
            },
            stats.resends,
            stats.datagrams_sent,
            stats.datagrams_received,
        );
        if let (Some(min), Some(max)) = (self.exact.min, self.exact.max) {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            // min, avg and max are exact; p99 comes from the histogram (within 0.1 %), and is
            // never shown outside [min, max].
            let p99 = Duration::from_micros(self.histogram.value_at_quantile(0.99)).clamp(min, max);
            say!(
                "rtt min/avg/max/p99 = {:.3}/{:.3}/{:.3}/{:.3} ms",
                ms(min),
                ms(self.exact.sum) / self.received as f64,
                ms(max),
                ms(p99),
            );
        }
        if let Some(line) = self.unsolicited.describe() {
            say!("{line}");
        }
        if let Some(reason) = &self.ended {
            say!("the session ended: {reason}");
        }
    }

    /// Whether every message sent came back as sent, and the session lasted.
    fn ok(&self) -> bool {
        self.received == self.sent && self.mismatched == 0 && self.ended.is_none()
    }
}

/// Exact round-trip extremes and sum (the histogram's buckets would round them).
#[derive(Debug, Default)]
struct Exact {
    min: Option<Duration>,
    max: Option<Duration>,
    sum: Duration,
}

impl Exact {
    fn add(&mut self, rtt: Duration) {
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        self.max = Some(self.max.map_or(rtt, |m| m.max(rtt)));
        self.sum += rtt;
    }
}
