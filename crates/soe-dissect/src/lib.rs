//! A passive dissector for the SOE protocol (v3), the UDP transport of Sony Online
//! Entertainment's games.
//!
//! Feed a [`Dissector`] the datagrams of any number of sessions, in the order they were seen,
//! each with its time and addresses; it returns a [`DatagramRecord`] per datagram and, on
//! demand, a [`SessionSummary`] per session. It follows sessions by address pair and learns
//! each one's framing from its SessionResponse (falling back on [`DissectConfig`]), checks
//! CRCs, inflates, decodes every packet (MultiPackets and Groups recursively), and emulates an
//! in-order receiver per direction and channel: out-of-order packets are buffered, fragments
//! reassembled, payloads unbundled, unescaped and RC4-decrypted exactly as `soe-reliable`'s
//! receiver does, so each application message is reported once, in order, in the record of
//! the datagram that completed it. It measures data-to-ack round trips, and says when a
//! session's data looks encrypted without a key, or when a key does not fit.
//!
//! A capture that lost packets does not stop the stream: gaps that can no longer be filled are
//! given up ([`CaptureGap`]), the stream goes on from every packet whose place is known, and
//! [`Dissector::flush`] gives up the last gaps when the capture ends.
//!
//! Memory is bounded whatever the input ([`Limits`]); no input panics.
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use soe_dissect::{DissectConfig, Dissector};
//!
//! let client: SocketAddr = "10.0.0.1:40000".parse().unwrap();
//! let server: SocketAddr = "10.0.0.2:20260".parse().unwrap();
//! let mut dissector = Dissector::new(DissectConfig::new());
//! // A SessionRequest: protocol 3, session id 7, udp_length 512, "Test_1".
//! let request = [
//!     0, 1, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 2, 0, b'T', b'e', b's', b't', b'_', b'1', 0,
//! ];
//! let record = dissector.dissect(Duration::ZERO, client, server, &request);
//! assert_eq!(record.packet.as_ref().map(|p| p.name), Some("SessionRequest"));
//! let summary = &dissector.summaries()[0];
//! assert_eq!(summary.client, Some(client));
//! assert_eq!(summary.application_protocol.as_deref(), Some("Test_1"));
//! println!("{}", record.render());
//! ```
//!
//! [`export`] writes the messages as a pcapng capture of exported PDUs that Wireshark opens
//! with the Lua plugin in `crates/soe-dissect/wireshark/`; [`recording`] writes a flight
//! recording of `soe-session` as such a capture, its raw datagrams beside its messages.
//!
//! Features: `pcap` (default) adds [`capture`], a bounded pcap/pcapng reader and a pcap
//! writer; `serde` derives `Serialize` for every record.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

#[cfg(feature = "pcap")]
pub mod capture;
mod channel;
mod config;
mod dissector;
pub mod export;
mod framing;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod judge;
pub mod recording;
mod records;
mod render;
mod session;
#[cfg(test)]
mod tests;
mod work;

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use config::{DissectConfig, KeyRule, Limits};
pub use dissector::Dissector;
pub use judge::{RANDOMNESS_MAX_BYTES, RANDOMNESS_MIN_BYTES, Randomness};
pub use records::{
    CaptureGap, CrcCheck, CrcVerdict, DatagramRecord, Direction, DirectionStats, DirectionSummary,
    DisconnectSummary, Encryption, FieldValue, Fields, FlushRecord, MessageRecord, PacketNode,
    Record, ReliableInfo, RoundTrips, SessionSummary,
};
