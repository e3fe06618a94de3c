//! `cargo xtask c-abi`'s run of the C++17 game server (`examples/c/game_server.cpp`), a
//! server that talks on its own, against the `soe` tool, in one process (under valgrind
//! memcheck when the step has it):
//!
//! * the server ticks at 20 Hz (unreliable), sends each player a reliable world update as it
//!   joins and every 5th tick, and switches RC4 on after each session's first message, with
//!   [`KEY`];
//! * `soe ping` (5 pings) and `soe load` (4 sessions for 1 s at 400 messages/s), with the key
//!   and `--rc4-after-first-message`, must pass: the key checked, every echo verified, and
//!   both kinds of unsolicited messages counted apart from the echoes;
//! * `soe ping` with another key must fail (exit status not 0) and say `RC4 key mismatch`;
//! * then, with a `soe ping` session open, SIGINT: the server must close that session and exit
//!   cleanly ([`c_abi::sigint_with_a_session`]).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use crate::c_abi::{self, base64};
use crate::cmd;
use crate::{Error, Result};

/// The server's RC4 key (text; the tool takes it in base64).
const KEY: &str = "soe-ffi c-abi game key";
/// Another key, which must be told from [`KEY`].
const OTHER_KEY: &str = "not the game's key";
/// The tool's flag for RC4 switched on after the first message.
const SWITCH: &str = "--rc4-after-first-message";
/// Pings in the ping run.
const PINGS: u32 = 5;
/// Sessions in the load run.
const SESSIONS: u64 = 4;

/// Runs the game server (`server`, the built program or valgrind running it) against the tool
/// at `soe`, then stops it with SIGINT.
pub(crate) fn against_tools(mut server: Command, soe: &Path) -> Result<()> {
    let key = base64(KEY.as_bytes());
    server.args(["--port", "0", "--tick-hz", "20", "--rc4-key", &key]);
    let started = Instant::now();
    let (mut child, port, lines) = c_abi::spawn_listening_lines(server, "game_server")?;
    let addr = format!("127.0.0.1:{port}");
    let checked = ping(soe, &addr, &key)
        .and_then(|()| load(soe, &addr, &key))
        .and_then(|()| ping_with_another_key(soe, &addr));
    if let Err(e) = checked {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    println!(
        "==> game_server: soe ping and soe load passed with RC4 after the first message and a \
         20 Hz tick, and another key was told ({})",
        cmd::format_duration(started.elapsed())
    );
    let ping_args = ["--rc4-key", key.as_str(), SWITCH];
    c_abi::sigint_with_a_session(&mut child, port, &lines, soe, &ping_args, "game_server")
}

/// `soe ping` with the right key: the key checked, every ping answered, unsolicited messages
/// of both kinds counted.
fn ping(soe: &Path, addr: &str, key: &str) -> Result<()> {
    let mut c = Command::new(soe);
    c.args([
        "ping",
        addr,
        "--count",
        &PINGS.to_string(),
        "--interval",
        "100",
    ])
    .args(["--timeout", "10", SWITCH, "--rc4-key", key]);
    let (out, stdout) = run(c, "soe ping -> game_server")?;
    let what = "soe ping -> game_server";
    if !out.status.success() {
        return Err(Error::new(format!("{what} failed: {}", out.status)));
    }
    let received = format!("{PINGS} sent, {PINGS} received, 0 mismatched");
    expect(
        stdout.contains("RC4 key checked"),
        what,
        "the key checked",
        &stdout,
    )?;
    expect(stdout.contains(&received), what, &received, &stdout)?;
    let (reliable, unreliable) = unsolicited(&stdout);
    expect(
        reliable > 0 && unreliable > 0,
        what,
        "unsolicited reliable and unreliable messages counted",
        &stdout,
    )
}

/// `soe load --json` with the right key: every session's key checked, every echo verified,
/// unsolicited messages of both kinds counted.
fn load(soe: &Path, addr: &str, key: &str) -> Result<()> {
    let mut c = Command::new(soe);
    c.args(["load", addr, "--sessions", &SESSIONS.to_string()])
        .args([
            "--duration",
            "1",
            "--rate",
            "400",
            "--timeout",
            "10",
            "--json",
        ])
        .args([SWITCH, "--rc4-key", key]);
    let what = "soe load -> game_server";
    let (out, stdout) = run(c, what)?;
    if !out.status.success() {
        return Err(Error::new(format!("{what} failed: {}", out.status)));
    }
    let summary: serde_json::Value = serde_json::from_str(&stdout)
        .map_err(|e| Error::new(format!("{what}: --json output does not parse: {e}")))?;
    let n = |path: &str| summary.pointer(path).and_then(serde_json::Value::as_u64);
    let sent = n("/messages_sent").unwrap_or(0);
    let fine = n("/sessions_failed") == Some(0)
        && n("/key_checks/checked") == Some(SESSIONS)
        && sent > 0
        && n("/messages_verified") == Some(sent)
        && n("/messages_mismatched") == Some(0)
        && n("/messages_lost") == Some(0);
    expect(
        fine,
        what,
        "every key checked and every echo verified",
        &stdout,
    )?;
    let counted = n("/unsolicited/reliable").unwrap_or(0) > 0
        && n("/unsolicited/unreliable").unwrap_or(0) > 0;
    expect(
        counted,
        what,
        "unsolicited reliable and unreliable messages counted",
        &stdout,
    )
}

/// `soe ping` with another key must fail, saying `RC4 key mismatch`.
fn ping_with_another_key(soe: &Path, addr: &str) -> Result<()> {
    let mut c = Command::new(soe);
    c.args(["ping", addr, "--count", "3", "--timeout", "10", SWITCH])
        .args(["--rc4-key", &base64(OTHER_KEY.as_bytes())]);
    let what = "soe ping (another key) -> game_server";
    let (out, stdout) = run(c, what)?;
    let said = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    expect(
        !out.status.success() && said.contains("RC4 key mismatch"),
        what,
        "a failure that says RC4 key mismatch",
        &said,
    )
}

/// Runs `c` to its end, showing and returning what it printed.
fn run(mut c: Command, what: &str) -> Result<(Output, String)> {
    println!("==> {what}: {}", cmd::describe(&c));
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::new(format!("{what}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{}", indent(&stdout));
    print!("{}", indent(&String::from_utf8_lossy(&out.stderr)));
    Ok((out, stdout))
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

fn expect(ok: bool, what: &str, wanted: &str, said: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::new(format!(
            "{what}: expected {wanted}; it said:\n{said}"
        )))
    }
}

/// The two counts of the tool's `unsolicited: R reliable and U unreliable ...` line; (0, 0)
/// without one.
fn unsolicited(stdout: &str) -> (u64, u64) {
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("unsolicited: ")) else {
        return (0, 0);
    };
    let mut numbers = line.split_whitespace().filter_map(|w| w.parse().ok());
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unsolicited_line_reads_both_counts() {
        let said = "5 sent, 5 received\nunsolicited: 3 reliable and 10 unreliable message(s) \
                    the server sent on its own (not echoes; counted, not judged)\n";
        assert_eq!(unsolicited(said), (3, 10));
        assert_eq!(unsolicited("5 sent, 5 received\n"), (0, 0));
    }
}
