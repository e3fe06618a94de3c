//! Project automation for the SOE workspace, in the [xtask] style: plain Rust invoked as
//! `cargo xtask <command>` through the alias in `.cargo/config.toml`. The command line is parsed
//! with clap and JSON (criterion's results, `cargo metadata`) is read with serde_json.
//!
//! * `ci`: formatting, lints, tests, the demo, docs, `cargo deny`, `cargo package` and the MSRV
//!   check, in that order, stopping at the first failure. `.ci/run` calls it.
//! * `test`: the test suite alone.
//! * `bench`: the criterion benchmarks, summarised in `target/bench-report.md`.
//! * `fuzz`: each `cargo fuzz` target for a bounded time, when nightly and cargo-fuzz exist.
//! * `c-abi`, `install-c`, `csharp`: the C library checked from C and C++, installed under a
//!   prefix (header, libraries, pkg-config, CMake), and checked from C# under mono.
//! * `cross`: the release artifacts of Windows, Linux arm64 and musl, and macOS, built here
//!   and checked (`target/cross/<triple>/`); `wine`: the Windows ones run under wine.
//! * `sim`: a sweep of the whole-server simulation over a range of seeds.
//!
//! [xtask]: https://github.com/matklad/cargo-xtask

#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

mod bench;
mod c_abi;
mod c_abi_game;
mod c_abi_install;
mod c_abi_recording;
mod ci;
mod cmd;
mod cross;
mod cross_run;
mod cross_tools;
mod csharp;
mod fuzz;
mod install_c;
mod install_c_windows;
mod links;
mod msrv;
mod node;
mod sim;
mod wine;
mod wine_node;

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// cargo xtask: automation for the SOE protocol workspace.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    /// What to run; without one, this help is printed.
    #[command(subcommand)]
    command: Option<Command>,
}

/// A command of `cargo xtask`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
enum Command {
    /// Run every check CI runs, in order, stopping at the first failure.
    ///
    /// The steps, in running order, are the values `--skip` takes (see `ci --help`).
    Ci {
        /// Leave a step out (repeatable).
        #[arg(long, value_name = "STEP")]
        skip: Vec<ci::Step>,
    },
    /// Run the test suite: cargo test --workspace (unit, integration and doc tests).
    Test,
    /// Run every benchmark target and summarise this run in target/bench-report.md, the
    /// loss-recovery grid included; with --compare, the side-by-side report instead.
    Bench {
        /// Shorter runs: criterion's warm-up 1 s and measurement 2 s, the quick grid, small
        /// compare sizes.
        #[arg(long)]
        quick: bool,
        /// Run the side-by-side report (soe-bench's `compare`: our stack, soe-protocol 2.3.0
        /// and the machine's limits, with the loss-recovery grid) and write docs/performance.md
        /// and docs/performance.svg.
        #[arg(long)]
        compare: bool,
        /// With --compare: CI's smoke run of the report (the test profile, the page written
        /// under target/report-smoke/ rather than docs/).
        #[arg(long, requires = "compare")]
        smoke: bool,
        /// With --compare: run the report's fixed-load section this many times, interleaved,
        /// and report the median round of each figure (1 to 20).
        #[arg(long, requires = "compare", default_value_t = 1,
              value_parser = clap::value_parser!(u16).range(1..=20))]
        fixed_rounds: u16,
    },
    /// Run each cargo-fuzz target in fuzz/ for a bounded time.
    ///
    /// Needs the nightly toolchain and cargo-fuzz; without them it says so and exits
    /// successfully (the seeded random-input tests of the normal suite cover the no-panic
    /// promise on stable).
    Fuzz {
        /// Seconds per target.
        #[arg(long, value_name = "N", default_value_t = fuzz::DEFAULT_SECONDS,
              value_parser = clap::value_parser!(u64).range(1..))]
        seconds: u64,
    },
    /// Build and run the C ABI's C and C++ programs (soe-ffi): the C echo server and client
    /// against the `soe` tool, the error paths, the C++ header check; under valgrind when
    /// installed.
    CAbi,
    /// Install the C library under a prefix, as C libraries are taken: include/soe.h,
    /// lib/libsoe.a, lib/libsoe.so.X.Y.Z with its SONAME symlinks, lib/pkgconfig/soe.pc and
    /// lib/cmake/soe/soeConfig.cmake (imported targets soe::soe and soe::soe_static).
    InstallC {
        /// Where to install (created if missing).
        #[arg(long, value_name = "DIR")]
        prefix: PathBuf,
        /// The cargo profile the libraries are built with.
        #[arg(long, value_name = "NAME", default_value = install_c::DEFAULT_PROFILE)]
        profile: String,
        /// Keep the libraries' debug information (no `strip --strip-debug`).
        #[arg(long)]
        no_strip: bool,
        /// Install for another platform: `x86_64-pc-windows-gnu` lays out bin/soe.dll,
        /// lib/soe.dll.a, lib/soe.lib and lib/libsoe.a (built by `cross --target win`).
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,
    },
    /// Compile the C# binding (bindings/csharp) with mono's mcs and run its checks and its echo
    /// server and client under mono against the `soe` tool (needs mono-mcs and mono-runtime).
    Csharp,
    /// Build the Node addon (soe-node) and run its tests with Node's runner (`npm test`).
    Node,
    /// Check that every link of the Markdown pages resolves (remark-validate-links, installed
    /// with npm under target/xtask-tools).
    Links,
    /// Build the release artifacts for other platforms into `target/cross/<triple>/` (`soe`, the
    /// C library, the Node addon) and check them: Windows x86-64 (MinGW), Linux arm64 and musl,
    /// macOS x86-64 and arm64 (zig links; built, not run).
    ///
    /// Uses rustup's standard library where rustup has the target, else Debian's Rust with
    /// -Zbuild-std; installs what a target needs when missing (apt-get, pip, cargo install).
    Cross {
        /// A target to build (repeatable; default: all).
        #[arg(long = "target", value_name = "TARGET")]
        targets: Vec<cross::Pick>,
        /// Also run the test suites of soe-session and soe-runtime where they run here: the
        /// musl build natively, the arm64 one under qemu-user.
        #[arg(long)]
        tests: bool,
    },
    /// Run the Windows build under wine: the OS-touching test suites (soe-runtime, soe-tokio,
    /// soe-async-std, soe-cli), soe.exe against the Linux soe both ways, the C echo server
    /// built with MinGW, and node.exe 22 with the packed addon against `soe load`.
    ///
    /// Builds the Windows artifacts first (`cross --target win`) when they are missing.
    Wine {
        /// Leave the Rust test suites out.
        #[arg(long)]
        no_tests: bool,
        /// Leave node.exe out.
        #[arg(long)]
        no_node: bool,
        /// Leave out clippy for the Windows target.
        #[arg(long)]
        no_clippy: bool,
    },
    /// Run the whole-server simulation (soe-sim) over a range of seeds, release build.
    ///
    /// A failing seed is printed with the one command that replays it.
    Sim {
        /// Seeds to run.
        #[arg(long, value_name = "N", default_value_t = 100)]
        seeds: u64,
        /// The first seed.
        #[arg(long, value_name = "S", default_value_t = 0)]
        from: u64,
        /// At most this many clients per run (default 24; up to 500 and more).
        #[arg(long, value_name = "N")]
        clients: Option<usize>,
        /// Seconds of traffic and faults per run (default 150).
        #[arg(long, value_name = "SECS")]
        active: Option<u64>,
        /// Schedule no faults.
        #[arg(long)]
        no_faults: bool,
        /// Plant a bug the checks must catch: mutate, drop or deadline.
        #[arg(long, value_name = "BUG")]
        plant: Option<String>,
    },
}

