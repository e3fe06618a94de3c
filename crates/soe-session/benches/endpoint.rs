//! Endpoint benchmarks (written next).

fn main() {}
