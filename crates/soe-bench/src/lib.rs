//! Side-by-side performance report: our SOE stack, soe-protocol 2.3.0 (the peer) and the
//! machine's own limits, on identical workloads in one process and one run.
//!
//! [`run_all`] measures everything and returns the report as a `Vec<`[`Row`]`>`; the
//! [`report`] module turns rows into a terminal table, a markdown page (with
//! [`PageInfo::extra_sections`], the hook other reports append to) and an SVG chart. The
//! `compare` binary wires it together.
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

pub mod echo;
pub mod fixed;
pub mod inmem;
pub mod limits;
pub mod recorder;
pub mod report;
pub mod scale;

use std::alloc::System;
use std::time::Duration;

use stats_alloc::StatsAlloc;

pub use report::{Baseline, Better, PageInfo, Row, Target, markdown_page, svg_chart, text_table};

/// How big a run is.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Messages per in-memory run.
    pub inmem_messages: u64,
    /// Measured time per loopback echo run.
    pub echo_time: Duration,
    /// Sessions in the scale runs.
    pub scale_sessions: u32,
    /// Measured time per primitive and per flood.
    pub primitive_time: Duration,
    /// Sessions in the flight recorder's runs (one run, on and off, per number).
    pub recorder_sessions: [u32; 2],
    /// Measured batches each way in the flight recorder's runs.
    pub recorder_batches: usize,
}

impl Sizes {
    /// The full report (a few minutes).
    pub const FULL: Self = Self {
        inmem_messages: 200_000,
        echo_time: Duration::from_secs(3),
        scale_sessions: 100_000,
        primitive_time: Duration::from_millis(500),
        recorder_sessions: [500, 2000],
        recorder_batches: 9,
    };
    /// `--quick`: the same workloads, small (well under a minute).
    pub const QUICK: Self = Self {
        inmem_messages: 10_000,
        echo_time: Duration::from_millis(400),
        scale_sessions: 10_000,
        primitive_time: Duration::from_millis(100),
        recorder_sessions: [100, 500],
        recorder_batches: 9,
    };
    /// Tiny: for tests that only check every workload works.
    pub const TINY: Self = Self {
        inmem_messages: 200,
        echo_time: Duration::from_millis(100),
        scale_sessions: 200,
        primitive_time: Duration::from_millis(10),
        recorder_sessions: [4, 16],
        recorder_batches: 2,
    };
}

/// Payload bytes per in-memory message size, in MB/s (1e6 bytes).
fn mbps(per_sec: f64, size: usize) -> f64 {
    per_sec * size as f64 / 1e6
}

/// Runs every workload and returns the rows, printing progress to stderr. `alloc` must be the
/// process's global allocator (the memory rows count its bytes).
///
/// The fixed-load section ([`fixed`]) runs servers in processes of their own and is run apart,
/// by [`fixed::run`].
///
/// # Panics
///
/// If a workload of ours fails (a message lost or corrupted, a socket that cannot be bound).
pub fn run_all(sizes: Sizes, alloc: &'static StatsAlloc<System>) -> Vec<Row> {
    let mut rows = Vec::new();
    // The limits first: they are the yardsticks.
    let yardsticks = primitive_rows(&mut rows, sizes);
    let ceiling_small = ceiling_rows(&mut rows, sizes);
    in_memory_rows(&mut rows, sizes, yardsticks.rc4);
    echo_rows(&mut rows, sizes, alloc, ceiling_small);
    scale_rows(&mut rows, sizes, alloc);
    recorder::rows(
        &mut rows,
        alloc,
        &sizes.recorder_sessions,
        sizes.recorder_batches,
    );
    rows
}

/// Progress on stderr.
fn say(what: &str) {
    eprintln!("soe-bench: {what}");
}

/// The primitives' own speeds, kept for the rows that compare with them.
struct Yardsticks {
    /// RC4 keystream, bytes per second.
    rc4: f64,
}

/// CRC-32, RC4 and our compressed seal against a one-shot deflate.
fn primitive_rows(rows: &mut Vec<Row>, sizes: Sizes) -> Yardsticks {
    say("primitives");
    let t = sizes.primitive_time;
    let crc = limits::crc32(t);
    let rc4 = limits::rc4(t);
    let deflate = limits::deflate_512(t);
    let seal = limits::compressed_seal_512(t);
    const S: &str = "Primitives";
    rows.push(Row::new(
        S,
        "SOE CRC-32 (crc32fast), 512 B",
        crc / 1e6,
        "MB/s",
        Better::Higher,
    ));
    rows.push(Row::new(
        S,
        "RC4 keystream, 4 KiB",
        rc4 / 1e6,
        "MB/s",
        Better::Higher,
    ));
    rows.push(
        Row::new(
            S,
            "compressed seal, 512 B (ours)",
            seal * 1e6,
            "µs",
            Better::Lower,
        )
        .vs_limit(deflate * 1e6)
        .with_target(Target::RatioAtMost(0.1))
        .with_note(
            "limit: miniz_oxide one-shot deflate of the same body, measured in the same run \
             (our encoder keeps no per-packet state to set up)",
        ),
    );

    Yardsticks { rc4 }
}

