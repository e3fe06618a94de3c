//! Reading UDP datagrams out of pcap and pcapng captures, and writing classic pcap files.
//!
//! Reading streams the file through a bounded buffer: a record is at most [`MAX_RECORD`] bytes
//! (larger claims are refused before anything is allocated for them). [`for_each_datagram`]
//! hands each datagram on as it is read, in constant memory; [`read_capture`] keeps them, at
//! most [`MAX_DATAGRAMS`] datagrams and [`MAX_TOTAL_PAYLOAD`] payload bytes. A capture cut
//! short, or corrupt past its header, still yields the datagrams read before the problem, with
//! the problem in [`CaptureRead::stopped`].

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use pcap_file::pcap::{PcapHeader, PcapParser};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::export::{ExportedPdu, LINKTYPE_WIRESHARK_UPPER_PDU, PduError, read_pdu};

/// The largest packet record accepted (captured bytes of one frame).
pub const MAX_RECORD: usize = 256 * 1024;
/// The most datagrams kept from one capture.
pub const MAX_DATAGRAMS: usize = 10_000_000;
/// The most UDP payload bytes kept from one capture.
pub const MAX_TOTAL_PAYLOAD: usize = 1 << 30;
/// The largest pcapng block accepted: a packet record plus room for options.
const MAX_BLOCK: usize = MAX_RECORD + 64 * 1024;
/// The most interfaces one pcapng section may describe.
const MAX_INTERFACES: usize = 4096;
/// Bytes asked of the file per read.
const READ_CHUNK: usize = 64 * 1024;
/// A classic pcap file header.
const PCAP_HEADER_LEN: usize = 24;
/// A classic pcap record header.
const RECORD_HEADER_LEN: usize = 16;
/// The pcapng Section Header Block type (the same in both byte orders).
const PCAPNG_SHB: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
/// The pcapng byte-order magic as written by a big-endian writer.
const PCAPNG_BOM_BE: [u8; 4] = [0x1A, 0x2B, 0x3C, 0x4D];
/// The pcapng byte-order magic as written by a little-endian writer.
const PCAPNG_BOM_LE: [u8; 4] = [0x4D, 0x3C, 0x2B, 0x1A];
/// The link types this reader understands, for error messages.
const SUPPORTED_LINKS: &str =
    "Ethernet (1), raw IP (101, 228, 229), Linux SLL (113), BSD loopback (0, 108)";

/// Why a capture could not be read (or was read only in part), or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The file could not be opened, read, created or written. The message names the
    /// system's error itself, so the error has no separate source (a chain printed with its
    /// causes would say it twice).
    #[error("{context}: {cause}")]
    Io {
        /// What was being done (`cannot open FILE`...).
        context: String,
        /// The system's error.
        cause: io::Error,
    },
    /// The input is no pcap or pcapng capture, or its header is invalid.
    #[error("{0}")]
    NotACapture(String),
    /// The capture's link type is not one this reader understands.
    #[error("{name} has unsupported link type {code}; supported: {SUPPORTED_LINKS}")]
    UnsupportedLink {
        /// The input's name.
        name: String,
        /// The LINKTYPE value.
        code: u32,
    },
    /// The file ends inside a record or block.
    #[error("{0}")]
    Truncated(String),
    /// A record or block is corrupt.
    #[error("{0}")]
    Corrupt(String),
    /// A limit of the reader was reached.
    #[error("{0}")]
    Limit(String),
    /// A datagram could not be framed for writing.
    #[error("{0}")]
    Frame(String),
}

/// This module's results.
pub type Result<T, E = CaptureError> = std::result::Result<T, E>;

/// An I/O error with what was being done.
fn io_error(context: String) -> impl FnOnce(io::Error) -> CaptureError {
    move |cause| CaptureError::Io { context, cause }
}

/// A parse error of the pcap library, in this module's words: what is wrong with the header,
/// record or block (`is cut short`, `has an invalid field (...)`).
fn describe(error: &pcap_file::PcapError) -> String {
    match error {
        pcap_file::PcapError::IncompleteBuffer => "is cut short".to_owned(),
        pcap_file::PcapError::InvalidField(field) => format!("has an invalid field ({field})"),
        pcap_file::PcapError::InvalidInterfaceId(id) => format!("names an unknown interface {id}"),
        pcap_file::PcapError::IoError(e) => format!("cannot be read ({e})"),
        _ => "does not parse".to_owned(),
    }
}

/// One UDP datagram taken from a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedDatagram {
    /// The capture timestamp, since the UNIX epoch.
    pub time: Duration,
    /// The sender.
    pub src: SocketAddr,
    /// The receiver.
    pub dst: SocketAddr,
    /// The UDP payload.
    pub payload: Vec<u8>,
    /// Its frame's number in the capture, 1 for the first packet record (as Wireshark numbers
    /// them: frames of every kind count).
    pub frame: u64,
}

/// An exported-PDU record of ours taken from a capture (link type 252: an export of
/// `soe decode --export`, or the messages of a flight recording).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedPdu {
    /// The capture timestamp, since the UNIX epoch.
    pub time: Duration,
    /// Its frame's number in the capture.
    pub frame: u64,
    /// The record.
    pub pdu: ExportedPdu,
}

/// What [`for_each_record`] hands on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Captured {
    /// A UDP datagram.
    Datagram(CapturedDatagram),
    /// An exported-PDU record of ours.
    Pdu(CapturedPdu),
}

