//! An in-memory, virtual-time network emulator and benchmark harness for SOE protocol stacks.
//!
//! * [`emulator`]: one seeded [`Link`] per direction: a bottleneck (rate, drop-tail queue), then
//!   one-way delay, Bernoulli loss, Gilbert–Elliott burst loss, reordering and duplication.
//! * [`stack`]: the stacks under test behind one [`Stack`] trait: our endpoints
//!   ([`StackKind::Ours`]), our client against our server acking like h1z1-server
//!   ([`StackKind::OursVsSlowAcker`]), our client against a model of h1z1-server's reliable
//!   layer written from its source ([`StackKind::OursVsH1z1`], [`h1z1`]), and soe-protocol 2.3.0
//!   on both sides
//!   ([`StackKind::SoeProtocol`]).
//! * [`workload`]: echo, bulk and 20 Hz game-tick traffic whose every message is verified on
//!   delivery (exactly once, in order, byte for byte).
//! * [`run`](mod@run): one run: the clock jumps to the next event (an arrival, either stack's
//!   deadline, the workload's tick), so simulated minutes cost milliseconds; no sleeping, no
//!   sockets, and every random choice comes from the run's seed.
//! * [`grid`]: [`run_grid`] over round trips, conditions, workloads and stacks, with a
//!   Markdown report ([`GridReport::to_markdown`]) and a targets table.
//!
//! The `netem-grid` binary prints the report:
//! `cargo run -p soe-netem --release --bin netem-grid -- [--quick] [--out FILE]`.
//!
//! ```
//! use std::time::Duration;
//! use soe_netem::{Condition, RunConfig, StackKind, Workload, run};
//!
//! let config = RunConfig::new(
//!     StackKind::Ours,
//!     Workload::Echo,
//!     Duration::from_millis(30),
//!     Condition::loss(0.05),
//!     7,
//! )
//! .with_duration(Duration::from_secs(2));
//! let result = run(&config);
//! assert!(result.is_clean(), "seed {}: {:?}", result.seed, result.verdict);
//! assert!(result.goodput > 0.0);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

pub mod emulator;
pub mod grid;
pub mod h1z1;
pub mod run;
pub mod stack;
pub mod workload;

pub use emulator::{GilbertElliott, Link, LinkConfig, LinkStats};
pub use grid::{Cell, GridOptions, GridReport, Target, grid_conditions, run_grid};
pub use run::{Condition, RunConfig, RunResult, STALL, run};
pub use stack::{Side, Stack, StackCounters, StackKind};
pub use workload::{Verdict, Workload};
