//! Sans-I/O reliable channels of the SOE protocol (version 3).
//!
//! A [`ReliableChannel`] is one of the four reliable channels of a session, both directions. It
//! owns no socket and reads no clock: the session feeds it the data and ack packets it receives
//! (`handle_*`, each with `now`), drains the packets it wants to send ([`poll_transmit`], one
//! encoded `opcode | body` per call, written into the caller's buffer), and wakes it at
//! [`poll_timeout`] with [`handle_timeout`].
//!
//! Sending: [`send`] queues a message (bounded; a full queue hands the message back). At that
//! point the message is RC4-encrypted when the channel has a key, then at transmission time it is
//! zero-escaped, packed with its neighbours into a Group when several fit one packet, or split
//! into ReliableDataFragments against `max_packet_len` (the peer's `udp_length` minus framing).
//! Sequences are `u64` inside and `u16` on the wire. Packets are resent when their timer (SRTT +
//! 4 RTTVAR, Karn's rule, exponential backoff) expires or when a selective ack shows a gap behind
//! them; a packet-counting congestion window (slow start, additive increase, halved on loss)
//! bounds the packets in flight.
//!
//! Receiving: in-order packets are delivered at once; packets up to `receive_window` ahead are
//! stored and selectively acknowledged; duplicates are dropped and re-acknowledged; fragments are
//! reassembled into a buffer that grows only as data arrives, capped by `max_message_size`.
//! Cumulative acks go out after `ack_delay` or every `ack_every` packets, or at once with outgoing
//! data when the channel has some to send (piggybacked). Messages come out of
//! [`poll_message`] in order, exactly once, as [`bytes::Bytes`].
//!
//! Driving order, after any `handle_*` call: call [`poll_transmit`] until it returns `None`, then
//! sleep until [`poll_timeout`]. `poll_timeout` reports timers only (delayed ack, retransmission,
//! unacknowledged limit); packets that can go at once are found by `poll_transmit`.
//!
//! ```
//! use std::{sync::Arc, time::Instant};
//! use bytes::Bytes;
//! use soe_reliable::{ReliableChannel, ReliableConfig};
//! use soe_wire::{Channel, Packet};
//!
//! let config = Arc::new(ReliableConfig::default());
//! let mut a = ReliableChannel::new(Channel::ZERO, config.clone(), 496, None).unwrap();
//! let mut b = ReliableChannel::new(Channel::ZERO, config, 496, None).unwrap();
//! let now = Instant::now();
//! a.send(Bytes::from_static(b"hello")).unwrap();
//! let mut wire = Vec::new();
//! let len = a.poll_transmit(now, &mut wire).unwrap();
//! match Packet::decode(&wire[..len]).unwrap() {
//!     Packet::ReliableData(d) => b.handle_data(now, d.sequence, d.data).unwrap(),
//!     other => panic!("unexpected {other:?}"),
//! }
//! assert_eq!(b.poll_message().as_deref(), Some(&b"hello"[..]));
//! ```
//!
//! [`poll_transmit`]: ReliableChannel::poll_transmit
//! [`poll_timeout`]: ReliableChannel::poll_timeout
//! [`handle_timeout`]: ReliableChannel::handle_timeout
//! [`send`]: ReliableChannel::send
//! [`poll_message`]: ReliableChannel::poll_message
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod arena;
mod channel;
mod config;
mod congestion;
mod error;
mod ordered;
mod pacing;
mod recv;
mod rtt;
mod send;
mod seq;
mod stats;

pub use channel::{MIN_PACKET_LEN, ReliableChannel};
pub use config::{AckElicitor, MAX_DURATION, MAX_WINDOW, ReliableConfig};
pub use error::{ReliableError, SendError};
pub use ordered::{OrderedReceiver, OrderedSender};
pub use recv::ReceiveBacklog;
pub use rtt::RttEstimate;
pub use stats::ChannelStats;
