//! Runtime-agnostic driver for SOE protocol endpoints.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod runtime;
pub mod socket;

/// The batched UDP I/O layer (`quinn-udp`) the adapters use.
pub use quinn_udp as udp;
pub use runtime::{AsyncTimer, AsyncUdpSocket, Runtime};
pub use socket::SocketConfig;