/// What [`read_capture`] found.
#[derive(Debug, Default)]
pub struct CaptureRead {
    /// The UDP datagrams kept, in capture order ([`read_capture`]; empty after
    /// [`for_each_datagram`], which hands them on instead).
    pub datagrams: Vec<CapturedDatagram>,
    /// UDP datagrams read and handed on (or kept).
    pub udp_datagrams: u64,
    /// Packet records read (frames of every kind).
    pub frames: u64,
    /// Frames that were not UDP over IP (TCP, ARP, ICMP, IP fragments after the first...).
    pub skipped_not_udp: u64,
    /// UDP datagrams whose ports did not match `--port`.
    pub skipped_port: u64,
    /// Frames whose headers did not parse (cut by the snap length, corrupt).
    pub skipped_malformed: u64,
    /// Frames on a pcapng interface whose link type is not supported (and exported PDUs that
    /// are not ours, or when they are not asked for).
    pub skipped_link: u64,
    /// Exported-PDU records of ours handed on ([`for_each_record`]).
    pub exported_pdus: u64,
    /// Why reading stopped before the end of the file (a truncated or corrupt record, a limit),
    /// with the datagrams read before it kept above.
    pub stopped: Option<CaptureError>,
}

impl CaptureRead {
    /// Frames skipped for any reason.
    pub fn skipped(&self) -> u64 {
        self.skipped_not_udp + self.skipped_port + self.skipped_malformed + self.skipped_link
    }
}

/// Reads the UDP datagrams of a pcap or pcapng capture (told apart by their magic number),
/// keeping those whose source or destination port is `port` when one is given.
///
/// Fails outright when the file cannot be opened, is no capture, or (classic pcap) has an
/// unsupported link type. Problems after the header end the reading with
/// [`CaptureRead::stopped`] set and what was read before kept.
pub fn read_capture(path: &Path, port: Option<u16>) -> Result<CaptureRead> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(io_error(format!("cannot open {name}")))?;
    read_from(file, name, port)
}

/// [`read_capture`] on any reader; `name` names it in messages.
pub fn read_from(reader: impl Read, name: String, port: Option<u16>) -> Result<CaptureRead> {
    let mut kept = Vec::new();
    let mut payload_bytes = 0usize;
    let mut over = None;
    let mut read = for_each_datagram(reader, name.clone(), port, |d| {
        if over.is_some() {
            return false;
        }
        payload_bytes = payload_bytes.saturating_add(d.payload.len());
        if kept.len() >= MAX_DATAGRAMS {
            over = Some(CaptureError::Limit(format!(
                "{name} holds more than {MAX_DATAGRAMS} datagrams: only the first {MAX_DATAGRAMS} were read"
            )));
            return false;
        }
        if payload_bytes > MAX_TOTAL_PAYLOAD {
            over = Some(CaptureError::Limit(format!(
                "{name} holds more than {} MiB of UDP payload: only the first {} datagrams were read",
                MAX_TOTAL_PAYLOAD >> 20,
                kept.len()
            )));
            return false;
        }
        kept.push(d);
        true
    })?;
    if let Some(error) = over {
        read.stopped = Some(error);
        read.udp_datagrams = kept.len() as u64;
    }
    read.datagrams = kept;
    Ok(read)
}

/// Reads the UDP datagrams of a pcap or pcapng capture from `reader` and hands each one to
/// `on_datagram` as it is read, keeping none: memory stays bounded by the largest record
/// whatever the capture's size. `on_datagram` returns `false` to stop reading. `name` names
/// the input in messages; `port` keeps only datagrams from or to that port.
///
/// Fails outright when the input is no capture or (classic pcap) has an unsupported link
/// type. Problems after the header end the reading with [`CaptureRead::stopped`] set.
pub fn for_each_datagram(
    reader: impl Read,
    name: String,
    port: Option<u16>,
    mut on_datagram: impl FnMut(CapturedDatagram) -> bool,
) -> Result<CaptureRead> {
    let mut on = |c| match c {
        Captured::Datagram(d) => on_datagram(d),
        Captured::Pdu(_) => true,
    };
    read_records(reader, name, port, false, &mut on)
}

/// [`for_each_datagram`], also handing on the exported-PDU records of ours (link type 252) a
/// pcapng capture holds: an export, or a flight recording's messages beside its datagrams. The
/// port filter applies to both.
///
/// # Errors
/// As [`for_each_datagram`].
pub fn for_each_record(
    reader: impl Read,
    name: String,
    port: Option<u16>,
    mut on_record: impl FnMut(Captured) -> bool,
) -> Result<CaptureRead> {
    read_records(reader, name, port, true, &mut on_record)
}

/// The reading behind [`for_each_datagram`] and [`for_each_record`]; `pdus`: whether records
/// of link type 252 are read.
fn read_records(
    reader: impl Read,
    name: String,
    port: Option<u16>,
    pdus: bool,
    on_record: &mut dyn FnMut(Captured) -> bool,
) -> Result<CaptureRead> {
    let mut input = Input::new(reader);
    input
        .fill(4)
        .map_err(io_error(format!("cannot read {name}")))?;
    let collector = Collector {
        name: name.clone(),
        port,
        read: CaptureRead::default(),
        pdus,
        emit: on_record,
    };
    match input.available() {
        [] => Err(CaptureError::NotACapture(format!(
            "{name} is empty: it is not a pcap or pcapng capture"
        ))),
        [a, b, c, d, ..] if is_pcap_magic([*a, *b, *c, *d]) => read_pcap(input, collector),
        [a, b, c, d, ..] if [*a, *b, *c, *d] == PCAPNG_SHB => read_pcapng(input, collector),
        _ => Err(CaptureError::NotACapture(format!(
            "{name} is not a pcap or pcapng capture (unknown magic number)"
        ))),
    }
}

/// Whether the first four bytes are a classic pcap magic number, in either byte order and
/// timestamp resolution.
fn is_pcap_magic(magic: [u8; 4]) -> bool {
    matches!(
        u32::from_be_bytes(magic),
        0xA1B2_C3D4 | 0xD4C3_B2A1 | 0xA1B2_3C4D | 0x4D3C_B2A1
    )
}

/// A file read through a buffer that grows only as far as the largest record needs.
struct Input<R> {
    /// The file.
    reader: R,
    /// Bytes read; `start..end` is live.
    buf: Vec<u8>,
    /// The first unconsumed byte.
    start: usize,
    /// The end of the bytes read.
    end: usize,
    /// Whether the file ended.
    eof: bool,
}

impl<R: Read> Input<R> {
    /// Wraps a reader.
    fn new(reader: R) -> Self {
        Self {
            reader,
            buf: Vec::new(),
            start: 0,
            end: 0,
            eof: false,
        }
    }

    /// The bytes read and not consumed.
    fn available(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }

    /// Reads until at least `want` bytes are available or the file ends.
    fn fill(&mut self, want: usize) -> io::Result<()> {
        while self.end - self.start < want && !self.eof {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let room = want.max(READ_CHUNK);
            if self.buf.len() < room {
                self.buf.resize(room, 0);
            }
            let Some(space) = self.buf.get_mut(self.end..) else {
                return Ok(());
            };
            match self.reader.read(space) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Drops `n` bytes from the front of what is available.
    fn consume(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
    }
}

/// The link layers this reader takes UDP out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// Ethernet II (1).
    Ethernet,
    /// A bare IPv4 or IPv6 packet (101, 228, 229).
    RawIp,
    /// Linux cooked capture v1 (113).
    LinuxSll,
    /// BSD loopback: a 4-byte address family, then IP (0 in host order, 108 in network order).
    Loopback,
}

impl Link {
    /// The link for a LINKTYPE value.
    fn from_code(code: u32) -> Option<Self> {
        match code {
            1 => Some(Self::Ethernet),
            101 | 228 | 229 => Some(Self::RawIp),
            113 => Some(Self::LinuxSll),
            0 | 108 => Some(Self::Loopback),
            _ => None,
        }
    }
}

/// A UDP datagram in a frame: source, destination, payload.
type Udp<'a> = (SocketAddr, SocketAddr, &'a [u8]);

/// The UDP addresses and payload of a frame: `Ok(None)` when it is no UDP datagram, `Err` when
/// its headers do not parse.
fn udp_of(link: Link, frame: &[u8]) -> Result<Option<Udp<'_>>, ()> {
    let sliced = match link {
        Link::Ethernet => SlicedPacket::from_ethernet(frame),
        Link::RawIp => SlicedPacket::from_ip(frame),
        Link::LinuxSll => SlicedPacket::from_linux_sll(frame),
        Link::Loopback => SlicedPacket::from_ip(frame.get(4..).ok_or(())?),
    }
    .map_err(|_| ())?;
    let (src, dst) = match &sliced.net {
        Some(NetSlice::Ipv4(ip)) => (
            IpAddr::V4(ip.header().source_addr()),
            IpAddr::V4(ip.header().destination_addr()),
        ),
        Some(NetSlice::Ipv6(ip)) => (
            IpAddr::V6(ip.header().source_addr()),
            IpAddr::V6(ip.header().destination_addr()),
        ),
        _ => return Ok(None),
    };
    match &sliced.transport {
        Some(TransportSlice::Udp(udp)) => Ok(Some((
            SocketAddr::new(src, udp.source_port()),
            SocketAddr::new(dst, udp.destination_port()),
            udp.payload(),
        ))),
        _ => Ok(None),
    }
}

/// Keeps the datagrams of the frames read, within the limits.
struct Collector<'a> {
    /// The file name, for messages.
    name: String,
    /// The port filter.
    port: Option<u16>,
    /// What was read so far.
    read: CaptureRead,
    /// Whether exported PDUs are read.
    pdus: bool,
    /// Where datagrams (and PDUs) go; `false` stops the reading.
    emit: &'a mut dyn FnMut(Captured) -> bool,
}

impl Collector<'_> {
    /// Takes one frame; `Err` when the receiver wants no more.
    fn frame(&mut self, link: Link, time: Duration, frame: &[u8]) -> Result<(), Stop> {
        self.read.frames += 1;
        let (src, dst, payload) = match udp_of(link, frame) {
            Ok(Some(udp)) => udp,
            Ok(None) => {
                self.read.skipped_not_udp += 1;
                return Ok(());
            }
            Err(()) => {
                self.read.skipped_malformed += 1;
                return Ok(());
            }
        };
        if let Some(port) = self.port {
            if src.port() != port && dst.port() != port {
                self.read.skipped_port += 1;
                return Ok(());
            }
        }
        let more = (self.emit)(Captured::Datagram(CapturedDatagram {
            time,
            src,
            dst,
            payload: payload.to_vec(),
            frame: self.read.frames,
        }));
        self.read.udp_datagrams += 1;
        if more { Ok(()) } else { Err(Stop) }
    }

    /// Takes one frame of link type 252: an exported PDU of ours goes on, others are skipped.
    fn pdu(&mut self, time: Duration, frame: &[u8]) -> Result<(), Stop> {
        self.read.frames += 1;
        let pdu = match read_pdu(frame) {
            Ok(pdu) if self.pdus => pdu,
            _ if !self.pdus => {
                self.read.skipped_link += 1;
                return Ok(());
            }
            Ok(_) | Err(PduError::OtherDissector(_)) => {
                self.read.skipped_link += 1;
                return Ok(());
            }
            Err(_) => {
                self.read.skipped_malformed += 1;
                return Ok(());
            }
        };
        if let Some(port) = self.port {
            let ports = [pdu.src, pdu.dst].map(|a| a.map(|a| a.port()));
            if !ports.contains(&Some(port)) {
                self.read.skipped_port += 1;
                return Ok(());
            }
        }
        self.read.exported_pdus += 1;
        let more = (self.emit)(Captured::Pdu(CapturedPdu {
            time,
            frame: self.read.frames,
            pdu,
        }));
        if more { Ok(()) } else { Err(Stop) }
    }

    /// Ends the reading early with `error`.
    fn stop(mut self, error: CaptureError) -> CaptureRead {
        self.read.stopped = Some(error);
        self.read
    }

    /// The error for a record cut short by the end of the file.
    fn truncated(&self, record: u64, have: usize, need: usize) -> CaptureError {
        CaptureError::Truncated(format!(
            "{} is truncated: record #{record} ends after {have} of its {need} bytes \
             ({} datagrams were read before it)",
            self.name, self.read.udp_datagrams
        ))
    }

    /// The error for a record claiming more than the limit.
    fn too_large(&self, record: u64, len: usize) -> CaptureError {
        CaptureError::Limit(format!(
            "{}: record #{record} claims {len} bytes, more than the {} KiB a record may hold \
             ({} datagrams were read before it)",
            self.name,
            MAX_RECORD / 1024,
            self.read.udp_datagrams
        ))
    }
}

/// The u32 at `at` in `bytes`, in the given byte order (0 when out of range).
fn read_u32(bytes: &[u8], at: usize, endianness: Endianness) -> u32 {
    let Some(field) = bytes.get(at..).and_then(|b| b.first_chunk::<4>()) else {
        return 0;
    };
    match endianness {
        Endianness::Big => u32::from_be_bytes(*field),
        Endianness::Little => u32::from_le_bytes(*field),
    }
}

/// Reads a classic pcap file after its magic number was recognised.
fn read_pcap(mut input: Input<impl Read>, mut c: Collector<'_>) -> Result<CaptureRead> {
    let name = c.name.clone();
    input
        .fill(PCAP_HEADER_LEN)
        .map_err(io_error(format!("cannot read {name}")))?;
    let (header, parser) = match PcapParser::new(input.available()) {
        Ok((_, parser)) => (parser.header(), parser),
        Err(e) => {
            return Err(CaptureError::NotACapture(format!(
                "{name} is not a valid pcap capture: its header {}",
                describe(&e)
            )));
        }
    };
    input.consume(PCAP_HEADER_LEN);
    let code = u32::from(header.datalink);
    let link = Link::from_code(code).ok_or(CaptureError::UnsupportedLink { name, code })?;
    let mut record = 0u64;
    loop {
        record += 1;
        if let Err(e) = input.fill(RECORD_HEADER_LEN) {
            let error = io_error(format!("cannot read {}", c.name))(e);
            return Ok(c.stop(error));
        }
        let avail = input.available();
        if avail.is_empty() {
            return Ok(c.read);
        }
        if avail.len() < RECORD_HEADER_LEN {
            let error = c.truncated(record, avail.len(), RECORD_HEADER_LEN);
            return Ok(c.stop(error));
        }
        let incl = read_u32(avail, 8, header.endianness) as usize;
        if incl > MAX_RECORD {
            let error = c.too_large(record, incl);
            return Ok(c.stop(error));
        }
        let need = RECORD_HEADER_LEN + incl;
        if let Err(e) = input.fill(need) {
            let error = io_error(format!("cannot read {}", c.name))(e);
            return Ok(c.stop(error));
        }
        let avail = input.available();
        if avail.len() < need {
            let error = c.truncated(record, avail.len(), need);
            return Ok(c.stop(error));
        }
        let (rest, raw) = match parser.next_raw_packet(avail) {
            Ok(parsed) => parsed,
            Err(e) => {
                let error =
                    CaptureError::Corrupt(format!("{}: record #{record} {}", c.name, describe(&e)));
                return Ok(c.stop(error));
            }
        };
        let used = avail.len() - rest.len();
        let time = pcap_time(raw.ts_sec, raw.ts_frac, header.ts_resolution);
        let result = c.frame(link, time, &raw.data);
        input.consume(used);
        if result.is_err() {
            return Ok(c.read);
        }
    }
}

/// A classic pcap timestamp; a fraction out of range is clamped.
fn pcap_time(secs: u32, frac: u32, resolution: TsResolution) -> Duration {
    let nanos = match resolution {
        TsResolution::MicroSecond => frac.saturating_mul(1000),
        TsResolution::NanoSecond => frac,
    };
    Duration::new(u64::from(secs), nanos.min(999_999_999))
}

/// A pcapng interface, as far as reading its packets needs.
#[derive(Debug, Clone, Copy)]
struct Interface {
    /// The link layer, when supported.
    link: Option<Link>,
    /// The LINKTYPE value.
    code: u32,
    /// Timestamp units per second.
    units: u64,
    /// Seconds added to every timestamp.
    offset: u64,
}

impl Interface {
    /// The interface an Interface Description Block describes.
    fn from_block(
        block: &pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock<'_>,
    ) -> Self {
        let code = u32::from(block.linktype);
        let mut units = 1_000_000;
        let mut offset = 0;
        for option in &block.options {
            match option {
                InterfaceDescriptionOption::IfTsResol(r) => units = ts_units(*r),
                InterfaceDescriptionOption::IfTsOffset(o) => offset = *o,
                _ => {}
            }
        }
        Self {
            link: Link::from_code(code),
            code,
            units,
            offset,
        }
    }

    /// A timestamp of `raw` units.
    fn time(&self, raw: u64) -> Duration {
        let units = self.units.max(1);
        let secs = (raw / units).saturating_add(self.offset);
        let frac = u128::from(raw % units) * 1_000_000_000 / u128::from(units);
        Duration::new(secs, u32::try_from(frac).unwrap_or(999_999_999))
    }
}

/// Timestamp units per second for an `if_tsresol` value: a power of ten, or of two when the
/// high bit is set.
fn ts_units(resolution: u8) -> u64 {
    if resolution & 0x80 == 0 {
        10u64.saturating_pow(u32::from(resolution.min(19)))
    } else {
        1u64 << u32::from((resolution & 0x7F).min(63))
    }
}

/// The endianness of a Section Header Block from its byte-order magic (bytes 8 to 11).
fn section_endianness(block: &[u8]) -> Option<Endianness> {
    match block.get(8..12)? {
        b if b == PCAPNG_BOM_BE => Some(Endianness::Big),
        b if b == PCAPNG_BOM_LE => Some(Endianness::Little),
        _ => None,
    }
}

/// Reads a pcapng file after its Section Header Block type was recognised: block by block,
/// each framed, parsed, then taken.
fn read_pcapng(mut input: Input<impl Read>, mut c: Collector<'_>) -> Result<CaptureRead> {
    let mut ng = PcapNg::default();
    let mut block_no = 0u64;
    loop {
        block_no += 1;
        let len = match block_length(&mut input, &c, ng.parser.as_ref(), block_no) {
            Ok(Some(len)) => len,
            Ok(None) => break,
            Err(Ending::NotACapture(e)) => return Err(e),
            Err(Ending::Stopped(e)) => return Ok(c.stop(e)),
        };
        if let Err(e) = input.fill(len) {
            let error = io_error(format!("cannot read {}", c.name))(e);
            return Ok(c.stop(error));
        }
        let avail = input.available();
        let Some(block_bytes) = avail.get(..len) else {
            let error = c.truncated(block_no, avail.len(), len);
            return Ok(c.stop(error));
        };
        let result = match ng.parse(block_bytes, &c.name, block_no) {
            Ok(block) => ng.take(block, &mut c),
            Err(Ending::NotACapture(e)) => return Err(e),
            Err(Ending::Stopped(e)) => return Ok(c.stop(e)),
        };
        input.consume(len);
        match result {
            Ok(()) => {}
            Err(PacketError::Stop) => return Ok(c.read),
            Err(PacketError::Error(error)) => return Ok(c.stop(error)),
        }
    }
    match ng.unsupported {
        Some(code) if c.read.datagrams.is_empty() => Err(CaptureError::UnsupportedLink {
            name: c.name.clone(),
            code,
        }),
        _ => Ok(c.read),
    }
}

/// How a pcapng block ended the reading.
enum Ending {
    /// The file is no pcapng capture at all (its first block is wrong): an error.
    NotACapture(CaptureError),
    /// The capture goes wrong here: what was read stands, with this error.
    Stopped(CaptureError),
}

/// The state of a pcapng reading: the section's parser, its interfaces, and the first
/// unsupported link type met.
#[derive(Default)]
struct PcapNg {
    parser: Option<PcapNgParser>,
    interfaces: Vec<Interface>,
    unsupported: Option<u32>,
}

