//! Interoperability tests of this workspace's SOE protocol (v3) stack against an independent
//! implementation.
//!
//! This crate has no library code. Its tests (under `tests/`) run our endpoints (`soe-tokio`,
//! on top of `soe-session`, `soe-reliable`, `soe-wire` and `soe-crypto`) against the `soe-protocol` crate, version 2.3.0 (a Rust port of
//! Sanctuary's SOE protocol library), over real UDP sockets on 127.0.0.1, in both directions:
//! our client with its server, and its client with our server.
//!
//! What the tests cover, and every behaviour in which the peer differs from us, is written up in
//! `docs/interop.md` at the repository root. In short:
//!
//! * handshake (matching and mismatched application protocol names);
//! * 10,000 messages each way, 1 to 4,000 bytes, content and order checked;
//! * RC4 with the same raw key on both sides; compression announced by our server;
//! * disconnect from either side;
//! * the peer's divergences: plaintext messages starting `00 19` / `00 00`, fragmenting against
//!   its own `udp_length`, no compression on send, no resent Disconnect, one datagram per packet,
//!   one cumulative ack per tick, no re-ack of duplicates;
//! * the known-answer vectors of `tests/fixtures/known-answers.json`, produced by our session
//!   layer byte for byte.
//!
//! The peer is a dev-dependency only; nothing of its code is copied here.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml
