//! Run SOE protocol (v3) endpoints on tokio.
//!
//! The driver lives in [`soe_runtime`]; this crate supplies tokio's timer, socket and spawner
//! ([`TokioRuntime`]) and names the endpoint type: [`Endpoint`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use soe_tokio::{Config, Endpoint, EndpointConfig, SessionConfig, bytes::Bytes};
//!
//! # async fn run() -> std::io::Result<()> {
//! let session = Arc::new(SessionConfig::new("MyGame_1"));
//! let server = Endpoint::bind("127.0.0.1:20042".parse().unwrap(), EndpointConfig::server(session.clone()))?;
//! tokio::spawn(async move {
//!     while let Some(conn) = server.accept().await {
//!         tokio::spawn(async move {
//!             while let Some(msg) = conn.recv().await {
//!                 let _ = conn.send(msg).await; // echo
//!             }
//!         });
//!     }
//! });
//!
//! let client = Endpoint::client(EndpointConfig::client(session))?;
//! let conn = client.connect("127.0.0.1:20042".parse().unwrap()).await?;
//! conn.send(Bytes::from_static(b"hello")).await?;
//! assert_eq!(conn.recv().await.as_deref(), Some(&b"hello"[..]));
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(any(target_os = "linux", target_os = "android"))]
mod held;
mod runtime;

pub use runtime::TokioRuntime;
pub use soe_runtime::{
    Channel, CloseReason, Config, ConnectError, Connection, ConnectionId, Delivery,
    DisconnectReason, EndpointConfig, EndpointEvent, EndpointStats, EventMode, Events, Recording,
    RecordingConfig, SendBatch, SendError, SessionConfig, SessionStats, SocketConfig, TrySendError,
    bytes, soe_session, soe_wire,
};

/// An SOE endpoint whose driver runs on tokio; see [`soe_runtime::Endpoint`].
///
/// [`Endpoint::bind`] and [`Endpoint::client`] must be called within a tokio runtime (they fail
/// with an I/O error otherwise).
pub type Endpoint = soe_runtime::Endpoint<TokioRuntime>;
