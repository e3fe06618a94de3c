//! Rendering records as the indented trees `soe decode` prints.

use std::fmt::Write as _;

use crate::config::TREE_HEX;
use crate::records::{
    CrcVerdict, DatagramRecord, DirectionStats, Encryption, FlushRecord, MessageRecord, PacketNode,
    SessionSummary,
};

struct Line {
    /// The text.
    text: String,
    /// The lines below it.
    children: Vec<Self>,
}

impl Line {
    /// A line without children.
    fn leaf(text: String) -> Self {
        Self {
            text,
            children: Vec::new(),
        }
    }
}

/// Writes lines under `prefix` with box-drawing branches.
fn draw(out: &mut String, lines: &[Line], prefix: &str) {
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        out.push('\n');
        out.push_str(prefix);
        out.push_str(if last { "└─ " } else { "├─ " });
        out.push_str(&line.text);
        if !line.children.is_empty() {
            let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
            draw(out, &line.children, &deeper);
        }
    }
}

impl PacketNode {
    /// This node as a tree line.
    fn line(&self) -> Line {
        let mut text = String::from(self.name);
        if let Some(op) = self.opcode {
            let _ = write!(text, " (0x{op:02x})");
        }
        let _ = write!(text, " {} bytes", self.len);
        if let Some(r) = &self.reliable {
            let _ = write!(text, " ch={} seq={} {}", r.channel, r.sequence, r.position);
            if let Some(total) = r.total_len {
                let _ = write!(text, " total={total}");
            }
            let _ = write!(text, " data={}", r.data_len);
            if r.ack_elicitor {
                text.push_str(" ack-elicitor");
            }
            let _ = write!(text, " [{}]", r.status);
            if r.resend {
                text.push_str(" RESEND");
            }
        }
        for (name, value) in &self.fields.0 {
            let _ = write!(text, " {name}={value}");
        }
        if let Some(e) = &self.error {
            let _ = write!(text, " ERROR: {e}");
        }
        let mut children: Vec<Line> = self.children.iter().map(Self::line).collect();
        children.extend(self.notes.iter().map(|n| Line::leaf(format!("note: {n}"))));
        Line { text, children }
    }
}

impl MessageRecord {
    /// This message as a tree line.
    fn line(&self) -> String {
        let mut text = format!("message {} ch={}", self.kind, self.channel);
        if let Some(seq) = self.sequence {
            let _ = write!(text, " seq={seq}");
        }
        let _ = write!(text, " {} bytes", self.len);
        if self.decrypted {
            text.push_str(match self.verdict {
                Encryption::Decrypted => " (decrypted)",
                Encryption::KeyNotJudged => {
                    " (RC4 applied; too few bytes yet to tell whether the key fits)"
                }
                _ => " (RC4 applied; whether the key fits is unknown)",
            });
        }
        let shown = self.hex.len().min(TREE_HEX * 2);
        let _ = write!(text, ": {}", self.hex.get(..shown).unwrap_or_default());
        if shown < self.hex.len() {
            text.push('…');
        }
        let preview: String = self.ascii.chars().take(TREE_HEX).collect();
        let _ = write!(text, " \"{preview}\"");
        text
    }
}

impl DatagramRecord {
    /// The record as a tree: a header line, then the packets, messages and notes.
    pub fn render(&self) -> String {
        let mut out = format!(
            "#{} +{:.6}s {} -> {} ({}) {} bytes crc={}",
            self.index,
            self.elapsed,
            self.src,
            self.dst,
            self.direction.arrow(),
            self.len,
            match self.crc.verdict {
                CrcVerdict::Ok => "ok",
                CrcVerdict::Bad => "BAD",
                CrcVerdict::None => "none",
                CrcVerdict::Unknown => "unknown",
                CrcVerdict::Missing => "missing",
            }
        );
        if self.crc.verdict == CrcVerdict::Bad {
            if let (Some(e), Some(f)) = (&self.crc.expected, &self.crc.found) {
                let _ = write!(out, " (expected {e}, found {f})");
            }
        }
        if self.compressed {
            let _ = write!(out, " zlib->{}", self.inflated_len.unwrap_or_default());
        }
        if let Some(n) = self.session {
            let _ = write!(out, " session={n}");
        }
        let mut lines = Vec::new();
        if let Some(p) = &self.packet {
            lines.push(p.line());
        }
        if let Some(e) = &self.error {
            lines.push(Line::leaf(format!("ERROR: {e}")));
        }
        lines.extend(self.messages.iter().map(|m| Line::leaf(m.line())));
        lines.extend(self.notes.iter().map(|n| Line::leaf(format!("note: {n}"))));
        draw(&mut out, &lines, "");
        out
    }
}

