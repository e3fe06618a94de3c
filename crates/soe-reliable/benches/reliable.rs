//! Throughput of a sender -> receiver pair in memory (filled in below).
fn main() {}
