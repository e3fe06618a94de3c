//! Memory per session: a capture of SessionRequests alone (a flood, or a scan) must not cost
//! the dissector more than 1 KiB per session, everything it keeps counted (the session table,
//! the address index, the application protocol name).
//!
//! Memory is measured with `stats_alloc`'s instrumented system allocator, which counts the whole
//! process; this binary holds one test so that nothing else allocates meanwhile.

use std::alloc::System;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use soe_dissect::{DissectConfig, Dissector};
use soe_wire::{Packet, SessionRequest};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes allocated and not freed since `region` began (growth by reallocation included).
fn live(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize
}

const SESSIONS: u32 = 65_536;

#[test]
fn a_session_that_carried_no_data_costs_at_most_1_kib() {
    let server: SocketAddr = "10.0.0.2:20260".parse().unwrap();
    let mut request = Vec::new();
    let mut dissector = Dissector::new(DissectConfig::new());
    let region = Region::new(GLOBAL);
    for i in 0..SESSIONS {
        request.clear();
        Packet::SessionRequest(SessionRequest {
            protocol_version: 3,
            session_id: i,
            udp_length: 512,
            application_protocol: b"ExternalGatewayApi_3",
        })
        .encode(&mut request);
        let client = SocketAddr::new(Ipv4Addr::from(0x0a01_0000 + i).into(), 40_000);
        // The record is the caller's: dropped at once, as a streaming reader does.
        drop(dissector.dissect(
            Duration::from_micros(u64::from(i)),
            client,
            server,
            &request,
        ));
    }
    let per_session = live(&region) / SESSIONS as isize;
    assert_eq!(dissector.session_count(), SESSIONS as usize);
    eprintln!("memory per data-less session: {per_session} bytes");
    assert!(
        per_session <= 1024,
        "{per_session} bytes per session that carried no data (at most 1024)"
    );
}
