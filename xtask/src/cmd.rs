//! Running child processes: the workspace root, the cargo to call, probes and timed steps.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// The workspace root: the parent of the directory holding xtask's manifest.
pub(crate) fn workspace_root() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir
        .parent()
        .expect("xtask lives in a subdirectory of the workspace")
        .to_path_buf()
}

/// The cargo home: `CARGO_HOME`, else `~/.cargo`; `None` when neither variable is set.
pub(crate) fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

/// A `cargo` command that runs in the workspace root.
///
/// It uses the cargo that started xtask (`$CARGO`, set by `cargo run`), so the checks run on the
/// same toolchain as the alias; outside cargo it falls back to `cargo` on the `PATH`.
pub(crate) fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    cmd.current_dir(workspace_root());
    cmd
}

/// Whether `cmd` runs and exits successfully; its output is discarded.
///
/// Used to probe for optional tools (`cargo deny --version`, `cargo +nightly --version`).
pub(crate) fn succeeds_quietly(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Whether `program --version` runs and succeeds: a probe for an optional tool on the `PATH`.
pub(crate) fn program_runs(program: &str) -> bool {
    succeeds_quietly(Command::new(program).arg("--version"))
}

/// Runs `cmd` with inherited standard streams and returns how long it took.
///
/// A command that cannot be started or exits unsuccessfully is an error naming the command line.
pub(crate) fn run_timed(cmd: &mut Command) -> Result<Duration> {
    let started = Instant::now();
    let status = cmd
        .status()
        .map_err(|err| Error::new(format!("could not start `{}`: {err}", describe(cmd))))?;
    let took = started.elapsed();
    if status.success() {
        Ok(took)
    } else {
        Err(Error::new(format!(
            "`{}` failed ({status}) after {}",
            describe(cmd),
            format_duration(took)
        )))
    }
}

/// Runs `cmd` and returns its standard output as text; standard error passes through.
pub(crate) fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|err| Error::new(format!("could not start `{}`: {err}", describe(cmd))))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "`{}` failed ({})",
            describe(cmd),
            out.status
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Error::new(format!("`{}` printed non-UTF-8 output", describe(cmd))))
}

/// The command line of `cmd` as a person would type it: explicitly set environment variables
/// first, then the program's file name (`cargo`, not the toolchain path) and its arguments.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut words: Vec<String> = cmd
        .get_envs()
        .filter_map(|(key, value)| {
            value.map(|value| format!("{}={}", key.to_string_lossy(), quote(value)))
        })
        .collect();
    let program = Path::new(cmd.get_program());
    words.push(
        program
            .file_name()
            .unwrap_or(program.as_os_str())
            .to_string_lossy()
            .into_owned(),
    );
    words.extend(cmd.get_args().map(quote));
    words.join(" ")
}

/// Shell-style quoting for display: words with spaces or quotes are wrapped in double quotes.
fn quote(word: &OsStr) -> String {
    let word = word.to_string_lossy();
    if word.is_empty() || word.contains([' ', '"', '\'']) {
        format!("\"{}\"", word.replace('"', "\\\""))
    } else {
        word.into_owned()
    }
}

/// A duration for people: `850 ms`, `12.3 s`, `3 min 05 s`.
pub(crate) fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        format!("{} ms", d.as_millis())
    } else if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        let whole = d.as_secs();
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_millis(850)), "850 ms");
        assert_eq!(format_duration(Duration::from_millis(12_345)), "12.3 s");
        assert_eq!(format_duration(Duration::from_secs(185)), "3 min 05 s");
    }

    #[test]
    fn described_commands_show_env_program_and_quoted_args() {
        let mut cmd = Command::new("/toolchains/stable/bin/cargo");
        cmd.env("RUSTDOCFLAGS", "-D warnings")
            .args(["doc", "--workspace"]);
        assert_eq!(
            describe(&cmd),
            "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace"
        );
    }

    #[test]
    fn root_holds_the_workspace_manifest() {
        assert!(workspace_root().join("Cargo.toml").is_file());
        assert!(workspace_root().join("xtask").is_dir());
    }
}
