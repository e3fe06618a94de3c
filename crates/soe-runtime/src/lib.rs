//! Runtime-agnostic driver for SOE protocol (v3) endpoints.
//!
//! [`soe_session`] is sans-I/O: it never touches a socket or a clock. This crate gives it both:
//! a driver task that owns a UDP socket and a timer and feeds the protocol endpoint, written once
//! against a small runtime seam ([`Runtime`], [`AsyncTimer`], [`AsyncUdpSocket`]), so that each
//! adapter crate is about a hundred lines:
//!
//! * `soe-tokio`: `soe_tokio::Endpoint` on tokio;
//! * `soe-async-std`: `soe_async_std::Endpoint` on async-io (async-std, smol);
//! * [`blocking`]: the same endpoint on a std thread, for code without an async runtime.
//! * [`blocking::EventLoop`]: the same driver on the application's own thread, which blocks in
//!   the kernel between wake-ups and sends once per wake-up for every session.
//!
//! What differs between platforms (Linux, the BSDs, Windows) is met in one module,
//! [`platform`].
//!
//! # Shape
//!
//! * [`Endpoint`]: one socket, many sessions. `bind`, `accept`, `connect`, `close`,
//!   `wait_idle`; or, in [`EventMode::Stream`], one stream of [`EndpointEvent`]s for an
//!   actor-style server that routes every session from one task.
//! * [`Connection`]: a cloneable handle to one session: `send` (waits while the session's send
//!   queue is full), `try_send`, `recv` (in order; `None` after the close), `close`, `closed`,
//!   `stats`, and the flight recorder's `set_recording` and `take_recording` (a session that
//!   ended abnormally keeps its recording for the application). Dropping the last clone closes
//!   the session with reason `Application`.
//!
//! # The driver
//!
//! One task per endpoint owns the protocol endpoint behind a `std::sync::Mutex` shared with the
//! handles (never held across an `.await`). It sleeps until the next datagram, the endpoint's next
//! deadline, or a handle's request: no periodic tick, and the one timer is re-armed only when the
//! deadline moves. Each wake-up reads at most 64 datagrams (in batches of up to 32 with
//! `recvmmsg` through `quinn-udp` where the platform has it, never asking for more than the
//! budget has left; only a GRO-coalesced buffer can bring up to 63 more) and sends at most 64,
//! then yields if there is more, so one busy peer cannot starve the others.
//!
//! # Bounds
//!
//! * Sending: the session's reliable queue is bounded (`max_queued_messages`); `send` waits for
//!   room, `try_send` hands the message back. A waiting sender is woken only when its session
//!   has room again on its channel (checked once per driver wake-up, for blocked connections
//!   only).
//! * Receiving: the reliable layer delivers at most its window ahead, but it acknowledges what it
//!   delivered, so a peer can keep sending while the application does not read. Each connection
//!   therefore holds at most [`Config::receive_queue_bytes`] unread bytes (8 MiB by default;
//!   each message counts [`MESSAGE_OVERHEAD`] bytes on top of its length); a connection past it is closed with `ReliableOverflow` (the protocol's reason for exactly
//!   this). Other sessions are never held up by one slow reader.
//!
//! # Shutdown
//!
//! [`Endpoint::close`] sends every session a Disconnect and refuses new ones;
//! [`Endpoint::wait_idle`] returns once every session is gone and the last datagram left. The
//! driver stops when the endpoint is closed (or every `Endpoint` handle dropped) and no session is
//! left; handles then see their connections closed.
//!
//! # Shards
//!
//! Endpoints bound to one address with [`SocketConfig::reuse_port`] (`SO_REUSEPORT`, e.g. one
//! per core) serve one port; the kernel hands each datagram to one of them by a hash of its
//! addresses and ports. Those of one process share one [`soe_session::ShardGroup`]: one secret
//! and one set of per-source limits (request rates, sessions held, stateless replies), so a
//! host that varies its source port to reach every shard still has one share. Endpoints in
//! other processes, or made with `with_socket` on a socket bound elsewhere, share a group only
//! when their configs are given one
//! ([`EndpointConfig::with_shard_group`](soe_session::EndpointConfig::with_shard_group)), and a
//! group lives in one process. A session stays on the shard that accepted it: a client whose
//! NAT gives it a new source port usually reaches another shard, which has neither its session
//! nor its reliable state and does not honour its cookie, so the session is lost (it ends with
//! `UnreachableConnection` on the client). Steering by source address in the kernel (a
//! reuseport BPF program), which would keep it, is not done.
//!
//! If the operating system's random generator fails, `bind` and `with_socket` return an
//! [`std::io::Error`] of kind `Other` holding a [`soe_session::EndpointError`]: no endpoint is
//! made with weaker keys.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod blocking;
mod config;
mod connection;
mod driver;
mod endpoint;
mod error;
mod event_loop;
pub mod platform;
pub mod runtime;
mod shards;
mod shared;
pub mod socket;
mod tx;

pub use config::{
    Config, DEFAULT_RECEIVE_QUEUE_BYTES, EventMode, MAX_RECEIVE_COALESCE, MESSAGE_OVERHEAD,
};
pub use connection::{CloseReason, Connection, ConnectionId};
pub use endpoint::{Endpoint, EndpointEvent, Events, SendBatch};
pub use error::{ConnectError, RecvTimeoutError, SendError, TrySendError};
pub use runtime::{AsyncTimer, AsyncUdpSocket, Outgoing, Runtime};
pub use socket::SocketConfig;

/// The batched UDP I/O layer (`quinn-udp`) the adapters use.
pub use quinn_udp as udp;
/// The protocol types an application uses most.
pub use soe_session::{
    Delivery, EndpointConfig, EndpointStats, Recording, RecordingConfig, SessionConfig,
    SessionStats,
};
pub use soe_wire::{Channel, DisconnectReason};
/// The protocol crates, re-exported so applications need only this one (or an adapter).
pub use {bytes, soe_session, soe_wire};