/// The length of the next pcapng block, from its header (`None` at the end of the file).
fn block_length(
    input: &mut Input<impl Read>,
    c: &Collector<'_>,
    parser: Option<&PcapNgParser>,
    block_no: u64,
) -> std::result::Result<Option<usize>, Ending> {
    let name = &c.name;
    if let Err(e) = input.fill(12) {
        return Err(Ending::Stopped(io_error(format!("cannot read {name}"))(e)));
    }
    let avail = input.available();
    if avail.is_empty() {
        return Ok(None);
    }
    if avail.len() < 12 {
        return Err(Ending::Stopped(c.truncated(block_no, avail.len(), 12)));
    }
    let endianness = if avail.get(..4) == Some(&PCAPNG_SHB[..]) {
        section_endianness(avail)
    } else {
        parser.map(|p| p.section().endianness)
    };
    let first = parser.is_none();
    let Some(endianness) = endianness else {
        let error = CaptureError::NotACapture(format!(
            "{name} is not a valid pcapng capture: block #{block_no} has no valid byte-order magic"
        ));
        return Err(if first {
            Ending::NotACapture(error)
        } else {
            Ending::Stopped(error)
        });
    };
    let len = read_u32(avail, 4, endianness) as usize;
    if len < 12 || len % 4 != 0 {
        return Err(if first {
            Ending::NotACapture(CaptureError::NotACapture(format!(
                "{name} is not a valid pcapng capture: block #{block_no} is corrupt (length {len})"
            )))
        } else {
            Ending::Stopped(CaptureError::Corrupt(format!(
                "{name}: block #{block_no} is corrupt (length {len})"
            )))
        });
    }
    if len > MAX_BLOCK {
        return Err(Ending::Stopped(c.too_large(block_no, len)));
    }
    Ok(Some(len))
}

impl PcapNg {
    /// Parses a block (`None`: the section header that starts the file, taken by the parser).
    fn parse<'b>(
        &mut self,
        bytes: &'b [u8],
        name: &str,
        block_no: u64,
    ) -> std::result::Result<Option<Block<'b>>, Ending> {
        match self.parser.as_mut() {
            None => match PcapNgParser::new(bytes) {
                Ok((_, p)) => {
                    self.parser = Some(p);
                    Ok(None)
                }
                Err(e) => Err(Ending::NotACapture(CaptureError::NotACapture(format!(
                    "{name} is not a valid pcapng capture: its section header {}",
                    describe(&e)
                )))),
            },
            Some(p) => match p.next_block(bytes) {
                Ok((_, block)) => Ok(Some(block)),
                Err(e) => Err(Ending::Stopped(CaptureError::Corrupt(format!(
                    "{name}: block #{block_no} {}",
                    describe(&e)
                )))),
            },
        }
    }

    /// Takes a block: a section resets the interfaces, an interface description adds one, a
    /// packet goes to the collector.
    fn take(&mut self, block: Option<Block<'_>>, c: &mut Collector<'_>) -> Result<(), PacketError> {
        let packet = match block {
            None | Some(Block::SectionHeader(_)) => {
                self.interfaces.clear();
                return Ok(());
            }
            Some(Block::InterfaceDescription(idb)) => {
                if self.interfaces.len() >= MAX_INTERFACES {
                    return Err(PacketError::Error(CaptureError::Limit(format!(
                        "{}: more than {MAX_INTERFACES} interfaces in one section",
                        c.name
                    ))));
                }
                self.interfaces.push(Interface::from_block(&idb));
                return Ok(());
            }
            Some(Block::EnhancedPacket(epb)) => {
                let raw = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                packet_on(c, &self.interfaces, epb.interface_id, raw, &epb.data)
            }
            Some(Block::Packet(pb)) => packet_on(
                c,
                &self.interfaces,
                u32::from(pb.interface_id),
                pb.timestamp,
                &pb.data,
            ),
            // No timestamp; the first interface.
            Some(Block::SimplePacket(spb)) => packet_on(c, &self.interfaces, 0, 0, &spb.data),
            Some(_) => return Ok(()),
        };
        let code = packet?;
        self.unsupported = self.unsupported.or(code);
        Ok(())
    }
}

/// Takes a pcapng packet captured on interface `id`; returns the link type code when the
/// interface's link type is not supported (the packet is then skipped).
fn packet_on(
    c: &mut Collector<'_>,
    interfaces: &[Interface],
    id: u32,
    raw_time: u64,
    data: &[u8],
) -> Result<Option<u32>, PacketError> {
    let Some(interface) = usize::try_from(id).ok().and_then(|i| interfaces.get(i)) else {
        return Err(PacketError::Error(CaptureError::Corrupt(format!(
            "{}: a packet refers to interface {id}, which no Interface Description Block describes",
            c.name
        ))));
    };
    if interface.code == u32::from(LINKTYPE_WIRESHARK_UPPER_PDU) {
        c.pdu(interface.time(raw_time), data)
            .map_err(|Stop| PacketError::Stop)?;
        return Ok(None);
    }
    let Some(link) = interface.link else {
        c.read.frames += 1;
        c.read.skipped_link += 1;
        return Ok(Some(interface.code));
    };
    c.frame(link, interface.time(raw_time), data)
        .map_err(|Stop| PacketError::Stop)?;
    Ok(None)
}

/// The receiver of datagrams asked to stop.
#[derive(Debug)]
struct Stop;

/// Why a pcapng packet ended the reading.
#[derive(Debug)]
enum PacketError {
    /// The receiver asked to stop.
    Stop,
    /// The packet is corrupt.
    Error(CaptureError),
}

/// Writes UDP datagrams as a classic pcap file (Ethernet link type, microsecond timestamps),
/// each framed with Ethernet, IPv4 or IPv6, and UDP headers.
pub struct PcapWriter {
    /// The buffered file.
    out: BufWriter<File>,
    /// Its path, for messages.
    path: PathBuf,
    /// Scratch for building frames.
    frame: Vec<u8>,
}

impl PcapWriter {
    /// The snap length written in the header: any UDP datagram with its headers fits.
    const SNAPLEN: u32 = 262_144;
    /// The source MAC address of every frame (locally administered).
    const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
    /// The destination MAC address of every frame.
    const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

