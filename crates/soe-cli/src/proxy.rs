//! `soe proxy`: a UDP relay between SOE clients and one server that decodes both directions
//! live (in `decode`'s format), can impair the link (loss, delay, jitter, duplication,
//! reordering; seeded), and can record what passed through to a pcap file.
//!
//! Each client address gets its own upstream socket, so the server sees one address per client,
//! as it would without the proxy. Everything else (dissecting, impairing, scheduling, writing
//! the capture) happens on one task, so the output is in the order the proxy saw the datagrams.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use clap::Args;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use soe_dissect::Dissector;
use soe_dissect::capture::PcapWriter;

use crate::decode::{Export, to_stdout};
use crate::flags::DissectFlags;
use crate::serve::parse_seconds;

/// Arguments of `soe proxy`.
#[derive(Debug, Args)]
pub(crate) struct ProxyArgs {
    /// The address clients send to.
    #[arg(long, value_name = "ADDR", value_parser = crate::net::parse_addr)]
    listen: SocketAddr,
    /// The server's address.
    #[arg(long, value_name = "ADDR", value_parser = crate::net::parse_addr)]
    upstream: SocketAddr,
    /// The probability (0 to 1) that a datagram is dropped, each direction.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_probability)]
    loss: f64,
    /// Added one-way delay in milliseconds, each direction.
    #[arg(long, value_name = "MS", default_value_t = 0.0, value_parser = parse_millis)]
    delay: f64,
    /// Uniform jitter in milliseconds around the delay (datagrams may overtake each other).
    #[arg(long, value_name = "MS", default_value_t = 0.0, value_parser = parse_millis)]
    jitter: f64,
    /// The probability that a datagram is sent twice.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_probability)]
    dup: f64,
    /// The probability that a datagram is held back (by the delay plus 10 ms) so that later ones
    /// overtake it.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_probability)]
    reorder: f64,
    /// The seed of the impairments (the same seed and traffic give the same decisions).
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Write every datagram that passed through (after impairment) to this pcap file.
    #[arg(long, value_name = "FILE")]
    write: Option<PathBuf>,
    /// Write every application message relayed to FILE as a pcapng capture Wireshark opens
    /// (exported PDUs, read by the Lua plugin in crates/soe-dissect/wireshark/), a datagram at
    /// a time; `-` writes it to stdout (`| wireshark -k -i -`), the summary going to stderr.
    #[arg(long, value_name = "FILE")]
    export: Option<PathBuf>,
    /// Stop after S seconds; default: run until Ctrl-C.
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Print JSON lines instead of the dissector tree.
    #[arg(long)]
    json: bool,
    /// Print no per-datagram lines, only the summary at the end.
    #[arg(long)]
    quiet: bool,
    /// How to read sessions whose handshake the proxy did not see, and their keys.
    #[command(flatten)]
    dissect: DissectFlags,
    /// The most client addresses relayed at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_clients: usize,
    /// Forget a client after S seconds without traffic.
    #[arg(long, value_name = "S", default_value = "120", value_parser = parse_seconds)]
    idle_timeout: Duration,
}

/// Whether `upstream` is the proxy's own bound address `listen`: the same port and address,
/// or one of them unspecified (`0.0.0.0`, `::`) while the other is an address of this host
/// (a datagram sent to an unspecified address goes to this host).
fn relays_to_itself(listen: SocketAddr, upstream: SocketAddr) -> bool {
    if listen.port() != upstream.port() {
        return false;
    }
    let (l, u) = (listen.ip(), upstream.ip());
    let local = |ip: std::net::IpAddr| {
        ip.is_unspecified() || ip.is_loopback() || std::net::UdpSocket::bind((ip, 0)).is_ok()
    };
    l == u || (l.is_unspecified() && local(u)) || (u.is_unspecified() && local(l))
}

fn parse_probability(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a probability"))?;
    let p = if s.ends_with('%') { p / 100.0 } else { p };
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!(
            "{s} is not a probability between 0 and 1 (or 0% and 100%)"
        ))
    }
}

fn parse_millis(s: &str) -> Result<f64, String> {
    let ms: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
    if ms.is_finite() && (0.0..=60_000.0).contains(&ms) {
        Ok(ms)
    } else {
        Err(format!("{s} ms is out of range (0 to 60000)"))
    }
}

/// The most datagrams waiting for their delay; past it, new ones are dropped (and counted).
const MAX_SCHEDULED: usize = 100_000;

/// Which way a datagram goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    ToServer,
    ToClient,
}

/// What the proxy did with one datagram.
#[derive(Debug, Default, Clone, Copy)]
struct Fate {
    dropped: bool,
    copies: u8,
    delay_ms: f64,
    reordered: bool,
}

