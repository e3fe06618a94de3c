//! `cargo xtask ci` and `cargo xtask test`.

use std::fmt;
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::cmd::{self, format_duration};
use crate::{Error, Result};

/// One check of `cargo xtask ci`, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `cargo fmt --all -- --check`.
    Fmt,
    /// `cargo clippy --workspace --all-targets -- -D warnings`.
    Clippy,
    /// `cargo test --workspace`: unit, integration and doc tests.
    Test,
    /// `cargo run --example demo`: the README's main job, over real loopback UDP.
    Demo,
    /// `cargo doc --workspace --no-deps` with warnings denied.
    Doc,
    /// `cargo deny check licenses bans sources`, when cargo-deny is installed.
    Deny,
}

impl Step {
    /// Every step, in running order.
    const ALL: [Self; 6] = [
        Self::Fmt,
        Self::Clippy,
        Self::Test,
        Self::Demo,
        Self::Doc,
        Self::Deny,
    ];

    /// The name used in output and by `--skip`.
    const fn name(self) -> &'static str {
        match self {
            Self::Fmt => "fmt",
            Self::Clippy => "clippy",
            Self::Test => "test",
            Self::Demo => "demo",
            Self::Doc => "doc",
            Self::Deny => "deny",
        }
    }

    /// The command that performs the step.
    fn command(self) -> Command {
        let mut cmd = cmd::cargo();
        match self {
            Self::Fmt => cmd.args(["fmt", "--all", "--", "--check"]),
            Self::Clippy => cmd.args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]),
            Self::Test => cmd.args(["test", "--workspace"]),
            Self::Demo => cmd.args(["run", "--quiet", "--example", "demo"]),
            Self::Doc => cmd
                .args(["doc", "--workspace", "--no-deps"])
                .env("RUSTDOCFLAGS", "-D warnings"),
            Self::Deny => cmd.args(["deny", "check", "licenses", "bans", "sources"]),
        };
        cmd
    }

    /// Why the step cannot run on this machine, if it cannot.
    ///
    /// A missing rustfmt or clippy is an error (CI must not pass without them unless asked to with
    /// `--skip`); a missing cargo-deny only skips its step, as installing it takes minutes.
    fn unavailable(self) -> Option<Unavailable> {
        let probe = |subcommand: &str| {
            let mut cmd = cmd::cargo();
            cmd.args([subcommand, "--version"]);
            cmd::succeeds_quietly(&mut cmd)
        };
        match self {
            Self::Fmt if !probe("fmt") => Some(Unavailable::Fail(
                "rustfmt is not installed: run `rustup component add rustfmt`, \
                 or pass `--skip fmt`",
            )),
            Self::Clippy if !probe("clippy") => Some(Unavailable::Fail(
                "clippy is not installed: run `rustup component add clippy`, \
                 or pass `--skip clippy`",
            )),
            Self::Deny if !probe("deny") => Some(Unavailable::Skip(
                "cargo-deny is not installed (`cargo install cargo-deny --locked`)",
            )),
            _ => None,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Step {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|step| step.name() == s)
            .ok_or_else(|| {
                Error::usage(format!(
                    "unknown ci step `{s}`; the steps are fmt, clippy, test, demo, doc and deny"
                ))
            })
    }
}

/// Why a step does not run.
#[derive(Debug, Clone, Copy)]
enum Unavailable {
    /// The run fails with this message.
    Fail(&'static str),
    /// The step is skipped with this message.
    Skip(&'static str),
}

/// What became of one step.
#[derive(Debug, Clone)]
enum Outcome {
    Passed(Duration),
    Skipped(&'static str),
    Failed(Duration),
}

/// Runs every step not in `skip`, in order, stopping at the first failure.
pub(crate) fn run(skip: &[Step]) -> Result<()> {
    let started = Instant::now();
    let total = Step::ALL.len();
    let mut outcomes: Vec<(Step, Outcome)> = Vec::with_capacity(total);

    for (index, step) in Step::ALL.into_iter().enumerate() {
        let position = format!("[{}/{total}]", index + 1);
        if skip.contains(&step) {
            println!("==> {position} {step}: skipped (--skip {step})");
            outcomes.push((step, Outcome::Skipped("--skip")));
            continue;
        }
        match step.unavailable() {
            Some(Unavailable::Skip(why)) => {
                println!("==> {position} {step}: skipped: {why}");
                outcomes.push((step, Outcome::Skipped(why)));
                continue;
            }
            Some(Unavailable::Fail(why)) => {
                print_summary(&outcomes, started.elapsed());
                return Err(Error::new(format!("ci step `{step}` cannot run: {why}")));
            }
            None => {}
        }

        let mut command = step.command();
        println!("==> {position} {step}: {}", cmd::describe(&command));
        let step_started = Instant::now();
        match cmd::run_timed(&mut command) {
            Ok(took) => {
                println!("==> {step}: ok in {}", format_duration(took));
                outcomes.push((step, Outcome::Passed(took)));
            }
            Err(err) => {
                outcomes.push((step, Outcome::Failed(step_started.elapsed())));
                print_summary(&outcomes, started.elapsed());
                return Err(Error::new(format!("ci step `{step}` failed: {err}")));
            }
        }
    }

    print_summary(&outcomes, started.elapsed());
    println!("ci: all steps passed");
    Ok(())
}

/// Runs the test suite alone: `cargo test --workspace`, the same command as the `test` step.
pub(crate) fn test() -> Result<()> {
    let mut command = Step::Test.command();
    println!("==> {}", cmd::describe(&command));
    let took = cmd::run_timed(&mut command)?;
    println!("==> tests passed in {}", format_duration(took));
    Ok(())
}

/// Prints one line per step that ran or was skipped, then the total time.
fn print_summary(outcomes: &[(Step, Outcome)], total: Duration) {
    println!();
    println!("ci summary:");
    for (step, outcome) in outcomes {
        let line = match outcome {
            Outcome::Passed(took) => format!("ok       {:>12}", format_duration(*took)),
            Outcome::Failed(took) => format!("FAILED   {:>12}", format_duration(*took)),
            Outcome::Skipped(why) => format!("skipped  ({why})"),
        };
        println!("  {:<8} {line}", step.name());
    }
    println!("  {:<8} {:>21}", "total", format_duration(total));
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_round_trip() {
        for step in Step::ALL {
            assert_eq!(step.name().parse::<Step>(), Ok(step));
        }
        assert!("lint".parse::<Step>().is_err());
    }

    #[test]
    fn commands_match_the_documented_ones() {
        let described: Vec<String> = Step::ALL
            .into_iter()
            .map(|step| cmd::describe(&step.command()))
            .collect();
        assert_eq!(
            described,
            [
                "cargo fmt --all -- --check",
                "cargo clippy --workspace --all-targets -- -D warnings",
                "cargo test --workspace",
                "cargo run --quiet --example demo",
                "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps",
                "cargo deny check licenses bans sources",
            ]
        );
    }
}