    /// Creates (or truncates) `path` and writes the pcap header.
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(io_error(format!(
            "cannot create the capture file {}",
            path.display()
        )))?;
        let mut out = BufWriter::new(file);
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: Self::SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::MicroSecond,
            endianness: Endianness::Little,
        };
        header.write_to(&mut out).map_err(|e| {
            CaptureError::Frame(format!(
                "cannot write to {}: {}",
                path.display(),
                describe(&e)
            ))
        })?;
        Ok(Self {
            out,
            path: path.to_path_buf(),
            frame: Vec::new(),
        })
    }

    /// Appends one datagram. An IPv4 address paired with an IPv6 one is written as its
    /// IPv4-mapped IPv6 form.
    pub fn write(
        &mut self,
        time: SystemTime,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
    ) -> Result<()> {
        self.frame.clear();
        let builder = PacketBuilder::ethernet2(Self::SRC_MAC, Self::DST_MAC);
        let written = match (src.ip(), dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => builder
                .ipv4(s.octets(), d.octets(), 64)
                .udp(src.port(), dst.port())
                .write(&mut self.frame, payload),
            (s, d) => builder
                .ipv6(v6(s).octets(), v6(d).octets(), 64)
                .udp(src.port(), dst.port())
                .write(&mut self.frame, payload),
        };
        written.map_err(|e| {
            CaptureError::Frame(format!(
                "cannot frame a datagram of {} bytes for {}: {e}",
                payload.len(),
                self.path.display()
            ))
        })?;
        let len = u32::try_from(self.frame.len())
            .ok()
            .filter(|&n| n <= Self::SNAPLEN)
            .ok_or_else(|| {
                CaptureError::Frame(format!(
                    "a frame of {} bytes is too large",
                    self.frame.len()
                ))
            })?;
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = u32::try_from(since.as_secs()).unwrap_or(u32::MAX);
        let mut record = [0u8; RECORD_HEADER_LEN];
        for (at, value) in [(0, secs), (4, since.subsec_micros()), (8, len), (12, len)] {
            if let Some(field) = record.get_mut(at..at + 4) {
                field.copy_from_slice(&value.to_le_bytes());
            }
        }
        self.out
            .write_all(&record)
            .and_then(|()| self.out.write_all(&self.frame))
            .map_err(io_error(format!("cannot write to {}", self.path.display())))
    }

    /// Writes buffered records to the file, so a reader sees every datagram written so far.
    pub fn flush(&mut self) -> Result<()> {
        self.out
            .flush()
            .map_err(io_error(format!("cannot write to {}", self.path.display())))
    }
}

