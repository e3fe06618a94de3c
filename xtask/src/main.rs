//! Project automation for the SOE workspace, in the [xtask] style: plain Rust, no dependencies,
//! invoked as `cargo xtask <command>` through the alias in `.cargo/config.toml`.
//!
//! * `ci`: formatting, lints, tests, the demo, docs and (when installed) `cargo deny`, in that order,
//!   stopping at the first failure. `.ci/run` calls it.
//! * `test`: the test suite alone.
//! * `bench`: the criterion benchmarks, summarised in `target/bench-report.md`.
//! * `fuzz`: each `cargo fuzz` target for a bounded time, when nightly and cargo-fuzz exist.
//!
//! [xtask]: https://github.com/matklad/cargo-xtask

#![forbid(unsafe_code)]

mod bench;
mod ci;
mod cmd;
mod fuzz;
mod json;

use std::fmt;
use std::process::ExitCode;

/// The text printed by `cargo xtask --help`.
const HELP: &str = "\
cargo xtask: automation for the SOE protocol workspace

USAGE:
    cargo xtask <COMMAND> [OPTIONS]

COMMANDS:
    ci [--skip STEP]...   Run every check CI runs, in order, stopping at the first failure:
                            fmt     cargo fmt --all -- --check
                            clippy  cargo clippy --workspace --all-targets -- -D warnings
                            test    cargo test --workspace
                            demo    cargo run --example demo (the README's main job, loopback UDP)
                            doc     cargo doc --workspace --no-deps (RUSTDOCFLAGS=\"-D warnings\")
                            deny    cargo deny check licenses bans sources
                                    (skipped when cargo-deny is not installed)
                          --skip STEP leaves a step out (repeatable; STEP as named above).
    test                  Run the test suite: cargo test --workspace (unit, integration
                          and doc tests).
    bench [--quick]       Run every benchmark target (cargo bench --workspace --bench '*')
                          and summarise this run (mean time, throughput) in
                          target/bench-report.md.
                          --quick: shorter criterion warm-up (1 s) and measurement (2 s).
    fuzz [--seconds N]    Run each cargo-fuzz target in fuzz/ for N seconds (default 30).
                          Needs the nightly toolchain and cargo-fuzz; without them it says so
                          and exits successfully (the seeded random-input tests of the normal
                          suite cover the no-panic promise on stable).
    help, -h, --help      Print this text.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match Command::parse(&args).and_then(Command::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            err.exit_code()
        }
    }
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    /// Print the help text.
    Help,
    /// `ci`, without the listed steps.
    Ci { skip: Vec<ci::Step> },
    /// `test`.
    Test,
    /// `bench`, short when `quick`.
    Bench { quick: bool },
    /// `fuzz` for `seconds` per target.
    Fuzz { seconds: u64 },
}

impl Command {
    /// Parses the arguments that follow `cargo xtask`.
    fn parse(args: &[String]) -> Result<Self> {
        let Some((name, rest)) = args.split_first() else {
            return Ok(Self::Help);
        };
        match name.as_str() {
            "help" | "-h" | "--help" => Ok(Self::Help),
            "ci" => {
                let mut skip = Vec::new();
                let mut rest = rest.iter();
                while let Some(arg) = rest.next() {
                    match arg.as_str() {
                        "--skip" => {
                            let step = rest.next().ok_or_else(|| {
                                Error::usage(
                                    "`--skip` needs a step name (fmt, clippy, test, demo, doc or deny)",
                                )
                            })?;
                            skip.push(step.parse()?);
                        }
                        "-h" | "--help" => return Ok(Self::Help),
                        other => return Err(Error::unexpected("ci", other)),
                    }
                }
                Ok(Self::Ci { skip })
            }
            "test" => match rest.first().map(String::as_str) {
                None => Ok(Self::Test),
                Some("-h" | "--help") => Ok(Self::Help),
                Some(other) => Err(Error::unexpected("test", other)),
            },
            "bench" => {
                let mut quick = false;
                for arg in rest {
                    match arg.as_str() {
                        "--quick" => quick = true,
                        "-h" | "--help" => return Ok(Self::Help),
                        other => return Err(Error::unexpected("bench", other)),
                    }
                }
                Ok(Self::Bench { quick })
            }
            "fuzz" => {
                let mut seconds = fuzz::DEFAULT_SECONDS;
                let mut rest = rest.iter();
                while let Some(arg) = rest.next() {
                    match arg.as_str() {
                        "--seconds" => {
                            let value = rest
                                .next()
                                .ok_or_else(|| Error::usage("`--seconds` needs a number"))?;
                            seconds = parse_seconds(value)?;
                        }
                        "-h" | "--help" => return Ok(Self::Help),
                        other => match other.strip_prefix("--seconds=") {
                            Some(value) => seconds = parse_seconds(value)?,
                            None => return Err(Error::unexpected("fuzz", other)),
                        },
                    }
                }
                Ok(Self::Fuzz { seconds })
            }
            other => Err(Error::usage(format!(
                "unknown command `{other}`; run `cargo xtask --help` for the list"
            ))),
        }
    }

