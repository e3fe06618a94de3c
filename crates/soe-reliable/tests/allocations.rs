//! Allocation counts on the hot paths, measured with `stats_alloc`'s instrumented system
//! allocator: small messages cost a fraction of an allocation each (arena chunks and ring buffers
//! amortize), and processing an ack costs none. The allocator counts every thread of the process,
//! so this target runs without the test harness (`harness = false`): one thread, the
//! measurements one after another. It also bounds the heap a pair of channels holds while they
//! echo small messages: a game session's steady state.

mod common;

use std::alloc::System;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::MemoryLink;
use soe_reliable::{ReliableChannel, ReliableConfig};
use soe_wire::Channel;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations and reallocations made since `region` began.
fn allocations(region: &Region<'_, System>) -> usize {
    let change = region.change();
    change.allocations + change.reallocations
}

fn per_message(key: Option<&[u8]>, size: usize) -> f64 {
    let mut l = MemoryLink::new(key, size);
    l.run(20_000); // warm up: rings and windows reach their working size
    let count = 200_000;
    let region = Region::new(GLOBAL);
    l.run(count);
    let per = allocations(&region) as f64 / count as f64;
    println!(
        "{size}-byte messages, RC4 {}: {per:.4} allocations per message",
        key.is_some()
    );
    per
}

/// A plain `main` (the target has `harness = false`): the process has no other thread, so the
/// process-wide counts of `stats_alloc` see only these cases, which run one after another.
fn main() {
    small_messages_cost_well_under_one_allocation();
    println!("allocations: small_messages_cost_well_under_one_allocation ... ok");
    processing_acks_allocates_nothing();
    println!("allocations: processing_acks_allocates_nothing ... ok");
    an_echoing_pair_holds_a_few_kib();
    println!("allocations: an_echoing_pair_holds_a_few_kib ... ok");
    println!("allocations: 3 passed, 0 failed");
}

fn small_messages_cost_well_under_one_allocation() {
    let plain = per_message(None, 64);
    assert!(plain <= 0.1, "{plain} allocations per 64-byte message");
    let rc4 = per_message(Some(b"key"), 64);
    assert!(rc4 <= 0.1, "{rc4} allocations per 64-byte RC4 message");
    // Every 4 KiB message is fragmented and reassembled into a buffer of its own.
    let large = per_message(None, 4096);
    assert!(large <= 1.1, "{large} allocations per 4 KiB message");
}

fn processing_acks_allocates_nothing() {
    let t0 = Instant::now();
    // Unpaced, so that every round sends a whole window at one instant.
    let config = ReliableConfig::default()
        .with_bundle_messages(false)
        .with_initial_send_window(190)
        .with_pacing(false);
    let mut tx = ReliableChannel::new(Channel::ZERO, Arc::new(config), 496, None).unwrap();
    let message = Bytes::from_static(&[1u8; 32]);
    let mut buf = Vec::with_capacity(512);
    let mut next_ack = 0u16;
    let mut ack_allocations = 0;
    let mut acks = 0u64;
    for round in 0..2_000u32 {
        let now = t0 + Duration::from_millis(u64::from(round) * 10);
        while tx.send(message.clone()).is_ok() {}
        let mut sent = 0u16;
        while tx.poll_transmit(now, &mut buf).is_some() {
            buf.clear();
            sent += 1;
        }
        // Everything was acknowledged last round, so a whole window goes out.
        assert_eq!(u32::from(sent), tx.congestion_window(), "round {round}");
        let later = now + Duration::from_millis(5);
        let region = Region::new(GLOBAL);
        // Selective acks out of order, stale and unsent ones, then the cumulative ack.
        for i in (0..sent).rev().step_by(3) {
            tx.handle_ack(later, next_ack.wrapping_add(i));
        }
        for _ in 0..50 {
            tx.handle_ack_all(later, next_ack.wrapping_sub(1));
            tx.handle_ack(later, next_ack.wrapping_add(sent + 100));
        }
        tx.handle_ack_all(later, next_ack.wrapping_add(sent - 1));
        let spent = allocations(&region);
        acks += u64::from(sent / 3 + 1) + 101;
        if round >= 10 {
            ack_allocations += spent;
        }
        next_ack = next_ack.wrapping_add(sent);
    }
    println!("{acks} acks processed, {ack_allocations} allocations after warm-up");
    assert_eq!(ack_allocations, 0);
}

/// Bytes `region` has seen allocated and not freed.
fn live_bytes(region: &Region<'_, System>) -> isize {
    let c = region.change();
    c.bytes_allocated as isize - c.bytes_deallocated as isize + c.bytes_reallocated
}

/// A client and a server channel echoing a 100-byte message at a time, ten a second, each
/// acknowledged before the next (a game session's steady state): the pair's heap stays within a
/// few KiB once nothing is in flight. The arenas that copy messages in start with small chunks
/// and reuse them in place; a fixed 16 KiB chunk made this over 32 KiB.
fn an_echoing_pair_holds_a_few_kib() {
    let t0 = Instant::now();
    let region = Region::new(GLOBAL);
    let config = Arc::new(ReliableConfig::default());
    let make = || ReliableChannel::new(Channel::ZERO, config.clone(), 496, None).unwrap();
    let (mut client, mut server) = (make(), make());
    let message = Bytes::from(vec![0x5Au8; 100]);
    let mut buf = Vec::with_capacity(512);
    let mut echoed = 0;
    for i in 0..1_000u64 {
        let mut now = t0 + Duration::from_millis(i * 100);
        client.send(message.clone()).unwrap();
        // Until both sides are quiet: the message, the echo, the acks (their timers included).
        for _ in 0..20 {
            let mut moved = false;
            while client.poll_transmit(now, &mut buf).is_some() {
                common::dispatch(&mut server, now, &buf).unwrap();
                buf.clear();
                moved = true;
            }
            while let Some(m) = server.poll_message() {
                server.send(m).unwrap();
            }
            while server.poll_transmit(now, &mut buf).is_some() {
                common::dispatch(&mut client, now, &buf).unwrap();
                buf.clear();
                moved = true;
            }
            while let Some(m) = client.poll_message() {
                assert_eq!(m, message);
                echoed += 1;
            }
            if !moved {
                match [client.poll_timeout(), server.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
                {
                    Some(t) if t < t0 + Duration::from_millis(i * 100 + 90) => now = now.max(t),
                    _ => break,
                }
                client.handle_timeout(now).unwrap();
                server.handle_timeout(now).unwrap();
            }
        }
        assert!(
            client.is_flushed() && server.is_flushed(),
            "echo {i} still in flight"
        );
    }
    assert_eq!(echoed, 1_000);
    drop(message);
    let held = live_bytes(&region);
    println!("an echoing pair of channels holds {held} bytes of heap");
    assert!(held <= 8 * 1024, "{held} bytes held by an echoing pair");
    drop((client, server));
}
