//! `cargo xtask sim`: a sweep of the whole-server simulation (soe-sim) over a range of seeds,
//! in a release build. Each failing seed is printed with the one command that replays it.

use crate::cmd::{self, format_duration};
use crate::{Error, Result};

/// What `cargo xtask sim` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SimArgs {
    /// Seeds to run.
    pub(crate) seeds: u64,
    /// The first seed.
    pub(crate) from: u64,
    /// At most this many clients per run.
    pub(crate) clients: Option<usize>,
    /// Seconds of traffic and faults per run.
    pub(crate) active: Option<u64>,
    /// No faults.
    pub(crate) no_faults: bool,
    /// A planted bug (mutate, drop, deadline, queue).
    pub(crate) plant: Option<String>,
}

/// Runs the sweep: `cargo run --release -p soe-sim --bin soe-sim -- ...`.
pub(crate) fn run(args: &SimArgs) -> Result<()> {
    let mut command = cmd::cargo();
    command.args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "soe-sim",
        "--bin",
        "soe-sim",
        "--",
    ]);
    command.args([
        "--seeds",
        &args.seeds.to_string(),
        "--from",
        &args.from.to_string(),
    ]);
    if let Some(n) = args.clients {
        command.args(["--clients", &n.to_string()]);
    }
    if let Some(s) = args.active {
        command.args(["--active", &s.to_string()]);
    }
    if args.no_faults {
        command.arg("--no-faults");
    }
    if let Some(p) = &args.plant {
        command.args(["--plant", p]);
    }
    println!("==> {}", cmd::describe(&command));
    let took = cmd::run_timed(&mut command).map_err(|err| {
        Error::new(format!(
            "the simulation found failing seeds (each is printed above with its replay \
             command): {err}"
        ))
    })?;
    println!(
        "==> sim: {} seeds passed in {}",
        args.seeds,
        format_duration(took)
    );
    Ok(())
}