impl Command {
    /// Runs the command.
    fn run(self) -> Result<()> {
        match self {
            Self::Ci { skip } => ci::run(&skip),
            Self::Test => ci::test(),
            Self::Bench {
                quick,
                compare,
                smoke,
                fixed_rounds,
            } => bench::run(quick, compare, smoke, fixed_rounds),
            Self::Fuzz { seconds } => fuzz::run(seconds),
            Self::CAbi => c_abi::run(),
            Self::InstallC {
                prefix,
                profile,
                no_strip,
                target,
            } => match target.as_deref() {
                None => install_c::run(&prefix, &profile, !no_strip).map(|_| ()),
                Some("x86_64-pc-windows-gnu") => install_c_windows::run(&prefix),
                Some(other) => Err(Error::new(format!(
                    "install-c --target {other}: only x86_64-pc-windows-gnu is laid out \
                     (its other platforms' libraries are in target/cross/<triple>/ after \
                     `cargo xtask cross`)"
                ))),
            },
            Self::Csharp => csharp::run(),
            Self::Node => node::run(),
            Self::Links => links::run(),
            Self::Cross { targets, tests } => cross::run(&targets, tests),
            Self::Wine {
                no_tests,
                no_node,
                no_clippy,
            } => wine::run(wine::Skip {
                tests: no_tests,
                node: no_node,
                clippy: no_clippy,
            }),
            Self::Sim {
                seeds,
                from,
                clients,
                active,
                no_faults,
                plant,
            } => sim::run(&sim::SimArgs {
                seeds,
                from,
                clients,
                active,
                no_faults,
                plant,
            }),
        }
    }
}

fn main() -> ExitCode {
    // Usage mistakes and --help are reported by clap itself (exit code 2 and 0).
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        // Printing to a closed stdout is not worth an error.
        let _ = Cli::command().print_help();
        return ExitCode::SUCCESS;
    };
    match command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The result type of every xtask operation.
type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a command failed, with a message written for the person at the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Error {
    message: String,
}

impl Error {
    /// A failure of the work itself (a step failed, a file could not be read).
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
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

