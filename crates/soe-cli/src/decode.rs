//! The `decode` command: dissects hex datagrams or a pcap/pcapng capture.

use std::io::{self, BufRead, BufWriter, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use soe_dissect::capture::{CaptureRead, Captured, CapturedPdu, for_each_record};
use soe_dissect::export::{self, PduWriter};
use soe_dissect::{DatagramRecord, Direction, DissectConfig, Dissector, FlushRecord};

use crate::flags::DissectFlags;

/// Arguments of `soe decode`.
#[derive(Debug, Args)]
pub(crate) struct DecodeArgs {
    /// Datagrams in hex, one per argument (spaces and colons may separate the bytes); `-` reads
    /// one datagram per line from stdin.
    #[arg(value_name = "HEX", conflicts_with = "pcap")]
    hex: Vec<String>,
    /// Decode the UDP datagrams of this pcap or pcapng capture; `-` reads it from stdin as it
    /// comes (`tcpdump -U -w - | soe decode --pcap - ...`).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Only datagrams from or to this UDP port (with --pcap).
    #[arg(long, value_name = "P", requires = "pcap")]
    port: Option<u16>,
    /// How to read sessions whose handshake is not in the input, and their keys.
    #[command(flatten)]
    dissect: DissectFlags,
    /// One JSON object per line instead of trees: `"type":"datagram"`, then `"type":"flush"`
    /// for what the end of the input released (packets that waited behind a gap the capture
    /// lost), then `"type":"session"`.
    #[arg(long)]
    json: bool,
    /// Also write every application message to FILE as a pcapng capture Wireshark opens (one
    /// exported PDU per message, read by the Lua plugin in crates/soe-dissect/wireshark/); `-`
    /// writes it to stdout instead of the records, a record at a time (`| wireshark -k -i -`).
    #[arg(long, value_name = "FILE")]
    export: Option<PathBuf>,
}

/// The export of `--export` (decode and proxy): where it goes, and whether to flush it per
/// datagram.
pub(crate) struct Export {
    /// The pcapng writer.
    pub(crate) writer: PduWriter<Box<dyn Write>>,
    /// Flush after every datagram that wrote a message (stdout, or a live capture on stdin).
    live: bool,
    /// The newest datagram's time (the end of the capture releases messages at it).
    last_time: Duration,
}

impl Export {
    /// Opens `--export FILE` (`-`: stdout); `live_input`: flush per datagram.
    pub(crate) fn open(path: &std::path::Path, live_input: bool) -> Result<Self> {
        let to_stdout = path.as_os_str() == "-";
        let out: Box<dyn Write> = if to_stdout {
            Box::new(io::stdout())
        } else {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            Box::new(BufWriter::new(file))
        };
        let writer = PduWriter::new(out).context("cannot write the export")?;
        Ok(Self {
            writer,
            live: to_stdout || live_input,
            last_time: Duration::ZERO,
        })
    }

    /// Writes the messages of a datagram record.
    pub(crate) fn datagram(
        &mut self,
        time: Duration,
        record: &DatagramRecord,
        dissector: &Dissector,
    ) -> Result<()> {
        self.last_time = self.last_time.max(time);
        let protocol = record
            .session
            .and_then(|n| dissector.application_protocol(n));
        let n = export_result(self.writer.write_datagram(time, record, protocol))?;
        if n > 0 && self.live {
            export_result(self.writer.flush())?;
        }
        Ok(())
    }

    /// Writes what the end of the input released, and flushes.
    pub(crate) fn end(&mut self, dissector: &mut Dissector) -> Result<Vec<FlushRecord>> {
        let flushed = dissector.flush();
        for flush in &flushed {
            let protocol = dissector.application_protocol(flush.session);
            export_result(self.writer.write_flush(self.last_time, flush, protocol))?;
        }
        export_result(self.writer.flush())?;
        Ok(flushed)
    }
}

/// Whether `--export PATH` writes to stdout.
pub(crate) fn to_stdout(path: Option<&std::path::Path>) -> bool {
    path.is_some_and(|p| p.as_os_str() == "-")
}

/// An export write's result; a closed pipe (Wireshark closed) ends the program quietly.
fn export_result<T>(result: io::Result<T>) -> Result<T> {
    match result {
        Ok(v) => Ok(v),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(e).context("cannot write the export"),
    }
}

/// Parses one hex datagram; whitespace and colons between digits are ignored, as is a `0x`
/// prefix. `what` names the input in errors.
fn parse_hex(text: &str, what: &str) -> Result<Vec<u8>> {
    let t = text.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let mut digits = Vec::with_capacity(t.len());
    for (pos, c) in t.chars().enumerate() {
        match c {
            c if c.is_ascii_hexdigit() => digits.push(c as u8),
            c if c.is_whitespace() || c == ':' => {}
            c => bail!("{what}: {c:?} at position {} is not a hex digit", pos + 1),
        }
    }
    if digits.is_empty() {
        bail!("{what} holds no hex digits");
    }
    if digits.len() % 2 != 0 {
        bail!(
            "{what} has an odd number of hex digits ({}): each byte needs two",
            digits.len()
        );
    }
    hex::decode(&digits).with_context(|| format!("{what} is not valid hex"))
}

/// The datagrams of the positional arguments (and stdin for `-`).
fn hex_datagrams(args: &[String]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if arg.trim() == "-" {
            let stdin = io::stdin();
            let mut any = false;
            for (n, line) in stdin.lock().lines().enumerate() {
                let line = line.context("cannot read stdin")?;
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                out.push(parse_hex(line, &format!("stdin line {}", n + 1))?);
                any = true;
            }
            if !any {
                bail!("stdin held no hex datagrams (one per line expected)");
            }
        } else {
            out.push(parse_hex(arg, &format!("argument {} ({arg:?})", i + 1))?);
        }
    }
    Ok(out)
}