/// The loopback datagram flood ceilings; returns the 512 B one, datagrams per second.
fn ceiling_rows(rows: &mut Vec<Row>, sizes: Sizes) -> f64 {
    let t = sizes.primitive_time;
    say("datagram ceiling");
    let ceiling_4k = limits::datagram_ceiling(4096, t * 4);
    let ceiling_small = limits::datagram_ceiling(512, t * 4);
    const L: &str = "Loopback limits";
    rows.push(Row::new(
        L,
        "datagram flood, 512 B (quinn-udp batched send)",
        ceiling_small,
        "dgram/s",
        Better::Higher,
    ));
    rows.push(Row::new(
        L,
        "datagram flood, 4 KiB (quinn-udp batched send)",
        ceiling_4k,
        "dgram/s",
        Better::Higher,
    ));

    ceiling_small
}

/// An in-memory session pair, ours and the peer's, per size and mode.
fn in_memory_rows(rows: &mut Vec<Row>, sizes: Sizes, rc4: f64) {
    const M: &str = "In-memory session pair (one way)";
    for size in [32usize, 400, 4000] {
        for mode in inmem::Mode::ALL {
            say(&format!("in memory {size} B {}", mode.label()));
            let n = if size >= 4000 {
                sizes.inmem_messages / 4
            } else {
                sizes.inmem_messages
            };
            let ours = inmem::ours(size, n, mode);
            let peer = inmem::peer(size, n / 4, mode);
            let (o, p, unit) = if size == 32 {
                (ours.per_sec(), peer.map(|p| p.per_sec()), "msg/s")
            } else {
                (
                    mbps(ours.per_sec(), size),
                    peer.map(|p| mbps(p.per_sec(), size)),
                    "MB/s",
                )
            };
            let mut row = Row::new(
                M,
                &format!("{size} B, {}", mode.label()),
                o,
                unit,
                Better::Higher,
            )
            .vs_peer(p);
            if peer.is_none() {
                row = row.with_note("peer stalled or closed");
            }
            if size == 32 && mode == inmem::Mode::Plain {
                row = row.with_target(Target::RatioAtLeast(10.0)).with_note(
                    "in memory the harness runs the peer's tick every round, so its 2 ms tick \
                     (which bounds it on a network) does not limit it here",
                );
            }
            if size == 4000 && mode == inmem::Mode::Plain {
                row = row.with_target(Target::AtLeast(1000.0));
            }
            if size == 4000 && mode == inmem::Mode::Rc4 {
                // RC4 bulk against RC4's own speed.
                rows.push(row);
                row = Row::new(
                    M,
                    "4000 B, RC4 vs half the RC4 keystream speed",
                    o,
                    "MB/s",
                    Better::Higher,
                )
                // One thread both encrypts (sender) and decrypts (receiver) every byte, so the
                // keystream's own speed allows half of it.
                .vs_limit(rc4 / 2e6)
                .with_target(Target::RatioAtLeast(0.8))
                .with_note("the pair encrypts and decrypts each byte on one thread");
            }
            rows.push(row);
        }
    }
}

/// An echo workload of the loopback rows.
fn echo_workload(
    sizes: Sizes,
    sessions: usize,
    outstanding: usize,
    size: usize,
    compression: bool,
) -> echo::Workload {
    echo::Workload {
        sessions,
        outstanding,
        size,
        duration: sizes.echo_time,
        compression,
        alloc: None,
    }
}

/// Why a peer's run does not count (sessions that did not connect or failed), if it does not.
fn collapsed(o: &echo::EchoOutcome, sessions: usize) -> Option<String> {
    if o.connected < sessions || o.failed > 0 || o.echoes == 0 {
        Some(format!(
            "peer: {} of {sessions} sessions connected, {} failed during the run",
            o.connected, o.failed
        ))
    } else {
        None
    }
}

/// The outcome, when the run counts.
fn sound(o: &echo::EchoOutcome, sessions: usize) -> Option<echo::EchoOutcome> {
    collapsed(o, sessions).is_none().then_some(o.clone())
}