    /// Runs the command.
    fn run(self) -> Result<()> {
        match self {
            Self::Help => {
                print!("{HELP}");
                Ok(())
            }
            Self::Ci { skip } => ci::run(&skip),
            Self::Test => ci::test(),
            Self::Bench { quick } => bench::run(quick),
            Self::Fuzz { seconds } => fuzz::run(seconds),
        }
    }
}

/// Parses the value of `--seconds`: a whole number of seconds, at least one.
fn parse_seconds(value: &str) -> Result<u64> {
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::usage(format!(
            "`--seconds` takes a whole number of seconds greater than 0, not `{value}`"
        ))),
    }
}

/// The result type of every xtask operation.
type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a command failed, with a message written for the person at the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Error {
    message: String,
    usage: bool,
}

impl Error {
    /// A failure of the work itself (a step failed, a file could not be read).
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            usage: false,
        }
    }

    /// A mistake in the command line.
    fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            usage: true,
        }
    }

    /// An argument the given command does not take.
    fn unexpected(command: &str, arg: &str) -> Self {
        Self::usage(format!(
            "`cargo xtask {command}` does not take `{arg}`; run `cargo xtask --help`"
        ))
    }

    /// The process exit code for this error: 2 for usage mistakes, 1 otherwise.
    fn exit_code(&self) -> ExitCode {
        if self.usage {
            ExitCode::from(2)
        } else {
            ExitCode::FAILURE
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        Command::parse(&args)
    }

    #[test]
    fn no_arguments_or_help_flags_print_help() {
        assert_eq!(parse(&[]), Ok(Command::Help));
        for flag in ["help", "-h", "--help"] {
            assert_eq!(parse(&[flag]), Ok(Command::Help));
        }
        assert_eq!(parse(&["bench", "--help"]), Ok(Command::Help));
    }

    #[test]
    fn ci_takes_repeated_skips() {
        assert_eq!(parse(&["ci"]), Ok(Command::Ci { skip: vec![] }));
        assert_eq!(
            parse(&["ci", "--skip", "fmt", "--skip", "deny"]),
            Ok(Command::Ci {
                skip: vec![ci::Step::Fmt, ci::Step::Deny]
            })
        );
        assert!(parse(&["ci", "--skip"]).is_err());
        assert!(parse(&["ci", "--skip", "lint"]).is_err());
    }

    #[test]
    fn test_takes_no_arguments() {
        assert_eq!(parse(&["test"]), Ok(Command::Test));
        assert!(parse(&["test", "-p"]).is_err());
    }

    #[test]
    fn bench_and_fuzz_options() {
        assert_eq!(parse(&["bench"]), Ok(Command::Bench { quick: false }));
        assert_eq!(
            parse(&["bench", "--quick"]),
            Ok(Command::Bench { quick: true })
        );
        assert_eq!(
            parse(&["fuzz"]),
            Ok(Command::Fuzz {
                seconds: fuzz::DEFAULT_SECONDS
            })
        );
        assert_eq!(
            parse(&["fuzz", "--seconds", "5"]),
            Ok(Command::Fuzz { seconds: 5 })
        );
        assert_eq!(
            parse(&["fuzz", "--seconds=7"]),
            Ok(Command::Fuzz { seconds: 7 })
        );
        assert!(parse(&["fuzz", "--seconds", "0"]).is_err());
        assert!(parse(&["fuzz", "--seconds", "x"]).is_err());
    }

    #[test]
    fn unknown_commands_are_usage_errors() {
        let err = parse(&["deploy"]).unwrap_err();
        assert!(err.usage);
        assert!(err.to_string().contains("deploy"));
    }
}
