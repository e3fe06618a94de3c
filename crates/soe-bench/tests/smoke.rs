//! Every workload of the report at a tiny size: messages are echoed and verified (the workload
//! functions assert each one), handshakes complete, the report renders. No timing is asserted.

use std::alloc::System;
use std::time::Duration;

use soe_bench::echo::{self, Workload};
use soe_bench::inmem::{self, Mode};
use soe_bench::{PageInfo, Sizes, limits, markdown_page, run_all, scale, svg_chart};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    in_memory_pairs_deliver_every_message();
    echoes_come_back_verified();
    scale_runs_complete_every_handshake();
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
