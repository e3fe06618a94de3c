//! The dissector's fuzz entry point (`soe_dissect::fuzzing::stream`) on stable, in every test
//! run: the committed seed corpus of `fuzz/corpus/dissect`, then seeded random streams and
//! mutations of the corpus. Each input is checked for no panic and bounded memory.

use std::path::Path;

use soe_dissect::fuzzing::{self, XorShift};

fn corpus() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/dissect");
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| std::fs::read(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    inputs.sort();
    inputs
}

/// Real exchanges, as a client and a server of soe-session sent them (CRC length 0, under
/// each setting of compression and RC4), interleaved into one stream per setting.
fn recorded() -> Vec<Vec<u8>> {
    use soe_session::fuzzing::{Step, run_client, run_server};
    let mut steps = Vec::new();
    for i in 0..12u16 {
        steps.push(Step::Send {
            channel: 0,
            len: 40 + i * 97,
        });
        steps.push(Step::Unreliable(20));
        steps.push(Step::Wait(30));
    }
    steps.push(Step::Wait(2_000));
    (0..8u8)
        .map(|flags| {
            let settings = flags & 3;
            let from_client = run_client(settings, &steps);
            let from_server = run_server(settings, &steps);
            let mut stream = Vec::new();
            for i in 0..from_client.len().max(from_server.len()) {
                if let Some(d) = from_client.get(i) {
                    stream.push((fuzzing::CLIENT_TO_SERVER | 0x10, d.clone()));
                }
                if let Some(d) = from_server.get(i) {
                    stream.push((fuzzing::SERVER_TO_CLIENT | 0x10, d.clone()));
                }
            }
            fuzzing::encode(flags, &stream)
        })
        .collect()
}

#[test]
fn the_seed_corpus_runs_clean() {
    if std::env::var_os("SOE_FUZZ_WRITE_CORPUS").is_some() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/dissect");
        std::fs::create_dir_all(&dir).unwrap();
        for (i, input) in recorded().iter().enumerate() {
            std::fs::write(dir.join(format!("recorded_{i}")), input).unwrap();
        }
    }
    for input in recorded() {
        fuzzing::stream(&input);
    }
    let inputs = corpus();
    assert!(inputs.len() >= 4, "fuzz/corpus/dissect holds the seeds");
    for input in &inputs {
        fuzzing::stream(input);
    }
}

#[test]
fn random_streams_and_mutations_run_clean() {
    let seeds = corpus();
    let mut rng = XorShift(0x5EED_D155_EC70_0001);
    for i in 0..3000 {
        let input: Vec<u8> = if i % 2 == 0 || seeds.is_empty() {
            let len = (rng.next_u64() % 2048) as usize;
            (0..len).map(|_| rng.next_u64() as u8).collect()
        } else {
            let mut input = seeds[(rng.next_u64() as usize) % seeds.len()].clone();
            for _ in 0..1 + rng.next_u64() % 8 {
                if input.is_empty() {
                    break;
                }
                let at = (rng.next_u64() as usize) % input.len();
                input[at] ^= 1 << (rng.next_u64() % 8);
            }
            input
        };
        fuzzing::stream(&input);
    }
}