impl FlushRecord {
    /// The record as a tree: a header line, then the messages and notes.
    pub fn render(&self) -> String {
        let mut out = format!(
            "end of capture: session {} {} -> {} ({})",
            self.session,
            self.src,
            self.dst,
            self.direction.arrow()
        );
        let mut lines: Vec<Line> = self.messages.iter().map(|m| Line::leaf(m.line())).collect();
        lines.extend(self.notes.iter().map(|n| Line::leaf(format!("note: {n}"))));
        draw(&mut out, &lines, "");
        out
    }
}

/// The lines a direction's summary adds after its counters: gaps the capture lost, round
/// trips, and what is known of its encryption.
fn direction_details(out: &mut String, s: &DirectionStats) {
    if s.capture_gaps > 0 || s.unassembled_messages > 0 || s.unplaced_fragments > 0 {
        let _ = write!(
            out,
            "\n    lost to the capture: {} reliable packets in {} gaps; {} messages could not \
             be reassembled, {} fragments ({} bytes) could not be placed",
            s.capture_lost_packets,
            s.capture_gaps,
            s.unassembled_messages,
            s.unplaced_fragments,
            s.unplaced_bytes
        );
        for g in &s.gaps {
            let _ = write!(
                out,
                "\n      gap: channel {} sequence {} to {} ({} packets, {})",
                g.channel,
                g.first,
                g.last,
                g.packets,
                g.why.replace('_', " ")
            );
            if let (Some(len), Some(seen)) = (g.cut_message_len, g.cut_message_seen) {
                let _ = write!(out, "; cut a message of {len} bytes, {seen} seen");
            }
        }
        if s.capture_gaps > s.gaps.len() as u64 {
            let _ = write!(
                out,
                "\n      ({} more gaps not listed)",
                s.capture_gaps - s.gaps.len() as u64
            );
        }
    }
    let rt = &s.round_trips;
    if let (Some(min), Some(avg), Some(max)) = (rt.min_ms, rt.avg_ms, rt.max_ms) {
        let _ = write!(
            out,
            "\n    data->ack round trips: {} samples, min {min:.3} ms, avg {avg:.3} ms, max {max:.3} ms",
            rt.count
        );
    }
    match s.encryption {
        Encryption::LooksEncrypted => out.push_str(
            "\n    reliable data looks encrypted (uniformly random bytes): its RC4 key is needed",
        ),
        Encryption::KeyDoesNotFit => out.push_str(
            "\n    the RC4 key does not fit: the data sent is plaintext (shown as sent once judged)",
        ),
        Encryption::KeyNotJudged => out.push_str(
            "\n    the RC4 key was applied, but fewer than 256 message bytes were seen: whether it \
             fits could not be told, and the decrypted messages may be garbage",
        ),
        _ => {}
    }
}

impl SessionSummary {
    /// The summary as indented lines.
    pub fn render(&self) -> String {
        let mut out = format!("session {}:", self.session);
        match (self.client, self.server) {
            (Some(c), Some(s)) if c != s => {
                let _ = write!(out, " client {c} <-> server {s}");
            }
            _ => {
                let _ = write!(out, " {} <-> {}", self.addresses[0], self.addresses[1]);
            }
        }
        if let Some(p) = &self.application_protocol {
            let _ = write!(out, " protocol {p:?}");
        }
        if let Some(id) = self.session_id {
            let _ = write!(out, " session_id={id:#010x}");
        }
        let _ = write!(
            out,
            "\n  framing ({}): crc_seed={} crc_length={} compression={}",
            self.framing_from,
            self.crc_seed
                .map_or_else(|| "unknown".to_owned(), |s| format!("{s:#010x}")),
            self.crc_length,
            if self.compression { "on" } else { "off" }
        );
        if let Some(n) = self.client_udp_length {
            let _ = write!(out, " client_udp_length={n}");
        }
        if let Some(n) = self.server_udp_length {
            let _ = write!(out, " server_udp_length={n}");
        }
        let _ = write!(
            out,
            "\n  seen from +{:.6}s to +{:.6}s",
            self.first_seen, self.last_seen
        );
        for d in &self.directions {
            let s = &d.stats;
            let _ = write!(
                out,
                "\n  {} {} -> {}: {} datagrams, {} bytes; {} reliable packets ({} resent or \
                 duplicate); acks {} selective, {} cumulative; {} messages ({} bytes); \
                 {} CRC failures, {} unknown opcodes, {} malformed, {} dropped",
                d.direction.arrow(),
                d.from,
                d.to,
                s.datagrams,
                s.bytes,
                s.reliable_packets,
                s.resends,
                s.acks,
                s.ack_alls,
                s.messages,
                s.message_bytes,
                s.crc_failures,
                s.unknown_opcodes,
                s.malformed,
                s.dropped
            );
            direction_details(&mut out, s);
        }
        if let Some(d) = &self.disconnect {
            let _ = write!(
                out,
                "\n  disconnect: {} ({}) sent {}",
                d.reason,
                d.code,
                d.direction.arrow()
            );
        }
        out
    }
}