/// An address as IPv6 (IPv4 addresses in their mapped form).
fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path of its own for each call: tests run in parallel, and two of them write samples.
    fn temp(name: &str) -> PathBuf {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        std::env::temp_dir().join(format!(
            "soe-dissect-capture-{}-{n}-{name}",
            std::process::id()
        ))
    }

    #[test]
    fn writer_output_reads_back_while_open() {
        let path = temp("rt.pcap");
        let mut w = PcapWriter::create(&path).unwrap();
        let a: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let b: SocketAddr = "[::1]:20042".parse().unwrap();
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        w.write(t, a, "10.0.0.1:20042".parse().unwrap(), b"\x00\x06")
            .unwrap();
        w.write(t, b, "[::2]:5000".parse().unwrap(), b"hello")
            .unwrap();
        w.flush().unwrap();
        let read = read_capture(&path, None).unwrap();
        assert!(read.stopped.is_none());
        assert_eq!(read.datagrams.len(), 2);
        assert_eq!(read.datagrams[0].src, a);
        assert_eq!(read.datagrams[0].payload, b"\x00\x06");
        assert_eq!(
            read.datagrams[0].time,
            Duration::from_micros(1_700_000_000_123_456)
        );
        // mixed families: written as IPv6 with the mapped form
        assert_eq!(read.datagrams[1].src, b);
        assert_eq!(read.datagrams[1].payload, b"hello");
        // mixed families are written as IPv6, the IPv4 side in its mapped form
        w.write(t, b, a, b"mixed").unwrap();
        w.flush().unwrap();
        let read = read_capture(&path, None).unwrap();
        assert_eq!(
            read.datagrams[2].dst.ip(),
            IpAddr::V6("::ffff:127.0.0.1".parse().unwrap())
        );
        let only = read_capture(&path, Some(5000)).unwrap();
        assert_eq!(only.datagrams.len(), 1);
        assert_eq!(only.skipped_port, 2);
        // frames are numbered as in the capture, the skipped ones counted
        assert_eq!(only.datagrams[0].frame, 2);
        assert_eq!(
            read.datagrams.iter().map(|d| d.frame).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        drop(w);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn truncated_and_oversized_records_stop_reading() {
        let path = temp("cut.pcap");
        let mut w = PcapWriter::create(&path).unwrap();
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for _ in 0..3 {
            w.write(SystemTime::now(), a, a, &[1, 2, 3]).unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
        let read = read_capture(&path, None).unwrap();
        assert_eq!(read.datagrams.len(), 2);
        let msg = format!("{:#}", read.stopped.unwrap());
        assert!(
            msg.contains("truncated") && msg.contains("2 datagrams"),
            "{msg}"
        );

        // a record claiming 1 GiB
        let mut big = bytes[..24].to_vec();
        big.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0x40]);
        std::fs::write(&path, &big).unwrap();
        let read = read_capture(&path, None).unwrap();
        let msg = format!("{:#}", read.stopped.unwrap());
        assert!(msg.contains("claims"), "{msg}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn foreign_and_missing_files_fail() {
        let path = temp("foreign.txt");
        std::fs::write(&path, "hello, this is text\n").unwrap();
        let e = format!("{:#}", read_capture(&path, None).unwrap_err());
        assert!(e.contains("is not a pcap or pcapng capture"), "{e}");
        std::fs::write(&path, "").unwrap();
        let e = format!("{:#}", read_capture(&path, None).unwrap_err());
        assert!(e.contains("empty"), "{e}");
        let _ = std::fs::remove_file(&path);
        let e = format!("{:#}", read_capture(&path, None).unwrap_err());
        assert!(e.contains("cannot open"), "{e}");
    }

    /// A capture of a few frames in each format.
    fn samples() -> Vec<Vec<u8>> {
        use pcap_file::pcapng::PcapNgWriter;
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        let path = temp("sample.pcap");
        let mut w = PcapWriter::create(&path).unwrap();
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "[::1]:2".parse().unwrap();
        for payload in [&b"\x00\x06\x01\x02"[..], b"abc", &[0u8; 40]] {
            w.write(SystemTime::now(), a, a, payload).unwrap();
            w.write(SystemTime::now(), b, b, payload).unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let pcap = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);

        let mut ng = PcapNgWriter::new(Vec::new()).unwrap();
        ng.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        })
        .unwrap();
        for r in read_from(&pcap[..], "x".into(), None).unwrap().datagrams {
            let mut frame = Vec::new();
            PacketBuilder::ethernet2([0; 6], [0; 6])
                .ipv6(v6(r.src.ip()).octets(), v6(r.dst.ip()).octets(), 1)
                .udp(r.src.port(), r.dst.port())
                .write(&mut frame, &r.payload)
                .unwrap();
            ng.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: r.time,
                original_len: frame.len() as u32,
                data: std::borrow::Cow::Owned(frame),
                options: vec![],
            })
            .unwrap();
        }
        vec![pcap, ng.into_inner()]
    }

    /// Every error of a cut or corrupted capture is in this crate's words: none of the pcap
    /// library's own ("Need more bytes", "Incomplete buffer"...), and each names the input.
    #[test]
    fn an_io_error_says_its_cause_once() {
        // reading a directory fails with the system's EISDIR
        let dir = File::open("/").unwrap();
        let e = read_from(dir, "/".into(), None).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("cannot read /"), "{text}");
        assert_eq!(text.matches("os error").count(), 1, "{text}");
        assert!(std::error::Error::source(&e).is_none(), "{text}");
        let Err(w) = PcapWriter::create(Path::new("/no/such/dir/x.pcap")) else {
            panic!("created a file in a missing directory");
        };
        assert!(std::error::Error::source(&w).is_none());
        assert_eq!(w.to_string().matches("os error").count(), 1, "{w}");
    }

    #[test]
    fn errors_speak_our_words() {
        let check = |e: &CaptureError| {
            let text = format!("{e:#}");
            for foreign in [
                "Need more",
                "need more",
                "Incomplete",
                "IncompleteBuffer",
                "Error(",
            ] {
                assert!(!text.contains(foreign), "{text}");
            }
            assert!(text.contains("cap.x"), "{text}");
        };
        let mut seen = 0;
        for sample in samples() {
            for len in 1..sample.len() {
                match read_from(&sample[..len], "cap.x".into(), None) {
                    Err(e) => {
                        check(&e);
                        seen += 1;
                    }
                    Ok(read) => {
                        if let Some(e) = &read.stopped {
                            check(e);
                            seen += 1;
                        }
                    }
                }
            }
        }
        assert!(seen > 100, "cut captures report errors ({seen})");
    }

    #[test]
    fn hostile_captures_never_panic() {
        let samples = samples();
        for sample in &samples {
            let all = read_from(&sample[..], "x".into(), None).unwrap();
            assert_eq!(all.datagrams.len(), 6);
            assert!(all.stopped.is_none());
            // every truncation
            for len in 0..sample.len() {
                if let Ok(read) = read_from(&sample[..len], "x".into(), None) {
                    assert!(read.datagrams.len() <= 6);
                }
            }
        }
        // random corruption
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..3000 {
            let mut bytes = samples[i % 2].clone();
            for _ in 0..(1 + next() % 4) {
                let at = (next() % bytes.len() as u64) as usize;
                bytes[at] = next() as u8;
            }
            let _ = read_from(&bytes[..], "x".into(), Some(2));
        }
    }

    #[test]
    fn timestamp_resolutions() {
        assert_eq!(ts_units(6), 1_000_000);
        assert_eq!(ts_units(9), 1_000_000_000);
        assert_eq!(ts_units(0x8A), 1024);
        assert_eq!(ts_units(0xFF), 1 << 63);
        assert_eq!(ts_units(50), 10u64.pow(19));
        let i = Interface {
            link: None,
            code: 0,
            units: 1_000,
            offset: 10,
        };
        assert_eq!(i.time(2_500), Duration::from_millis(12_500));
    }
}
