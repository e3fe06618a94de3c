//! The flight recorder's C test (`crates/soe-ffi/tests/c/recording.c`): its session dies of
//! 100 % loss after 20 s of traffic, and the capture it takes must open in tshark with the Lua
//! plugin as it is, showing the last message before the loss and the timeout as the reason,
//! while `soe decode` of the file gives the same records.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::c_abi::wanted;
use crate::cmd;
use crate::{Error, Result};

/// Our records as tshark and decode show them: kind, direction, body (hex).
type Records = Vec<(u64, u64, String)>;

/// Runs the program (`program`: the command, under valgrind when installed), then reads its
/// capture with tshark and `soe` (`soe`: the tool's binary).
pub(crate) fn check(mut program: Command, out: &Path, soe: &Path) -> Result<()> {
    let closed = out.join("recording.pcapng");
    let live = out.join("recording-live.pcapng");
    program.arg(&closed).arg(&live);
    println!("==> recording: {}", cmd::describe(&program));
    let output = program
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::new(format!("recording: {e}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in stdout.lines() {
        println!("    {line}");
    }
    if !output.status.success() || !stdout.contains("recording: ok") {
        return Err(Error::new(format!("recording failed: {}", output.status)));
    }
    if !stdout.contains("recording: closed: reason 2\n") {
        return Err(Error::new(
            "recording: the session did not end with Timeout (2)",
        ));
    }
    let last = stdout
        .lines()
        .find_map(|l| l.strip_prefix("recording: last message: "))
        .ok_or_else(|| Error::new("recording printed no last message"))?;
    if !wanted("tshark", "reading the C program's recording in Wireshark")? {
        return Ok(());
    }
    let shown = tshark(&closed)?;
    let from_client = |r: &&(u64, u64, String)| r.0 == 0 && r.1 == 1;
    if shown.iter().rfind(from_client).map(|r| r.2.as_str()) != Some(last) {
        return Err(Error::new(format!(
            "recording: tshark does not show {last} as the last message the server got"
        )));
    }
    let reason = tshark_reason(&closed)?;
    if reason != "Timeout" {
        return Err(Error::new(format!(
            "recording: tshark shows the reason {reason:?}"
        )));
    }
    let decoded = decode(soe, &closed)?;
    if decoded != shown {
        return Err(Error::new(format!(
            "recording: soe decode gives {} records, tshark {}, or they differ",
            decoded.len(),
            shown.len()
        )));
    }
    if tshark(&live)?.is_empty() {
        return Err(Error::new(
            "recording: the live session's capture holds nothing",
        ));
    }
    println!(
        "==> recording: tshark with the plugin and soe decode read the C program's capture: {} \
         records, the last message before the loss, the reason Timeout",
        shown.len()
    );
    Ok(())
}

/// tshark with the plugin on `capture`, with `fields`: its lines.
fn tshark_lines(capture: &Path, fields: &[&str]) -> Result<Vec<String>> {
    let plugin = cmd::workspace_root().join("crates/soe-dissect/wireshark/soe.lua");
    let mut c = Command::new("tshark");
    c.arg("-r")
        .arg(capture)
        .arg("-X")
        .arg(format!("lua_script:{}", plugin.display()))
        .args(["-Y", "soe", "-T", "fields", "-E", "separator=/t"]);
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c.output().map_err(|e| Error::new(format!("tshark: {e}")))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "tshark could not read {}: {}",
            capture.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// Our records as tshark shows them.
fn tshark(capture: &Path) -> Result<Records> {
    let lines = tshark_lines(capture, &["soe.kind", "soe.direction", "soe.body"])?;
    lines
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|_| Error::new(format!("tshark printed {l:?}")))
            };
            match f.as_slice() {
                [kind, direction, body] => Ok((num(kind)?, num(direction)?, body.replace(':', ""))),
                _ => Err(Error::new(format!("tshark printed {l:?}"))),
            }
        })
        .collect()
}

/// The disconnect reason tshark shows.
fn tshark_reason(capture: &Path) -> Result<String> {
    let lines = tshark_lines(capture, &["soe.reason"])?;
    Ok(lines
        .into_iter()
        .rfind(|l| !l.is_empty())
        .unwrap_or_default())
}

/// Our records as `soe decode --json` reads them back.
fn decode(soe: &Path, capture: &Path) -> Result<Records> {
    let out = Command::new(soe)
        .args(["decode", "--json", "--pcap"])
        .arg(capture)
        .output()
        .map_err(|e| Error::new(format!("soe decode: {e}")))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "soe decode failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let mut records = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| Error::new(format!("soe decode printed {line:?}: {e}")))?;
        if v["type"] != "exported" {
            continue;
        }
        let kind = match v["kind"].as_str() {
            Some("reliable") => 0,
            Some("unreliable") => 1,
            Some("ordered") => 2,
            Some("disconnect") => 3,
            _ => 4,
        };
        let direction = match v["direction"].as_str() {
            Some("client_to_server") => 1,
            Some("server_to_client") => 2,
            _ => 0,
        };
        records.push((
            kind,
            direction,
            v["hex"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    Ok(records)
}