/// The seeded impairment decisions of one direction.
struct Impairer {
    rng: SmallRng,
    loss: f64,
    delay: f64,
    jitter: f64,
    dup: f64,
    reorder: f64,
}

impl Impairer {
    fn decide(&mut self) -> Fate {
        if self.loss > 0.0 && self.rng.random_bool(self.loss) {
            return Fate {
                dropped: true,
                ..Fate::default()
            };
        }
        let copies = if self.dup > 0.0 && self.rng.random_bool(self.dup) {
            2
        } else {
            1
        };
        let mut delay = self.delay;
        if self.jitter > 0.0 {
            delay += self.rng.random_range(-self.jitter..=self.jitter);
        }
        let reordered = self.reorder > 0.0 && self.rng.random_bool(self.reorder);
        if reordered {
            delay += self.delay + 10.0;
        }
        Fate {
            dropped: false,
            copies,
            delay_ms: delay.max(0.0),
            reordered,
        }
    }

    fn is_transparent(&self) -> bool {
        self.loss == 0.0 && self.delay == 0.0 && self.jitter == 0.0 && self.reorder == 0.0
    }
}

/// A datagram waiting for its delay.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Scheduled {
    due: Instant,
    order: u64,
    to_server: bool,
    client: SocketAddr,
    data: Vec<u8>,
}

/// Counters per direction.
#[derive(Debug, Default)]
struct Counters {
    received: u64,
    forwarded: u64,
    dropped: u64,
    duplicated: u64,
    reordered: u64,
    overflow: u64,
}

/// One relayed client.
struct Client {
    upstream: Arc<UdpSocket>,
    reader: tokio::task::JoinHandle<()>,
    last_seen: Instant,
}

/// Runs the command.
pub(crate) fn run(args: ProxyArgs) -> Result<ExitCode> {
    crate::block_on(false, proxy(args))?
}

struct Proxy {
    args: ProxyArgs,
    listen: Arc<UdpSocket>,
    clients: HashMap<SocketAddr, Client>,
    from_upstream: mpsc::Sender<(SocketAddr, Vec<u8>)>,
    dissector: Dissector,
    writer: Option<PcapWriter>,
    export: Option<Export>,
    impair: [Impairer; 2],
    counters: [Counters; 2],
    scheduled: BinaryHeap<Reverse<Scheduled>>,
    order: u64,
    started: Instant,
    frames: u64,
}

async fn proxy(args: ProxyArgs) -> Result<ExitCode> {
    let dissect_config = args.dissect.config()?;
    let listen = UdpSocket::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listen.local_addr()?;
    if relays_to_itself(local, args.upstream) {
        anyhow::bail!(
            "--upstream {} is this proxy's own listening address ({local}): it would relay \
             every datagram to itself",
            args.upstream
        );
    }
    let writer = match &args.write {
        Some(path) => Some(PcapWriter::create(path)?),
        None => None,
    };
    let export = match &args.export {
        Some(path) => Some(Export::open(path, true)?),
        None => None,
    };
    eprintln!(
        "soe proxy: listening on {local}, upstream {}, loss {}, delay {} ms, jitter {} ms, dup {}, reorder {}, seed {}",
        args.upstream, args.loss, args.delay, args.jitter, args.dup, args.reorder, args.seed
    );
    let impairer = |salt: u64| Impairer {
        rng: SmallRng::seed_from_u64(args.seed ^ salt),
        loss: args.loss,
        delay: args.delay,
        jitter: args.jitter,
        dup: args.dup,
        reorder: args.reorder,
    };
    let impair = [impairer(0x5eed_0001), impairer(0x5eed_0002)];
    let (tx, mut rx) = mpsc::channel::<(SocketAddr, Vec<u8>)>(4096);
    let mut proxy = Proxy {
        dissector: Dissector::new(dissect_config),
        args,
        listen: Arc::new(listen),
        clients: HashMap::new(),
        from_upstream: tx,
        writer,
        export,
        impair,
        counters: [Counters::default(), Counters::default()],
        scheduled: BinaryHeap::new(),
        order: 0,
        started: Instant::now(),
        frames: 0,
    };

    let stop = crate::serve::stop_signal(proxy.args.duration);
    tokio::pin!(stop);
    let mut housekeeping = tokio::time::interval(Duration::from_secs(1));
    let mut buf = vec![0u8; 65_536];
    let listen = proxy.listen.clone();
    loop {
        let next_due = proxy
            .scheduled
            .peek()
            .map(|Reverse(s)| tokio::time::Instant::from_std(s.due));
        tokio::select! {
            () = &mut stop => break,
            received = listen.recv_from(&mut buf) => match received {
                Ok((len, from)) => {
                    let data = buf.get(..len).unwrap_or_default().to_vec();
                    proxy.on_client_datagram(from, data).await?;
                }
                // ICMP errors (a client gone) surface here on some platforms: keep going.
                Err(e) => tracing::debug!("receive on the listening socket: {e}"),
            },
            Some((client, data)) = rx.recv() => proxy.relay(Way::ToClient, client, data).await?,
            () = async { if let Some(at) = next_due { tokio::time::sleep_until(at).await } else { std::future::pending().await } } => {
                proxy.send_due().await?;
            }
            _ = housekeeping.tick() => proxy.forget_idle(),
        }
    }
    proxy.finish()
}

