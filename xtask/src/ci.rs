//! `cargo xtask ci` and `cargo xtask test`.

use std::fmt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cmd::{self, format_duration};
use crate::{Error, Result};

/// The library crates, in dependency order: the ones `msrv` checks.
pub(crate) const LIBRARY_CRATES: [&str; 9] = [
    "soe-crypto",
    "soe-wire",
    "soe-reliable",
    "soe-session",
    "soe-winsock",
    "soe-runtime",
    "soe-tokio",
    "soe-async-std",
    "soe-dissect",
];

/// The command-line tool, published after the library crates it builds on (`package` checks
/// it with them).
pub(crate) const TOOL_CRATE: &str = "soe-cli";

/// The minimum supported Rust version of the library crates (`rust-version` in the workspace
/// manifest), as a rustup toolchain name.
pub(crate) const MSRV: &str = "1.85";

/// One check of `cargo xtask ci`, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Step {
    /// `cargo fmt --all -- --check`.
    Fmt,
    /// `cargo clippy --workspace --all-targets -- -D warnings`.
    Clippy,
    /// `cargo test --workspace`: unit, integration and doc tests.
    Test,
    /// `cargo xtask c-abi`: the C library installed under a prefix and taken from there with
    /// pkg-config and CMake, then checked from C and C++ (examples against the `soe` tool, error
    /// paths, teardown, header check) under valgrind memcheck. Skipped without a C compiler,
    /// and run without memory checks (or without the pkg-config or CMake build) where those
    /// tools are missing, except under `CI=true`, where any of that fails.
    CAbi,
    /// `cargo xtask csharp`: the C# binding compiled with mono's mcs and run under mono (struct
    /// layouts against the C compiler's, errors, the echo server and client against the `soe`
    /// tool). Skipped where mcs or mono is absent, except under `CI=true`, where that fails.
    Csharp,
    /// `cargo xtask node`: the Node addon built and tested with `npm test`. Skipped where Node
    /// is absent, except under `CI=true`, where that fails.
    Node,
    /// `cargo xtask wine`, which first does `cargo xtask cross --target win`: the Windows x86-64 build
    /// (`soe.exe`, `soe.dll` with its import libraries, the addon) and its runs under wine (the
    /// OS-touching test suites, `soe.exe` against the Linux `soe` both ways, the C echo server
    /// built with MinGW through CMake, `node.exe` 22 with the packed addon). Skipped where wine,
    /// MinGW-w64 or Debian's Rust (rustc-web, cargo-web, rust-web-src) is absent, except under
    /// `CI=true`, where that fails.
    Windows,
    /// `cargo run --example demo`: the README's main job, over real loopback UDP.
    Demo,
    /// `cargo xtask bench --compare --quick --smoke`: the report as a smoke test (the fixed-load
    /// section included), built with the test profile and written under `target/` (it checks
    /// that the report runs, never its timings).
    Report,
    /// `cargo doc --workspace --no-deps` with warnings denied.
    Doc,
    /// `cargo xtask links`: every link of the Markdown pages resolves (remark-validate-links).
    /// Skipped where Node is absent, except under `CI=true`, where that fails.
    Links,
    /// `cargo deny check licenses bans sources`; skipped when cargo-deny is not installed,
    /// except under `CI=true`, where its absence fails the run.
    Deny,
    /// `cargo package` of every published crate (the libraries and `soe-cli`), in dependency
    /// order, with verification.
    Package,
    /// `cargo +1.85 check` of the library crates; skipped when that toolchain is not installed.
    Msrv,
}

impl Step {
    /// Every step, in running order.
    const ALL: [Self; 14] = [
        Self::Fmt,
        Self::Clippy,
        Self::Test,
        Self::CAbi,
        Self::Csharp,
        Self::Node,
        Self::Windows,
        Self::Demo,
        Self::Report,
        Self::Doc,
        Self::Links,
        Self::Deny,
        Self::Package,
        Self::Msrv,
    ];