/// Loopback UDP echoes at saturation: ours, the peer's and bare UDP, in one runtime.
fn echo_rows(
    rows: &mut Vec<Row>,
    sizes: Sizes,
    alloc: &'static StatsAlloc<System>,
    ceiling_small: f64,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    echo_latency_rows(rows, sizes, &rt);
    echo_saturation_rows(rows, sizes, &rt);
    echo_allocation_rows(rows, sizes, alloc, &rt);
    echo_bulk_rows(rows, sizes, ceiling_small, &rt);
}

/// Section of the loopback echo rows.
const E: &str = "Loopback UDP echo";

/// One message in flight: the round trip, against the peer and bare tokio UDP.
fn echo_latency_rows(rows: &mut Vec<Row>, sizes: Sizes, rt: &tokio::runtime::Runtime) {
    say("echo 1x1 64 B");
    let (o, p, r) = rt.block_on(async {
        let w = echo_workload(sizes, 1, 1, 64, false);
        (echo::ours(w).await, echo::peer(w).await, echo::raw(w).await)
    });
    rows.push(
        Row::new(
            E,
            "1×1, 64 B: round trip p50 vs peer",
            o.p50_us,
            "µs",
            Better::Lower,
        )
        .vs_peer(sound(&p, 1).map(|p| p.p50_us)),
    );
    rows.push(
        Row::new(
            E,
            "1×1, 64 B: round trip p50 vs bare tokio UDP",
            o.p50_us,
            "µs",
            Better::Lower,
        )
        .vs_limit(r.p50_us)
        .with_target(Target::RatioAtMost(1.5))
        .with_note("single message in flight: no batching to gain from"),
    );
}

/// 64 sessions × 16 in flight: echoes per second, latency, drops, compression.
fn echo_saturation_rows(rows: &mut Vec<Row>, sizes: Sizes, rt: &tokio::runtime::Runtime) {
    say("echo 64x16 64 B");
    let (o, p, r, oz) = rt.block_on(async {
        let w0 = echo_workload(sizes, 64, 16, 64, false);
        (
            echo::ours(w0).await,
            echo::peer(w0).await,
            echo::raw(w0).await,
            echo::ours(echo_workload(sizes, 64, 16, 64, true)).await,
        )
    });
    let pnote = collapsed(&p, 64).unwrap_or_default();
    rows.push(
        Row::new(
            E,
            "64×16, 64 B: echoes/s vs peer",
            o.per_sec,
            "msg/s",
            Better::Higher,
        )
        .vs_peer(Some(p.per_sec).filter(|x| *x > 0.0))
        .with_target(Target::RatioAtLeast(5.0))
        .with_note(pnote.clone()),
    );
    rows.push(
        Row::new(
            E,
            "64×16, 64 B: echoes/s vs bare UDP pipelined echo",
            o.per_sec,
            "msg/s",
            Better::Higher,
        )
        .vs_limit(r.per_sec)
        .with_target(Target::RatioAtLeast(2.0))
        .with_note(format!("bare UDP kernel drops: {}", r.kernel_drops)),
    );
    rows.push(
        Row::new(
            E,
            "64×16, 64 B: round trip p99",
            o.p99_us / 1000.0,
            "ms",
            Better::Lower,
        )
        .vs_peer(Some(p.p99_us / 1000.0).filter(|x| x.is_finite()))
        .with_target(Target::AtMost(5.0))
        .with_note(format!(
            "p50 {} ms; closed loop: mean round trip = 1,024 in flight / echoes per second",
            report::fmt_num(o.p50_us / 1000.0)
        )),
    );
    rows.push(
        Row::new(
            E,
            "64×16, 64 B: kernel receive drops",
            o.kernel_drops as f64,
            "datagrams",
            Better::Lower,
        )
        .vs_peer(Some(p.kernel_drops as f64))
        .with_target(Target::AtMost(0.0)),
    );
    rows.push(
        Row::new(
            E,
            "64×16, 64 B, compressed: echoes/s vs uncompressed",
            oz.per_sec,
            "msg/s",
            Better::Higher,
        )
        .vs_limit(o.per_sec)
        .with_target(Target::RatioAtLeast(0.5))
        .with_note("limit: our own uncompressed figure"),
    );
}