impl Proxy {
    async fn on_client_datagram(&mut self, from: SocketAddr, data: Vec<u8>) -> Result<()> {
        if !self.clients.contains_key(&from) {
            if self.clients.len() >= self.args.max_clients {
                tracing::warn!(
                    "{from}: dropped, already relaying {} clients",
                    self.clients.len()
                );
                return Ok(());
            }
            let bind: SocketAddr = if self.args.upstream.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let socket = UdpSocket::bind(bind)
                .await
                .context("cannot open an upstream socket")?;
            socket
                .connect(self.args.upstream)
                .await
                .with_context(|| format!("cannot reach {}", self.args.upstream))?;
            let socket = Arc::new(socket);
            let reader = {
                let (socket, tx) = (socket.clone(), self.from_upstream.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65_536];
                    loop {
                        match socket.recv(&mut buf).await {
                            Ok(len) => {
                                let data = buf.get(..len).unwrap_or_default().to_vec();
                                if tx.send((from, data)).await.is_err() {
                                    return;
                                }
                            }
                            // The server's port is closed (ICMP): wait for the next one.
                            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                        }
                    }
                })
            };
            eprintln!("soe proxy: new client {from}");
            self.clients.insert(
                from,
                Client {
                    upstream: socket,
                    reader,
                    last_seen: Instant::now(),
                },
            );
        }
        if let Some(client) = self.clients.get_mut(&from) {
            client.last_seen = Instant::now();
        }
        self.relay(Way::ToServer, from, data).await
    }

    /// Dissects, impairs and forwards (or schedules) one datagram.
    async fn relay(&mut self, way: Way, client: SocketAddr, data: Vec<u8>) -> Result<()> {
        let index = way as usize;
        let (src, dst) = match way {
            Way::ToServer => (client, self.args.upstream),
            Way::ToClient => (self.args.upstream, client),
        };
        let impairer = &mut self.impair[index];
        let transparent = impairer.is_transparent() && impairer.dup == 0.0;
        let fate = impairer.decide();
        let counters = &mut self.counters[index];
        counters.received += 1;
        self.frames += 1;

        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let record = self.dissector.dissect(since_epoch, src, dst, &data);
        if let Some(export) = &mut self.export {
            export.datagram(since_epoch, &record, &self.dissector)?;
        }
        if !self.args.quiet && !to_stdout(self.args.export.as_deref()) {
            let mut out = std::io::stdout().lock();
            if self.args.json {
                let mut value = serde_json::to_value(&record)?;
                if let Value::Object(map) = &mut value {
                    map.entry("type").or_insert_with(|| "datagram".into());
                    map.insert("proxy".into(), fate_json(&fate));
                }
                writeln!(out, "{value}")?;
            } else {
                let mut text = record.render();
                if let Some(note) = fate_note(&fate) {
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&format!("  proxy: {note}\n"));
                }
                out.write_all(text.as_bytes())?;
                if !text.ends_with('\n') {
                    out.write_all(b"\n")?;
                }
            }
            out.flush()?;
        }

        if fate.dropped {
            counters.dropped += 1;
            return Ok(());
        }
        if fate.copies > 1 {
            counters.duplicated += 1;
        }
        if fate.reordered {
            counters.reordered += 1;
        }
        if transparent {
            for _ in 0..fate.copies {
                self.send(way, client, &data).await?;
            }
            return Ok(());
        }
        for _ in 0..fate.copies {
            if self.scheduled.len() >= MAX_SCHEDULED {
                self.counters[index].overflow += 1;
                continue;
            }
            self.order += 1;
            self.scheduled.push(Reverse(Scheduled {
                due: Instant::now() + Duration::from_secs_f64(fate.delay_ms / 1e3),
                order: self.order,
                to_server: way == Way::ToServer,
                client,
                data: data.clone(),
            }));
        }
        Ok(())
    }

    async fn send_due(&mut self) -> Result<()> {
        let now = Instant::now();
        while let Some(Reverse(next)) = self.scheduled.peek() {
            if next.due > now {
                break;
            }
            let Some(Reverse(item)) = self.scheduled.pop() else {
                break;
            };
            let way = if item.to_server {
                Way::ToServer
            } else {
                Way::ToClient
            };
            self.send(way, item.client, &item.data).await?;
        }
        Ok(())
    }

    async fn send(&mut self, way: Way, client: SocketAddr, data: &[u8]) -> Result<()> {
        let (src, dst) = match way {
            Way::ToServer => (client, self.args.upstream),
            Way::ToClient => (self.args.upstream, client),
        };
        let sent = match way {
            Way::ToServer => match self.clients.get(&client) {
                Some(c) => c.upstream.send(data).await.map(|_| ()),
                None => return Ok(()),
            },
            Way::ToClient => self.listen.send_to(data, client).await.map(|_| ()),
        };
        if let Err(e) = sent {
            tracing::debug!("{src} -> {dst}: {e}");
            return Ok(());
        }
        self.counters[way as usize].forwarded += 1;
        if let Some(writer) = &mut self.writer {
            writer.write(SystemTime::now(), src, dst, data)?;
            writer.flush()?;
        }
        Ok(())
    }

    fn forget_idle(&mut self) {
        let idle = self.args.idle_timeout;
        self.clients.retain(|addr, client| {
            let keep = client.last_seen.elapsed() < idle;
            if !keep {
                client.reader.abort();
                eprintln!("soe proxy: forgot idle client {addr}");
            }
            keep
        });
    }

    fn finish(mut self) -> Result<ExitCode> {
        for client in self.clients.values() {
            client.reader.abort();
        }
        if let Some(writer) = &mut self.writer {
            writer.flush()?;
        }
        let flushed = match &mut self.export {
            Some(export) => export.end(&mut self.dissector)?,
            None => self.dissector.flush(),
        };
        // With the export on stdout, the closing records go to stderr.
        let mut out: Box<dyn Write> = if to_stdout(self.args.export.as_deref()) {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        for flush in flushed {
            if self.args.json {
                writeln!(out, "{}", serde_json::to_value(&flush)?)?;
            } else {
                writeln!(out, "{}", flush.render().trim_end())?;
            }
        }
        for summary in self.dissector.summaries() {
            if self.args.json {
                let mut value = serde_json::to_value(&summary)?;
                if let Value::Object(map) = &mut value {
                    map.entry("type").or_insert_with(|| "session".into());
                }
                writeln!(out, "{value}")?;
            } else {
                let text = summary.render();
                writeln!(out, "{}", text.trim_end())?;
            }
        }
        out.flush()?;
        for (way, c) in [
            ("client->server", &self.counters[0]),
            ("server->client", &self.counters[1]),
        ] {
            eprintln!(
                "soe proxy: {way}: {} received, {} forwarded, {} dropped, {} duplicated, {} reordered{}",
                c.received,
                c.forwarded,
                c.dropped,
                c.duplicated,
                c.reordered,
                if c.overflow > 0 {
                    format!(", {} over the queue bound", c.overflow)
                } else {
                    String::new()
                }
            );
        }
        eprintln!(
            "soe proxy: {} datagram(s) in {:.1} s",
            self.frames,
            self.started.elapsed().as_secs_f64()
        );
        Ok(ExitCode::SUCCESS)
    }
}