    fn parse(args: &[&str]) -> Result<Option<Command>, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(args.iter().copied()))
            .map(|cli| cli.command)
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_arguments_means_help_and_help_flags_are_not_errors() {
        assert_eq!(parse(&[]).unwrap(), None);
        for args in [&["help"][..], &["-h"], &["--help"], &["bench", "--help"]] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
        }
    }

    #[test]
    fn ci_takes_repeated_skips() {
        assert_eq!(parse(&["ci"]).unwrap(), Some(Command::Ci { skip: vec![] }));
        assert_eq!(
            parse(&["ci", "--skip", "fmt", "--skip", "deny"]).unwrap(),
            Some(Command::Ci {
                skip: vec![ci::Step::Fmt, ci::Step::Deny]
            })
        );
        assert_eq!(
            parse(&["ci", "--skip=msrv", "--skip", "package"]).unwrap(),
            Some(Command::Ci {
                skip: vec![ci::Step::Msrv, ci::Step::Package]
            })
        );
        assert!(parse(&["ci", "--skip"]).is_err());
        assert!(parse(&["ci", "--skip", "lint"]).is_err());
    }

    #[test]
    fn test_takes_no_arguments() {
        assert_eq!(parse(&["test"]).unwrap(), Some(Command::Test));
        assert!(parse(&["test", "-p"]).is_err());
    }

    #[test]
    fn bench_and_fuzz_options() {
        assert_eq!(
            parse(&["bench"]).unwrap(),
            Some(Command::Bench {
                quick: false,
                compare: false,
                smoke: false,
                fixed_rounds: 1
            })
        );
        assert_eq!(
            parse(&["bench", "--quick"]).unwrap(),
            Some(Command::Bench {
                quick: true,
                compare: false,
                smoke: false,
                fixed_rounds: 1
            })
        );
        assert_eq!(
            parse(&["bench", "--compare", "--quick"]).unwrap(),
            Some(Command::Bench {
                quick: true,
                compare: true,
                smoke: false,
                fixed_rounds: 1
            })
        );
        assert_eq!(
            parse(&["bench", "--compare", "--quick", "--smoke"]).unwrap(),
            Some(Command::Bench {
                quick: true,
                compare: true,
                smoke: true,
                fixed_rounds: 1
            })
        );
        assert!(parse(&["bench", "--smoke"]).is_err());
        assert_eq!(
            parse(&["bench", "--compare", "--fixed-rounds", "5"]).unwrap(),
            Some(Command::Bench {
                quick: false,
                compare: true,
                smoke: false,
                fixed_rounds: 5
            })
        );
        assert!(parse(&["bench", "--fixed-rounds", "5"]).is_err());
        assert!(parse(&["bench", "--compare", "--fixed-rounds", "0"]).is_err());
        assert_eq!(
            parse(&["fuzz"]).unwrap(),
            Some(Command::Fuzz {
                seconds: fuzz::DEFAULT_SECONDS
            })
        );
        assert_eq!(
            parse(&["fuzz", "--seconds", "5"]).unwrap(),
            Some(Command::Fuzz { seconds: 5 })
        );
        assert_eq!(
            parse(&["fuzz", "--seconds=7"]).unwrap(),
            Some(Command::Fuzz { seconds: 7 })
        );
        assert!(parse(&["fuzz", "--seconds", "0"]).is_err());
        assert!(parse(&["fuzz", "--seconds", "x"]).is_err());
    }

    #[test]
    fn sim_takes_a_seed_range_and_a_replay_line() {
        assert_eq!(
            parse(&[
                "sim",
                "--from",
                "42",
                "--seeds",
                "1",
                "--clients",
                "8",
                "--plant",
                "drop"
            ])
            .unwrap(),
            Some(Command::Sim {
                seeds: 1,
                from: 42,
                clients: Some(8),
                active: None,
                no_faults: false,
                plant: Some("drop".into()),
            })
        );
        assert!(matches!(
            parse(&["sim"]).unwrap(),
            Some(Command::Sim {
                seeds: 100,
                from: 0,
                ..
            })
        ));
        assert!(parse(&["sim", "--seeds", "x"]).is_err());
    }

    #[test]
    fn install_c_takes_a_prefix_and_a_profile() {
        assert_eq!(
            parse(&["install-c", "--prefix", "/opt/soe"]).unwrap(),
            Some(Command::InstallC {
                prefix: "/opt/soe".into(),
                profile: "c-release".into(),
                no_strip: false,
                target: None,
            })
        );
        assert_eq!(
            parse(&["install-c", "--prefix=p", "--profile", "dev", "--no-strip"]).unwrap(),
            Some(Command::InstallC {
                prefix: "p".into(),
                profile: "dev".into(),
                no_strip: true,
                target: None,
            })
        );
        assert!(parse(&["install-c"]).is_err());
    }

    #[test]
    fn unknown_commands_are_usage_errors() {
        let err = parse(&["deploy"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidSubcommand);
        assert_eq!(err.exit_code(), 2);
    }
}
