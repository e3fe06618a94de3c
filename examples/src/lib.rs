//! Runnable examples for the soe crates; this library is empty. See the `*.rs` files beside
//! `Cargo.toml`, run with `cargo run --release --example NAME`:
//!
//! * `demo`: the README's main job, a server and clients on loopback exchanging plain, RC4 and
//!   fragmented messages, printing sessions, messages, round-trip times and resends.
//! * `echo_server` / `echo_client` (tokio), `async_std_echo_server` / `async_std_echo_client`.
//! * `actor_server`: every session routed through one task with the endpoint's event stream.
//! * `broadcast`: one `Bytes` payload sent to many sessions without a copy per recipient.
#![forbid(unsafe_code)]

// The workspace README's Rust code (the tokio server) compiles as a doc test here, where its
// dependencies (soe-tokio, tokio with its macros) are at hand; its other blocks (sh, js, c, text)
// are not Rust and are checked elsewhere (docs/development.md, "Checks of the docs").
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct WorkspaceReadme;