fn fate_note(fate: &Fate) -> Option<String> {
    if fate.dropped {
        return Some("dropped".to_owned());
    }
    let mut parts = Vec::new();
    if fate.copies > 1 {
        parts.push("duplicated".to_owned());
    }
    if fate.reordered {
        parts.push("held back (reordered)".to_owned());
    }
    if fate.delay_ms > 0.0 {
        parts.push(format!("delayed {:.1} ms", fate.delay_ms));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn fate_json(fate: &Fate) -> Value {
    serde_json::json!({
        "action": if fate.dropped { "dropped" } else { "forwarded" },
        "copies": if fate.dropped { 0 } else { fate.copies },
        "delay_ms": fate.delay_ms,
        "reordered": fate.reordered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        windows,
        ignore = "wine 8 binds 192.0.2.7 (TEST-NET-1), which no interface here has; Windows refuses it"
    )]
    fn a_proxy_is_not_its_own_upstream() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(relays_to_itself(a("127.0.0.1:20043"), a("127.0.0.1:20043")));
        assert!(relays_to_itself(a("0.0.0.0:20043"), a("127.0.0.1:20043")));
        assert!(relays_to_itself(a("127.0.0.1:20043"), a("0.0.0.0:20043")));
        assert!(relays_to_itself(a("[::]:20043"), a("127.0.0.1:20043")));
        assert!(relays_to_itself(a("[::1]:20043"), a("[::1]:20043")));
        // another port, or another host's address on the same port
        assert!(!relays_to_itself(
            a("127.0.0.1:20043"),
            a("127.0.0.1:20042")
        ));
        assert!(!relays_to_itself(a("0.0.0.0:20043"), a("192.0.2.7:20043")));
    }
}
