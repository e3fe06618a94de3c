//! Every workload of the report at a tiny size: messages are echoed and verified (the workload
//! functions assert each one), handshakes complete, the report renders. No timing is asserted.

use std::alloc::System;
use std::time::Duration;

use soe_bench::echo::{self, Workload};
use soe_bench::inmem::{self, Mode};
use soe_bench::{PageInfo, Sizes, limits, markdown_page, recorder, run_all, scale, svg_chart};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    in_memory_pairs_deliver_every_message();
    echoes_come_back_verified();
    scale_runs_complete_every_handshake();
    the_recorder_records_only_when_on();
    primitives_and_report();
    println!("soe-bench smoke: ok");
}

fn in_memory_pairs_deliver_every_message() {
    for size in [32, 400, 4000] {
        for mode in Mode::ALL {
            let o = inmem::ours(size, 50, mode);
            assert_eq!(o.delivered, 50, "ours {size} B {mode:?}");
            let p = inmem::peer(size, 20, mode).expect("the peer delivers a short run");
            assert_eq!(p.delivered, 20, "peer {size} B {mode:?}");
        }
    }
}

fn echoes_come_back_verified() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for (sessions, outstanding, size, compression) in
            [(1, 1, 64, false), (4, 4, 64, true), (1, 8, 4096, false)]
        {
            let w = Workload {
                sessions,
                outstanding,
                size,
                duration: Duration::from_millis(100),
                compression,
                alloc: Some(GLOBAL),
            };
            let o = echo::ours(w).await;
            assert_eq!((o.connected, o.failed), (sessions, 0), "ours {w:?}");
            assert!(o.echoes > 0, "ours echoed nothing: {w:?}");
            let p = echo::peer(w).await;
            assert!(p.connected > 0, "the peer connected nothing: {w:?}");
            let r = echo::raw(w).await;
            assert!(r.echoes > 0, "bare UDP echoed nothing: {w:?}");
        }
    });
}

fn scale_runs_complete_every_handshake() {
    let o = scale::ours(GLOBAL, 100, scale::socket_addr);
    assert_eq!(o.sessions, 100);
    let p = scale::peer(GLOBAL, 100);
    assert_eq!(p.sessions, 100);
}

fn the_recorder_records_only_when_on() {
    let n = 8;
    let c = recorder::measure(GLOBAL, n, 2);
    // The workload itself asserts that every message came back, both ways.
    assert_eq!(c.sessions, n);
    assert!(c.off.echoes > 0 && c.on.echoes == c.off.echoes);
    assert!(c.off.ns_per_echo > 0.0 && c.on.ns_per_echo > 0.0);
    // Off: nothing recorded, no pool.
    assert_eq!(c.off.recorder.recording, 0);
    assert_eq!(c.off.recorder.pool_bytes, 0);
    assert_eq!(c.off.recorder.entries, 0);
    // On: every session recorded, each to its full budget of 64 KiB (16 chunks of 4 KiB), the
    // oldest entries dropped for room; the server holds the pool on top of what it held off.
    let r = c.on.recorder;
    assert_eq!(r.recording, n as usize);
    assert_eq!(r.pool_bytes, n as usize * 64 * 1024);
    assert!(r.entries > 0 && r.dropped > 0, "{r:?}");
    assert!(
        c.on.heap_per_session >= c.off.heap_per_session + 64.0 * 1024.0,
        "on {} off {}",
        c.on.heap_per_session,
        c.off.heap_per_session
    );
    let mut rows = Vec::new();
    recorder::rows(&mut rows, GLOBAL, &[n], 1);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.section == recorder::SECTION));
    assert!(rows[0].ratio().is_some_and(|x| x > 0.0));
    // What recording adds to the heap is the pool, and little beside it.
    assert_eq!(rows[2].met(), Some(true), "{:?}", rows[2]);
}

fn primitives_and_report() {
    let t = Duration::from_millis(5);
    assert!(limits::crc32(t) > 0.0);
    assert!(limits::rc4(t) > 0.0);
    assert!(limits::compressed_seal_512(t) > 0.0);
    assert!(limits::datagram_ceiling(512, Duration::from_millis(50)) > 0.0);
    let rows = run_all(Sizes::TINY, GLOBAL);
    assert!(rows.iter().any(|r| r.target != soe_bench::Target::None));
    let page = markdown_page(
        &rows,
        &PageInfo {
            extra_sections: vec!["## Extra\n\nappended".to_owned()],
            ..PageInfo::default()
        },
    );
    assert!(page.ends_with("appended\n"));
    assert!(svg_chart(&rows).ends_with("</svg>\n"));
}