    /// The name used in output and by `--skip`.
    const fn name(self) -> &'static str {
        match self {
            Self::Fmt => "fmt",
            Self::Clippy => "clippy",
            Self::Test => "test",
            Self::CAbi => "c-abi",
            Self::Csharp => "csharp",
            Self::Node => "node",
            Self::Windows => "windows",
            Self::Demo => "demo",
            Self::Report => "report",
            Self::Doc => "doc",
            Self::Links => "links",
            Self::Deny => "deny",
            Self::Package => "package",
            Self::Msrv => "msrv",
        }
    }

    /// The command that performs the step.
    fn command(self) -> Command {
        let mut cmd = if self == Self::Msrv {
            msrv_cargo()
        } else {
            cmd::cargo()
        };
        match self {
            Self::Fmt => {
                cmd.args(["fmt", "--all", "--", "--check"]);
            }
            Self::Clippy => {
                cmd.args([
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ]);
            }
            Self::Test => {
                cmd.args(["test", "--workspace"]);
            }
            Self::CAbi => {
                cmd.args(["xtask", "c-abi"]);
            }
            Self::Csharp => {
                cmd.args(["xtask", "csharp"]);
            }
            Self::Node => {
                cmd.args(["xtask", "node"]);
            }
            Self::Windows => {
                // `wine` first builds and checks what `cross --target win` does.
                cmd.args(["xtask", "wine"]);
            }
            Self::Links => {
                cmd.args(["xtask", "links"]);
            }
            Self::Demo => {
                cmd.args(["run", "--quiet", "--example", "demo"]);
            }
            Self::Report => {
                cmd.args(["xtask", "bench", "--compare", "--quick", "--smoke"]);
            }
            Self::Doc => {
                cmd.args(["doc", "--workspace", "--no-deps"])
                    .env("RUSTDOCFLAGS", "-D warnings");
            }
            Self::Deny => {
                cmd.args(["deny", "check", "licenses", "bans", "sources"]);
            }
            Self::Package => {
                // All the published crates in one invocation: cargo packages them in dependency
                // order and verifies each against the others' freshly packaged sources (a local
                // registry overlay), so unpublished path dependencies are no obstacle.
                // `--allow-dirty`: this is a check, not a release, and must also run on a working
                // tree with uncommitted changes.
                cmd.args(["package", "--locked", "--allow-dirty"]);
                for name in LIBRARY_CRATES.into_iter().chain([TOOL_CRATE]) {
                    cmd.args(["-p", name]);
                }
                // Emptied before each run (see `forget_unpacked_packages`).
                cmd.args(["--target-dir", PACKAGE_TARGET]);
            }
            Self::Msrv => {
                cmd.args(["check", "--locked"]);
                for name in LIBRARY_CRATES {
                    cmd.args(["-p", name]);
                }
                // Its own target directory: another compiler's artefacts are of no use to stable.
                cmd.args(["--target-dir", "target/msrv"]);
            }
        }
        cmd
    }

    /// Why the step cannot run on this machine, if it cannot.
    ///
    /// A missing rustfmt or clippy is an error (CI must not pass without them unless asked to with
    /// `--skip`). A missing cargo-deny skips its step on a developer's machine (installing it takes
    /// minutes) but fails under `CI=true`, where `.ci/run` installs it: a dependency policy that
    /// is checked nowhere is no policy. A missing MSRV toolchain only skips its step: rustup
    /// cannot fetch toolchains from the CI machines.
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
            Self::Deny if !probe("deny") => Some(if running_in_ci() {
                Unavailable::Fail(
                    "cargo-deny is not installed, and CI=true requires it \
                     (`.ci/run` installs it with `cargo install cargo-deny --locked`)",
                )
            } else {
                Unavailable::Skip(
                    "cargo-deny is not installed (`cargo install cargo-deny --locked`); \
                     under CI=true this fails",
                )
            }),
            Self::CAbi if !crate::c_abi::compiler_present() => Some(if running_in_ci() {
                Unavailable::Fail(
                    "no C compiler (`cc`, or $CC), and CI=true requires one \
                     (`.ci/run` installs gcc, g++, valgrind, pkg-config and cmake from the OS \
                     packages)",
                )
            } else {
                Unavailable::Skip(
                    "no C compiler (`cc`, or $CC): the C ABI is NOT checked from C; \
                     under CI=true this fails",
                )
            }),
            Self::Csharp if !crate::csharp::present() => Some(if running_in_ci() {
                Unavailable::Fail(
                    "mcs and mono are not installed, and CI=true requires them \
                     (`.ci/run` installs mono-mcs and mono-runtime from the OS packages)",
                )
            } else {
                Unavailable::Skip(
                    "mcs and mono are not installed: the C# binding is NOT checked; \
                     under CI=true this fails",
                )
            }),
            Self::Node if !crate::node::present() => Some(if running_in_ci() {
                Unavailable::Fail(
                    "node and npm are not installed, and CI=true requires them \
                     (`.ci/run` installs them from the OS packages)",
                )
            } else {
                Unavailable::Skip(
                    "node and npm are not installed: the Node addon is NOT tested; \
                     under CI=true this fails",
                )
            }),
            Self::Windows if !crate::wine::tools_present() => Some(if running_in_ci() {
                Unavailable::Fail(
                    "wine, MinGW-w64 (gcc-mingw-w64-x86-64, g++-mingw-w64-x86-64, mingw-w64-tools) \
                     or Debian's Rust (rustc-web, cargo-web, rust-web-src, rust-web-clippy) is \
                     not installed, and CI=true requires them (`.ci/run` installs them from the OS packages)",
                )
            } else {
                Unavailable::Skip(
                    "wine, MinGW-w64 or Debian's Rust (rustc-web, cargo-web, rust-web-src, \
                     rust-web-clippy) is not installed: the Windows build is NOT built or run; under CI=true this \
                     fails",
                )
            }),
            Self::Links if !crate::links::present() => Some(if running_in_ci() {
                Unavailable::Fail(
                    "node and npm are not installed, and CI=true requires them for the link \
                     check (`.ci/run` installs them from the OS packages)",
                )
            } else {
                Unavailable::Skip(
                    "node and npm are not installed: the Markdown links are NOT checked; \
                     under CI=true this fails",
                )
            }),
            Self::Msrv if !cmd::succeeds_quietly(msrv_cargo().arg("--version")) => {
                Some(Unavailable::Skip(
                    "MSRV NOT CHECKED: the Rust 1.85 toolchain is not installed, and it cannot \
                     be fetched from this machine (`rustup toolchain install 1.85` elsewhere)",
                ))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
                if step == Step::Msrv {
                    report_declared_msrvs();
                }
                outcomes.push((step, Outcome::Skipped(why)));
                continue;
            }
            Some(Unavailable::Fail(why)) => {
                print_summary(&outcomes, started.elapsed());
                return Err(Error::new(format!("ci step `{step}` cannot run: {why}")));
            }
            None => {}
        }

        if step == Step::Package {
            if let Some(home) = cmd::cargo_home() {
                forget_unpacked_packages(&home);
            }
            // What an earlier run compiled from those sources counts as built too (a registry
            // crate's version is its fingerprint), so the step builds in a directory of its own,
            // emptied first.
            let built = cmd::workspace_root().join(PACKAGE_TARGET);
            if let Err(e) = std::fs::remove_dir_all(&built) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    println!("    package: could not remove {}: {e}", built.display());
                }
            }
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

