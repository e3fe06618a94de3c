//! Run SOE protocol endpoints.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod runtime;
pub use runtime::TokioRuntime;
