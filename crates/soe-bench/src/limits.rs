//! The machine's own limits: a batched datagram flood over loopback (quinn-udp, GSO/sendmmsg
//! where the kernel has it) and the raw primitives (CRC-32, RC4, deflate), plus our compressed
//! seal for comparison with the raw deflate.

use std::hint::black_box;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::io::IoSliceMut;

use quinn_udp::{BATCH_SIZE, RecvMeta, Transmit, UdpSocketState};
use soe_crypto::{Crc32, Rc4};
use soe_wire::{FrameConfig, Framer};

use crate::inmem::message;

/// Runs `f` repeatedly for about `time`, returning its mean duration in seconds.
pub fn time_per_call(time: Duration, mut f: impl FnMut()) -> f64 {
    // Warm up, and size the batches so the clock is read rarely.
    let t = Instant::now();
    let mut batch = 1u64;
    while t.elapsed() < time / 20 {
        for _ in 0..batch {
            f();
        }
        batch *= 2;
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < time {
        for _ in 0..batch {
            f();
        }
        n += batch;
    }
    start.elapsed().as_secs_f64() / n as f64
}

/// SOE CRC-32 (crc32fast) over 512-byte datagrams, bytes per second.
pub fn crc32(time: Duration) -> f64 {
    let crc = Crc32::new(0x1234_5678);
    let data = message(0, 512);
    512.0
        / time_per_call(time, || {
            black_box(crc.checksum(black_box(&data)));
        })
}

/// RC4 keystream applied to 4 KiB buffers, bytes per second.
pub fn rc4(time: Duration) -> f64 {
    let mut rc4 = Rc4::new(b"soe-bench-key-16").expect("valid key");
    let mut data = message(0, 4096);
    4096.0 / time_per_call(time, || rc4.apply(black_box(&mut data)))
}

/// miniz_oxide deflate of a 512-byte body into a fresh zlib stream (its one-shot API, level
/// 6), seconds per call.
pub fn deflate_512(time: Duration) -> f64 {
    let data = message(0, 512);
    time_per_call(time, || {
        black_box(miniz_oxide::deflate::compress_to_vec_zlib(
            black_box(&data),
            6,
        ));
    })
}

/// Our compressed seal of a 512-byte contextual packet (opcode, flag, deflate, CRC), seconds
/// per call.
pub fn compressed_seal_512(time: Duration) -> f64 {
    let mut framer = Framer::new(FrameConfig::new(0x1234_5678).with_compression(true));
    let body = message(0, 510);
    let mut buf = Vec::with_capacity(1024);
    time_per_call(time, || {
        buf.clear();
        buf.extend_from_slice(&[0x00, 0x09]);
        buf.extend_from_slice(&body);
        framer.seal(&mut buf, 0);
        black_box(&buf);
    })
}

/// The loopback datagram ceiling: one thread floods `size`-byte datagrams with quinn-udp's
/// batched send (GSO segments where available), another receives them with quinn-udp's batched
/// receive (recvmmsg, GRO). Returns datagrams per second received.
///
/// # Panics
///
/// If binding a socket fails.
pub fn datagram_ceiling(size: usize, time: Duration) -> f64 {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let _ = socket2::SockRef::from(&rx).set_recv_buffer_size(8 << 20);
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let to: SocketAddr = rx.local_addr().expect("address");
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let _ = socket2::SockRef::from(&tx).set_send_buffer_size(8 << 20);
    let state = UdpSocketState::new((&tx).into()).expect("quinn-udp state");
    let segments = state.max_gso_segments().clamp(1, 64_000 / size.max(1));
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let counter = {
        let (stop, received) = (stop.clone(), received.clone());
        std::thread::spawn(move || {
            // Batched receives too (recvmmsg, GRO where the kernel coalesces), as our driver does.
            let Ok(rx_state) = UdpSocketState::new((&rx).into()) else {
                return;
            };
            let slot = 65_536;
            let mut buf = vec![0u8; slot * BATCH_SIZE];
            let mut metas = [RecvMeta::default(); BATCH_SIZE];
            while !stop.load(Ordering::Relaxed) {
                let mut chunks = buf.chunks_mut(slot);
                let mut iovs: [IoSliceMut<'_>; BATCH_SIZE] =
                    std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
                if let Ok(n) = rx_state.recv((&rx).into(), &mut iovs, &mut metas) {
                    let datagrams: usize = metas[..n]
                        .iter()
                        .map(|m| {
                            m.len.div_ceil(if m.stride == 0 {
                                m.len.max(1)
                            } else {
                                m.stride
                            })
                        })
                        .sum();
                    received.fetch_add(datagrams as u64, Ordering::Relaxed);
                }
            }
        })
    };
    let payload = vec![0x5au8; size * segments];
    let start = Instant::now();
    let mut at_start = 0;
    let mut warm = false;
    while start.elapsed() < time + time / 5 {
        if !warm && start.elapsed() >= time / 5 {
            warm = true;
            at_start = received.load(Ordering::Relaxed);
        }
        let t = Transmit {
            destination: to,
            ecn: None,
            contents: &payload,
            segment_size: (segments > 1).then_some(size),
            src_ip: None,
        };
        // A full send buffer only means the receiver is behind: keep trying.
        let _ = state.send((&tx).into(), &t);
    }
    let got = received.load(Ordering::Relaxed) - at_start;
    stop.store(true, Ordering::Relaxed);
    let _ = counter.join();
    got as f64 / time.as_secs_f64()
}