/// Runs the command.
pub(crate) fn run(args: DecodeArgs) -> Result<ExitCode> {
    if let (Some(port), None) = (args.port, &args.pcap) {
        bail!(
            "--port {port} picks a capture's datagrams by port, and hex input has no ports: \
             give --pcap FILE, or leave --port out"
        );
    }
    let base = args.dissect.config()?;
    let mut dissector = Dissector::new(base.clone());
    let live_input = args.pcap.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let export = match &args.export {
        Some(path) => Some(Export::open(path, live_input)?),
        None => None,
    };
    let quiet = to_stdout(args.export.as_deref());
    let out: Box<dyn Write> = if quiet {
        Box::new(io::sink())
    } else {
        Box::new(io::stdout().lock())
    };
    let mut out = Output {
        out: BufWriter::new(out),
        json: args.json,
        export,
        live: live_input,
    };

    let result = match &args.pcap {
        Some(path) => {
            let read = read_streaming(path, args.port, &base, &mut dissector, &mut out)?;
            out.end(&mut dissector)?;
            let skipped = read.skipped();
            if let Some(export) = &out.export {
                eprintln!(
                    "soe: exported {} messages to {}",
                    export.writer.records(),
                    args.export.as_deref().unwrap_or(path).display()
                );
            }
            if !args.json {
                let exported = if read.exported_pdus > 0 {
                    format!(" and {} exported records read", read.exported_pdus)
                } else {
                    String::new()
                };
                out.line(&format!(
                    "{}: {} UDP datagrams decoded{exported} from {} frames{}",
                    path.display(),
                    read.udp_datagrams,
                    read.frames,
                    if skipped > 0 {
                        format!(
                            "; skipped {} not UDP, {} on other ports, {} malformed, {} on unsupported links",
                            read.skipped_not_udp,
                            read.skipped_port,
                            read.skipped_malformed,
                            read.skipped_link
                        )
                    } else {
                        String::new()
                    }
                ))?;
            }
            if read.udp_datagrams == 0 && read.stopped.is_none() {
                eprintln!(
                    "soe: note: {} holds no UDP datagrams{}",
                    path.display(),
                    if args.port.is_some() {
                        " on that port"
                    } else {
                        ""
                    }
                );
            }
            read.stopped.map_or(Ok(()), |e| Err(e.into()))
        }
        None => {
            if args.hex.is_empty() {
                bail!(
                    "nothing to decode: give one or more hex datagrams, `-` to read them from \
                     stdin, or --pcap FILE"
                );
            }
            let datagrams = hex_datagrams(&args.hex)?;
            let nowhere = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0);
            for d in &datagrams {
                let record = dissector.dissect(Duration::ZERO, nowhere, nowhere, d);
                out.datagram(Duration::ZERO, &record, &dissector)?;
            }
            out.end(&mut dissector)?;
            Ok(())
        }
    };
    out.flush()?;
    result.map(|()| ExitCode::SUCCESS)
}