/// The `package` step's target directory (relative to the workspace, as the `msrv` step's is):
/// emptied before each run.
const PACKAGE_TARGET: &str = "target/package-check";

/// Removes the sources of our crates that an earlier `package` step unpacked from its local
/// registry overlay, so that this one verifies against the sources it has just packaged.
///
/// cargo unpacks a registry's crates into `registry/src/<registry>/<name>-<version>` once and
/// trusts that directory from then on, since a published version never changes. The overlay
/// that `cargo package` verifies the workspace's crates against has no host name, so its
/// directory is `-<hash>`, the hash of its path, which is the same for every run in the same
/// checkout. Our versions do change between runs, so a second run compiled a crate against the
/// first run's sources of its dependencies (a function added since was "unresolved"). Crates.io's
/// sources are left alone.
fn forget_unpacked_packages(cargo_home: &Path) {
    let Ok(registries) = std::fs::read_dir(cargo_home.join("registry").join("src")) else {
        return;
    };
    let ours: Vec<String> = LIBRARY_CRATES
        .into_iter()
        .chain([TOOL_CRATE])
        .map(|name| format!("{name}-"))
        .collect();
    for registry in registries.flatten() {
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for unpacked in crates.flatten() {
            let name = unpacked.file_name().to_string_lossy().into_owned();
            let version = |prefix: &String| name.strip_prefix(prefix.as_str());
            // `soe-wire-0.1.0`, not `soe-wire-extra-0.1.0`: the rest is a version.
            let is_ours = ours
                .iter()
                .filter_map(version)
                .any(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
            if is_ours {
                if let Err(e) = std::fs::remove_dir_all(unpacked.path()) {
                    println!(
                        "    package: could not remove {}: {e}",
                        unpacked.path().display()
                    );
                }
            }
        }
    }
}

/// The fallback of a skipped `msrv` step: warns (without failing the run) about any crate the
/// library crates build on that declares a `rust-version` newer than [`MSRV`].
fn report_declared_msrvs() {
    match crate::msrv::newer_than(&LIBRARY_CRATES, MSRV) {
        Ok(newer) if newer.is_empty() => println!(
            "    msrv: fallback: no crate the library crates build on declares a rust-version \
             newer than {MSRV} (declared versions only; nothing was compiled with {MSRV})"
        ),
        Ok(newer) => {
            println!(
                "    msrv: WARNING: these crates the library crates build on declare a \
                 rust-version newer than {MSRV}; the claimed MSRV is probably broken:"
            );
            for name in newer {
                println!("      {name}");
            }
        }
        Err(err) => {
            println!("    msrv: fallback: could not read the declared rust-versions: {err}")
        }
    }
}

/// Whether the run is CI's: the runner sets `CI=true`.
fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// `cargo +1.85` through the rustup proxy on the `PATH`, run from the workspace root, with the
/// toolchain pin of the proxy that started xtask removed (`+1.85` must win for its children).
fn msrv_cargo() -> Command {
    let mut command = Command::new("cargo");
    command
        .arg(format!("+{MSRV}"))
        .current_dir(cmd::workspace_root())
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("CARGO");
    command
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
    fn only_our_crates_unpacked_from_a_local_overlay_are_forgotten() {
        let home = std::env::temp_dir().join(format!("xtask-ci-home-{}", std::process::id()));
        let src = home.join("registry").join("src");
        let overlay = src.join("-22c3805da5a543b4");
        let crates_io = src.join("index.crates.io-1949cf8c6b5b557f");
        let dirs = [
            overlay.join("soe-wire-0.1.0"),
            overlay.join("soe-cli-0.1.0"),
            overlay.join("soe-wire-extra-0.1.0"),
            overlay.join("bytes-1.12.1"),
            crates_io.join("soe-wire-0.1.0"),
        ];
        for dir in &dirs {
            std::fs::create_dir_all(dir.join("src")).unwrap();
        }
        forget_unpacked_packages(&home);
        let left: Vec<bool> = dirs.iter().map(|d| d.exists()).collect();
        let _ = std::fs::remove_dir_all(&home);
        assert_eq!(left, [false, false, true, true, true]);
    }

    #[test]
    fn step_names_round_trip() {
        use clap::ValueEnum as _;
        for step in Step::ALL {
            assert_eq!(Step::from_str(step.name(), false), Ok(step));
        }
        assert_eq!(Step::value_variants(), Step::ALL);
        assert!(Step::from_str("lint", false).is_err());
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
                "cargo xtask c-abi",
                "cargo xtask csharp",
                "cargo xtask node",
                "cargo xtask wine",
                "cargo run --quiet --example demo",
                "cargo xtask bench --compare --quick --smoke",
                "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps",
                "cargo xtask links",
                "cargo deny check licenses bans sources",
                "cargo package --locked --allow-dirty -p soe-crypto -p soe-wire -p soe-reliable -p soe-session \
                 -p soe-winsock -p soe-runtime -p soe-tokio -p soe-async-std -p soe-dissect -p soe-cli \
                 --target-dir target/package-check",
                "cargo +1.85 check --locked -p soe-crypto -p soe-wire -p soe-reliable \
                 -p soe-session -p soe-winsock -p soe-runtime -p soe-tokio -p soe-async-std -p soe-dissect \
                 --target-dir target/msrv",
            ]
        );
    }
}