/// Allocations per message, end to end, against bare UDP with the same client.
fn echo_allocation_rows(
    rows: &mut Vec<Row>,
    sizes: Sizes,
    alloc: &'static StatsAlloc<System>,
    rt: &tokio::runtime::Runtime,
) {
    say("allocations per message, 64x16 echo");
    let (o, r) = rt.block_on(async {
        let w = echo::Workload {
            alloc: Some(alloc),
            ..echo_workload(sizes, 64, 16, 64, false)
        };
        (echo::ours(w).await, echo::raw(w).await)
    });
    // Each echo is two messages (request and reply), each sent by one side and received by the
    // other; every allocation in the process counts, the client logic's included.
    let per_message =
        |o: &echo::EchoOutcome| o.allocations as f64 / (2.0 * o.echoes.max(1) as f64 * 0.9);
    rows.push(
        Row::new(
            E,
            "64×16, 64 B: allocations per message, end to end",
            per_message(&o),
            "allocs",
            Better::Lower,
        )
        .vs_limit(per_message(&r))
        .with_target(Target::RatioAtMost(1.0))
        .with_note(
            "whole process, both ends; limit: the bare UDP echo with the same client, measured in \
             the same run (the session layer adds no allocation of its own)",
        ),
    );
}

/// One session × 64 messages of 4 KiB: bulk throughput against the datagram ceiling.
fn echo_bulk_rows(
    rows: &mut Vec<Row>,
    sizes: Sizes,
    ceiling_small: f64,
    rt: &tokio::runtime::Runtime,
) {
    say("echo 4 KiB x 64");
    let (o, p) = rt.block_on(async {
        let w = echo_workload(sizes, 1, 64, 4096, false);
        (echo::ours(w).await, echo::peer(w).await)
    });
    // 4 KiB messages travel as 9 datagrams of at most 512 bytes each way.
    let dgrams = o.per_sec * 9.0 * 2.0;
    let pnote = collapsed(&p, 1).unwrap_or_default();
    rows.push(
        Row::new(
            E,
            "1×64, 4 KiB: MB/s each way vs peer",
            o.bytes_per_sec(4096) / 1e6,
            "MB/s",
            Better::Higher,
        )
        .vs_peer(sound(&p, 1).map(|p| p.bytes_per_sec(4096) / 1e6))
        .with_note(pnote),
    );
    rows.push(
        Row::new(
            E,
            "1×64, 4 KiB: data datagrams/s vs 512 B flood ceiling",
            dgrams,
            "dgram/s",
            Better::Higher,
        )
        .vs_limit(ceiling_small)
        .with_target(Target::RatioAtLeast(0.85))
        .with_note("both directions, 9 data datagrams per message, acks not counted"),
    );
}

/// Idle session memory and accept rates at scale.
fn scale_rows(rows: &mut Vec<Row>, sizes: Sizes, alloc: &'static StatsAlloc<System>) {
    let n = sizes.scale_sessions;
    say(&format!("scale {n} sessions"));
    let o = scale::ours(alloc, n, scale::socket_addr);
    let o32 = scale::ours(alloc, n, |i| i);
    let p = scale::peer(alloc, n);
    const C: &str = "Sessions in memory";
    rows.push(
        Row::new(
            C,
            &format!("idle session memory at {n}, SocketAddr keys"),
            o.bytes_per_session,
            "B/session",
            Better::Lower,
        )
        .vs_peer(Some(p.bytes_per_session))
        .with_note("as a UDP server holds them; the peer keys by SocketAddr too"),
    );
    rows.push(
        Row::new(
            C,
            &format!("idle session memory at {n}, u32 keys"),
            o32.bytes_per_session,
            "B/session",
            Better::Lower,
        )
        .with_target(Target::AtMost(768.0))
        .with_note(
            "the set-up of the soe-session endpoint bench and scale test; the budget a 100k-session \
             server is sized for",
        ),
    );
    rows.push(
        Row::new(
            C,
            &format!("accepts at {n}"),
            o.accepts_per_sec,
            "accepts/s",
            Better::Higher,
        )
        .vs_peer(Some(p.accepts_per_sec))
        .with_target(Target::AtLeast(500_000.0)),
    );
}

/// Takes every event of a server `Endpoint` and echoes each message the way it came (reliable
/// on its channel, or unreliable); returns the messages echoed. A send that fails (the session
/// gone, its queue full) is skipped, as an echo server would.
pub fn echo_events<A: soe_session::PeerAddress>(server: &mut soe_session::Endpoint<A>) -> u64 {
    use soe_session::{Delivery, Event};
    let mut echoed = 0;
    while let Some((h, event)) = server.poll_event() {
        if let Event::Message {
            channel,
            data,
            kind,
            ..
        } = event
        {
            echoed += 1;
            let _ = match kind {
                Delivery::Reliable => server.send(h, channel, data),
                _ => server.send_unreliable(h, data),
            };
        }
    }
    echoed
}

/// A one-paragraph description of this machine: CPU model, cores, kernel.
pub fn machine_description() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| std::env::consts::OS.to_owned());
    format!(
        "{cpu}, {cores} cores available, kernel {kernel}, {} build. All traffic is on 127.0.0.1; \
         the machine may be shared, so figures are indicative.",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    )
}