/// Dissects a capture as it is read (constant memory whatever its size), writing each record;
/// `-` reads stdin, a record at a time. Exported-PDU records of ours (an export, or a flight
/// recording's messages) are shown as they are; a flight recording's framing record, met
/// before any datagram, sets the framing `base` (the flags) leaves open.
fn read_streaming<W: Write>(
    path: &std::path::Path,
    port: Option<u16>,
    base: &DissectConfig,
    dissector: &mut Dissector,
    out: &mut Output<W>,
) -> Result<CaptureRead> {
    let (name, input): (String, Box<dyn io::Read>) = if path.as_os_str() == "-" {
        ("stdin".into(), Box::new(io::stdin().lock()))
    } else {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
        (name, Box::new(io::BufReader::new(file)))
    };
    let mut failed = None;
    let mut dissected = false;
    let read = for_each_record(input, name, port, |record| {
        let result = match record {
            Captured::Datagram(d) => {
                dissected = true;
                let record = dissector.dissect_frame(d.frame, d.time, d.src, d.dst, &d.payload);
                out.datagram(d.time, &record, dissector)
            }
            Captured::Pdu(p) => {
                if let (false, Some(config)) = (dissected, framing_config(base, &p)) {
                    *dissector = Dissector::new(config);
                }
                out.exported(&p)
            }
            _ => Ok(()),
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(read),
    }
}

/// The dissector configuration a flight recording's framing record gives: its CRC seed and
/// length, compression and (when the host wrote it) key, wherever the flags (`base`) left them
/// open. `None` for any other record.
fn framing_config(base: &DissectConfig, record: &CapturedPdu) -> Option<DissectConfig> {
    if record.pdu.header.kind != export::kind::SESSION {
        return None;
    }
    let text = String::from_utf8_lossy(&record.pdu.body);
    let mut config = base.clone();
    for (key, value) in text.split(' ').filter_map(|kv| kv.split_once('=')) {
        match key {
            "crc_seed" if config.crc_seed.is_none() => {
                config.crc_seed = crate::flags::parse_seed(value).ok();
            }
            "crc_length" if config.crc_length.is_none() => config.crc_length = value.parse().ok(),
            "compression" if config.compression.is_none() => {
                config.compression = Some(value == "1");
            }
            "rc4_key" if config.keys.is_empty() => {
                if let Ok(key) = hex::decode(value) {
                    config = config.with_key(None, key);
                }
            }
            _ => {}
        }
    }
    Some(config)
}

/// An exported-PDU record of ours as `decode` shows it (`"type":"exported"`): a message as its
/// writer saw it (a flight recording's session, or an export), or a flight recording's
/// framing or end.
#[derive(serde::Serialize)]
struct ExportedRecord<'a> {
    #[serde(rename = "type")]
    kind_tag: &'static str,
    frame: u64,
    time: f64,
    src: Option<SocketAddr>,
    dst: Option<SocketAddr>,
    session: u32,
    direction: Direction,
    /// `reliable`, `unreliable`, `ordered`, `disconnect` or `session`.
    kind: &'static str,
    channel: u8,
    sequence: Option<u16>,
    len: u32,
    truncated: bool,
    fragmented: bool,
    compressed: bool,
    encrypted: bool,
    decrypted: bool,
    first_frame: u32,
    last_frame: u32,
    protocol: &'a str,
    /// The message (its start when truncated), hex.
    hex: String,
    /// A disconnect's reason name, or the framing's text.
    text: Option<String>,
}

impl<'a> ExportedRecord<'a> {
    fn of(record: &'a CapturedPdu) -> Self {
        let p = &record.pdu;
        let h = &p.header;
        let kind = match h.kind {
            export::kind::RELIABLE => "reliable",
            export::kind::UNRELIABLE => "unreliable",
            export::kind::ORDERED => "ordered",
            export::kind::DISCONNECT => "disconnect",
            export::kind::SESSION => "session",
            _ => "unknown",
        };
        let is_text = matches!(h.kind, export::kind::DISCONNECT | export::kind::SESSION);
        let flag = |f: u16| h.flags & f != 0;
        Self {
            kind_tag: "exported",
            frame: record.frame,
            time: record.time.as_secs_f64(),
            src: p.src,
            dst: p.dst,
            session: h.session,
            direction: h.direction,
            kind,
            channel: h.channel,
            sequence: h.sequence,
            len: h.len,
            truncated: p.truncated,
            fragmented: flag(export::FLAG_FRAGMENTED),
            compressed: flag(export::FLAG_COMPRESSED),
            encrypted: flag(export::FLAG_ENCRYPTED),
            decrypted: flag(export::FLAG_DECRYPTED),
            first_frame: h.first_frame,
            last_frame: h.last_frame,
            protocol: &p.protocol,
            hex: hex::encode(&p.body),
            text: is_text.then(|| String::from_utf8_lossy(&p.body).into_owned()),
        }
    }

    /// One line of text.
    fn render(&self) -> String {
        let mut line = format!(
            "#{} exported: session {} {} {}",
            self.frame,
            self.session,
            self.direction.arrow(),
            self.kind
        );
        match &self.text {
            Some(text) if self.kind == "disconnect" => {
                line.push_str(&format!(": {text} ({})", self.sequence.unwrap_or(0)));
            }
            Some(text) => line.push_str(&format!(": {text}")),
            None => {
                line.push_str(&format!(" ch {}", self.channel));
                if let Some(seq) = self.sequence {
                    line.push_str(&format!(" seq {seq}"));
                }
                line.push_str(&format!(" len {}", self.len));
                for (on, name) in [
                    (self.fragmented, "fragmented"),
                    (self.compressed, "compressed"),
                    (self.decrypted, "decrypted"),
                    (self.truncated, "truncated"),
                ] {
                    if on {
                        line.push_str(&format!(" [{name}]"));
                    }
                }
                let shown = self.hex.len().min(96);
                line.push_str(&format!(" {}", &self.hex[..shown]));
                if shown < self.hex.len() {
                    line.push_str("...");
                }
            }
        }
        line
    }
}

/// Where records go: trees or JSON lines on stdout, and the messages to `--export`.
struct Output<W: Write> {
    /// Standard output, buffered (a sink when the export goes to stdout).
    out: W,
    /// Whether to write JSON lines.
    json: bool,
    /// The export, with `--export`.
    export: Option<Export>,
    /// A live capture on stdin: stdout is flushed per datagram.
    live: bool,
}

impl<W: Write> Output<W> {
    /// Writes one line; a closed pipe (`| head`) ends the program quietly.
    fn line(&mut self, text: &str) -> Result<()> {
        match writeln!(self.out, "{text}") {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
            Err(e) => Err(e).context("cannot write to stdout"),
        }
    }

    /// Writes a datagram record, and exports its messages.
    fn datagram(
        &mut self,
        time: Duration,
        record: &DatagramRecord,
        dissector: &Dissector,
    ) -> Result<()> {
        if let Some(export) = &mut self.export {
            export.datagram(time, record, dissector)?;
        }
        if self.json {
            let text = serde_json::to_string(record).context("cannot encode a record")?;
            self.line(&text)?;
        } else {
            self.line(&record.render())?;
        }
        if self.live {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes an exported-PDU record of ours.
    fn exported(&mut self, record: &CapturedPdu) -> Result<()> {
        let shown = ExportedRecord::of(record);
        if self.json {
            let text = serde_json::to_string(&shown).context("cannot encode a record")?;
            self.line(&text)?;
        } else {
            self.line(&shown.render())?;
        }
        if self.live {
            self.flush()?;
        }
        Ok(())
    }

    /// Ends the input: writes what the end of the capture released (the packets that waited
    /// behind gaps the capture lost), then every session summary.
    fn end(&mut self, dissector: &mut Dissector) -> Result<()> {
        let flushed = match &mut self.export {
            Some(export) => export.end(dissector)?,
            None => dissector.flush(),
        };
        for flush in flushed {
            if self.json {
                let text = serde_json::to_string(&flush).context("cannot encode a record")?;
                self.line(&text)?;
            } else {
                self.line(&flush.render())?;
            }
        }
        for summary in dissector.summaries() {
            if self.json {
                let text = serde_json::to_string(&summary).context("cannot encode a summary")?;
                self.line(&text)?;
            } else {
                self.line(&summary.render())?;
            }
        }
        Ok(())
    }

    /// Flushes stdout and the export.
    fn flush(&mut self) -> Result<()> {
        if let Some(export) = &mut self.export {
            export_result(export.writer.flush())?;
        }
        match self.out.flush() {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(e).context("cannot write to stdout"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_forms() {
        assert_eq!(parse_hex("00 15:00 01", "a").unwrap(), [0, 0x15, 0, 1]);
        assert_eq!(parse_hex("0x0006", "a").unwrap(), [0, 6]);
        let e = parse_hex("001", "argument 1").unwrap_err().to_string();
        assert!(e.contains("odd number"), "{e}");
        let e = parse_hex("00zz", "argument 1").unwrap_err().to_string();
        assert!(e.contains("'z' at position 3"), "{e}");
        assert!(parse_hex(" ", "a").is_err());
    }
}
