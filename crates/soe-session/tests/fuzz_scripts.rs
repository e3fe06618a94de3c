//! The state-machine fuzz entry points (`soe_session::fuzzing`) on stable, in every
//! `cargo test`: seeded random scripts, mutations of recorded real exchanges, and the committed
//! seed corpora of fuzz/corpus/session_server and fuzz/corpus/session_client. The entry points
//! assert their own promises (no panic, transmits and events run dry, datagrams within
//! udp_length, sessions within limits).
//!
//! `SOE_FUZZ_WRITE_CORPUS=1 cargo test -p soe-session --test fuzz_scripts` rewrites the seed
//! corpora from the recorded exchanges.

use std::path::PathBuf;

use soe_session::fuzzing::{self, Step, decode, encode, run_client, run_server};
use soe_session::{RandomSource, SplitMix64};

/// A session's worth of application traffic: messages of every kind and size (fragments
/// included), time passing, and a close at the end.
fn traffic() -> Vec<Step> {
    let mut s = Vec::new();
    for i in 0..6u16 {
        s.push(Step::Send {
            channel: (i % 2) as u8,
            len: 20 + i * 700,
        });
        s.push(Step::Unreliable(40 + i));
        s.push(Step::Ordered(30 + i));
        s.push(Step::Wait(40));
    }
    s.push(Step::Wait(30_000));
    s.push(Step::Close);
    s.push(Step::Wait(1_000));
    s
}

/// Recorded exchanges: what a real peer sent to the fuzzed side, as datagrams from the peer,
/// interleaved with the fuzzed side's own traffic, under each setting.
fn recorded() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for settings in 0..4u8 {
        // For the server target: what a real client sent.
        let from_client = run_client(settings, &traffic());
        // For the client target: what a real server sent.
        let from_server = run_server(settings, &traffic());
        for (target, datagrams) in [
            ("session_server", from_client),
            ("session_client", from_server),
        ] {
            let mut steps = Vec::new();
            for (i, d) in datagrams.into_iter().enumerate() {
                steps.push(Step::Datagram {
                    from: fuzzing::PEER,
                    data: d,
                });
                if i % 3 == 0 {
                    steps.push(Step::Send {
                        channel: 0,
                        len: 100,
                    });
                    steps.push(Step::Wait(20));
                }
            }
            steps.push(Step::Wait(5_000));
            out.push((target, encode(settings, &steps)));
        }
    }
    out
}

fn run(target: &str, data: &[u8]) {
    match target {
        "session_server" => fuzzing::server(data),
        _ => fuzzing::client(data),
    }
}

#[test]
fn scripts_round_trip_through_their_encoding() {
    let steps = traffic();
    let bytes = encode(2, &steps);
    assert_eq!(decode(&bytes), (2, steps));
    let d = vec![Step::Datagram {
        from: 3,
        data: vec![0, 9, 0, 0, 1, 2, 3],
    }];
    assert_eq!(decode(&encode(1, &d)), (1, d));
}

#[test]
fn recorded_exchanges_and_their_mutations_keep_every_promise() {
    let mut rng = SplitMix64::new(0xF022);
    for (target, script) in recorded() {
        assert!(script.len() > 100, "{target}: the recording is not empty");
        run(target, &script);
        for _ in 0..40 {
            let mut m = script.clone();
            for _ in 0..1 + rng.next_u32() % 8 {
                let i = (rng.next_u32() as usize) % m.len();
                m[i] = rng.next_u32() as u8;
            }
            run(target, &m);
        }
    }
}

#[test]
fn random_scripts_keep_every_promise() {
    let mut rng = SplitMix64::new(0x5C21);
    for round in 0..400 {
        let len = (rng.next_u32() % 600) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
        // Datagrams that look like protocol packets half the time.
        for k in (1..data.len()).step_by(7) {
            if rng.next_u32() % 2 == 0 {
                data[k] = 0;
            }
        }
        run(
            if round % 2 == 0 {
                "session_server"
            } else {
                "session_client"
            },
            &data,
        );
    }
}

#[test]
fn committed_seed_corpora_run_clean() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let write = std::env::var_os("SOE_FUZZ_WRITE_CORPUS").is_some();
    if write {
        for (i, (target, script)) in recorded().into_iter().enumerate() {
            let dir = root.join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("recorded_{}", i / 2)), script).unwrap();
        }
    }
    for target in ["session_server", "session_client"] {
        let dir = root.join(target);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut n = 0;
        for e in entries {
            let data = std::fs::read(e.unwrap().path()).unwrap();
            run(target, &data);
            n += 1;
        }
        assert!(n >= 4, "{target}: {n} seeds");
    }
}
