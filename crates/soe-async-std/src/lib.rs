//! Run SOE protocol (v3) endpoints on async-std, or on smol or any executor: the socket and timer
//! belong to async-io's global reactor, and the driver task is spawned on async-std's executor.
//!
//! The driver lives in [`soe_runtime`]; this crate supplies [`AsyncStdRuntime`] and names the
//! endpoint type: [`Endpoint`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use soe_async_std::{Endpoint, EndpointConfig, SessionConfig, bytes::Bytes};
//!
//! # async fn run() -> std::io::Result<()> {
//! let session = Arc::new(SessionConfig::new("MyGame_1"));
//! let client = Endpoint::client(EndpointConfig::client(session))?;
//! let conn = client.connect("127.0.0.1:20042".parse().unwrap()).await?;
//! conn.send(Bytes::from_static(b"hello")).await?;
//! let reply = conn.recv().await;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod runtime;

pub use runtime::AsyncStdRuntime;
pub use soe_runtime::{
    Channel, CloseReason, Config, ConnectError, Connection, ConnectionId, Delivery,
    DisconnectReason, EndpointConfig, EndpointEvent, EndpointStats, EventMode, Events, Recording,
    RecordingConfig, SendBatch, SendError, SessionConfig, SessionStats, SocketConfig, TrySendError,
    bytes, soe_session, soe_wire,
};

/// An SOE endpoint whose driver runs on async-std / async-io; see [`soe_runtime::Endpoint`].
pub type Endpoint = soe_runtime::Endpoint<AsyncStdRuntime>;
