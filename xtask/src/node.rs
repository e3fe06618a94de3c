//! `cargo xtask node`: the Node addon (soe-node) built and tested with Node's own runner.
//!
//! Builds `soe-node` (the addon) and `soe-cli` (the `soe` tool the interop test runs), copies
//! the addon next to `crates/soe-node/index.js` as `soe_node.node`, and runs `npm test`
//! (`node --test test/`) there. The package has no npm dependencies, so nothing is installed.

use std::process::Command;

use crate::cmd;
use crate::{Error, Result};

/// Whether `node` and `npm` run here.
pub(crate) fn present() -> bool {
    ["node", "npm"].into_iter().all(cmd::program_runs)
}

/// Builds the addon and runs the package's tests.
pub(crate) fn run() -> Result<()> {
    if !present() {
        return Err(Error::new(
            "node and npm are not installed: the Node addon cannot be tested (.ci/run installs \
             them from the OS packages)",
        ));
    }
    let root = cmd::workspace_root();
    let mut build = cmd::cargo();
    build.args(["build", "--quiet", "-p", "soe-node", "-p", "soe-cli"]);
    println!("==> node: {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    let package = root.join("crates/soe-node");
    let mut install = Command::new("node");
    install
        .arg("scripts/install-addon.js")
        .arg("debug")
        .current_dir(&package);
    println!("==> node: {}", cmd::describe(&install));
    cmd::run_timed(&mut install)?;
    let mut test = Command::new("npm");
    test.args(["test", "--silent"])
        .current_dir(&package)
        .env("SOE_BIN", root.join("target/debug/soe"));
    println!("==> node: {}", cmd::describe(&test));
    let took = cmd::run_timed(&mut test)?;
    println!(
        "==> node: the addon's tests passed in {}",
        cmd::format_duration(took)
    );
    Ok(())
}
