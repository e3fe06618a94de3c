//! The RC4 key check between `soe ping`/`soe load` and `soe serve`.
//!
//! An echo cannot tell a wrong key: what the server decrypts with another key (or none) is
//! garbage, but it encrypts the garbage back with the same wrong keystream, and the client's
//! decryption gives its own message back. So before its workload a client checks, and no
//! verdict ever rests on a message that was not an answer to the check, nor on a lost one:
//!
//! 1. It sends a [`hello`] unreliably (unreliable data is never encrypted; a game server's
//!    own messages are never taken for an answer): a marker, a random nonce, and whether the
//!    probe went yet. It sends it again every [`HELLO_EVERY`] until the check ends. A
//!    `soe serve` answers each hello with an [`answer`] carrying the same nonce and what it
//!    saw of the session's first reliable message ([`Status`]). A plain echo server sends the
//!    hello back as it came: the key cannot be checked there (the workload goes on, and the
//!    client says so). No answer within [`HELLO_WAIT`]: not checked either.
//! 2. Once answered, the client sends the probe as its first reliable message: 8 random bytes
//!    and 8 bytes derived from them ([`probe`]), no fixed text, so the probe gives an
//!    eavesdropper no known plaintext.
//! 3. A server that reads the probe right answers it with its bytes reversed, reliably on
//!    channel 0: reversed, each byte sits at another keystream position, so a wrong key no
//!    longer cancels out. The answers to later hellos say that the probe read and which of the
//!    server's reliable messages on channel 0 is the answer ([`Status::Read`]), so that the
//!    client judges that message and no other (a game server's own messages may come first).
//!    A first reliable message that does not read as a probe is echoed like any other (it may
//!    be a workload message whose client never saw the hello answered), and the answers to
//!    later hellos say so ([`Status::Unreadable`]): only a client whose hello says its probe
//!    went ([`PROBE_SENT`]) takes that as a key mismatch, and only then does the server count
//!    one.
//!
//! Each verdict rests on exact evidence: the probe reversed (agreed); the server's statement,
//! carrying the client's nonce, that the message the client says was its probe did not read,
//! or that the answer is a message that does not read back here (mismatch). A lost datagram
//! only delays the check, until it ends unchecked.
//!
//! Ordinary echo users never send the hello, so the server echoes everything they send. With
//! `--rc4-after-first-message` the probe is the first reliable message: it travels in
//! plaintext, both sides switch RC4 on after it, and the answer comes back encrypted, so the
//! switch is checked too.

use std::time::Duration;

/// What every hello starts with: "do you check keys?". Its first byte is not zero, as an
/// unreliable message's must be.
pub(crate) const HELLO_MARK: &[u8] = b"\x7fsoe key check?";
/// What every answer to a hello starts with.
pub(crate) const ANSWER_MARK: &[u8] = b"\x7fsoe key check!";
/// A hello's length: the mark, the 8-byte nonce, one byte of phase.
const HELLO_LEN: usize = 15 + 8 + 1;
/// An answer's length: the mark, the nonce, one byte of status, the answer's index (u32).
const ANSWER_LEN: usize = HELLO_LEN + 4;
/// A hello's last byte before the probe went.
pub(crate) const PROBE_NEXT: u8 = b'?';
/// A hello's last byte once the probe went as the client's first reliable message.
pub(crate) const PROBE_SENT: u8 = b'>';
/// How often the hello is sent again while the check lasts (it is unreliable).
pub(crate) const HELLO_EVERY: Duration = Duration::from_millis(250);
/// How long the first hello waits for its answer at most (less when the command's timeout is
/// shorter): a `soe serve` answers at once, and a server that does not answer (one that does
/// not take part, or whose application is busy) must not hold the workload up long.
pub(crate) const HELLO_WAIT: Duration = Duration::from_secs(1);
/// The probe's length.
pub(crate) const PROBE_LEN: usize = 16;

/// What a server saw of a session's first reliable message, as an answer to a hello says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// None yet: the next reliable message is taken as the probe if it reads as one.
    Awaited,
    /// It read as a probe; its answer is the server's reliable message on channel 0 with this
    /// index (counted from 0 over the session; `soe serve` sends nothing reliable before it,
    /// so 0).
    Read(u32),
    /// It did not read as a probe: if it was one, the keys differ.
    Unreadable,
    /// Reliable data came before any hello: this session's key cannot be checked.
    TooLate,
}

impl Status {
    fn byte(self) -> u8 {
        match self {
            Self::Awaited => b'?',
            Self::Read(_) => b'=',
            Self::Unreadable => b'!',
            Self::TooLate => b'-',
        }
    }
}

/// A hello with `nonce`; `phase` is [`PROBE_NEXT`] or [`PROBE_SENT`].
pub(crate) fn hello(nonce: u64, phase: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(HELLO_LEN);
    out.extend_from_slice(HELLO_MARK);
    out.extend_from_slice(&nonce.to_be_bytes());
    out.push(phase);
    out
}

/// The nonce and phase of a hello; `None` for any other message.
pub(crate) fn read_hello(message: &[u8]) -> Option<(u64, u8)> {
    let rest = message.strip_prefix(HELLO_MARK)?;
    let (nonce, phase) = rest.split_first_chunk::<8>()?;
    match phase {
        [p @ (PROBE_NEXT | PROBE_SENT)] => Some((u64::from_be_bytes(*nonce), *p)),
        _ => None,
    }
}

/// The answer to a hello with `nonce`.
pub(crate) fn answer(nonce: u64, status: Status) -> Vec<u8> {
    let index = match status {
        Status::Read(index) => index,
        _ => 0,
    };
    let mut out = Vec::with_capacity(ANSWER_LEN);
    out.extend_from_slice(ANSWER_MARK);
    out.extend_from_slice(&nonce.to_be_bytes());
    out.push(status.byte());
    out.extend_from_slice(&index.to_be_bytes());
    out
}

/// The nonce and status of an answer; `None` for any other message.
pub(crate) fn read_answer(message: &[u8]) -> Option<(u64, Status)> {
    let rest = message.strip_prefix(ANSWER_MARK)?;
    let (nonce, rest) = rest.split_first_chunk::<8>()?;
    let (&byte, index) = rest.split_first()?;
    let index = u32::from_be_bytes(*<&[u8; 4]>::try_from(index).ok()?);
    let status = match byte {
        b'?' => Status::Awaited,
        b'=' => Status::Read(index),
        b'!' => Status::Unreadable,
        b'-' => Status::TooLate,
        _ => return None,
    };
    Some((u64::from_be_bytes(*nonce), status))
}

/// A probe from 8 random bytes: the bytes, then [`derive()`] of them.
pub(crate) fn probe(random: u64) -> [u8; PROBE_LEN] {
    let mut out = [0u8; PROBE_LEN];
    out[..8].copy_from_slice(&random.to_be_bytes());
    out[8..].copy_from_slice(&derive(random).to_be_bytes());
    out
}

/// Whether `bytes` read as a probe: 16 bytes, the last 8 derived from the first 8.
pub(crate) fn is_probe(bytes: &[u8]) -> bool {
    let (Some(head), Some(tail)) = (bytes.first_chunk::<8>(), bytes.get(8..)) else {
        return false;
    };
    bytes.len() == PROBE_LEN && tail == derive(u64::from_be_bytes(*head)).to_be_bytes()
}

/// The answer to a probe: its bytes reversed.
pub(crate) fn reversed(probe: &[u8]) -> Vec<u8> {
    probe.iter().rev().copied().collect()
}

/// Whether a message belongs to the key check (a late answer, or a hello an echo server sent
/// back), so that a workload skips it.
pub(crate) fn is_noise(message: &[u8]) -> bool {
    read_answer(message).is_some() || read_hello(message).is_some()
}

/// A bijective 64-bit mix (SplitMix64's finaliser): what the probe's second half is.
fn derive(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What the server's side of the key check makes of one session.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerCheck {
    /// Nothing yet.
    #[default]
    Idle,
    /// A reliable message came before any hello: an ordinary client.
    Plain,
    /// A hello came: the first reliable message is the probe if it reads as one.
    Awaiting,
    /// The probe read right (the client→server direction agrees); its answer went as the
    /// reliable message on channel 0 with this index.
    Read(u32),
    /// The first reliable message did not read as a probe (echoed); no client said it was one.
    NotProbe,
    /// The client's hello says its first reliable message was the probe, and it did not read:
    /// the keys differ.
    Mismatch,
}

/// The server's reply to a hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The answer to send, unreliably.
    pub(crate) answer: Vec<u8>,
    /// Whether this hello showed a key mismatch for the first time (to log and count once).
    pub(crate) mismatch: bool,
}

impl ServerCheck {
    /// Takes an unreliable message; a hello gets a [`Reply`] (and is not echoed), anything
    /// else `None`.
    pub(crate) fn on_unreliable(&mut self, message: &[u8]) -> Option<Reply> {
        let (nonce, phase) = read_hello(message)?;
        let before = *self;
        match (before, phase) {
            (Self::Idle, _) => *self = Self::Awaiting,
            (Self::NotProbe, PROBE_SENT) => *self = Self::Mismatch,
            _ => {}
        }
        let status = match *self {
            Self::Idle | Self::Awaiting => Status::Awaited,
            Self::Plain => Status::TooLate,
            Self::Read(index) => Status::Read(index),
            Self::NotProbe | Self::Mismatch => Status::Unreadable,
        };
        Some(Reply {
            answer: answer(nonce, status),
            mismatch: before != Self::Mismatch && *self == Self::Mismatch,
        })
    }

    /// Takes the session's first reliable message; when it reads as the probe, returns the
    /// answer to send on channel 0 instead of an echo, after the `sent_before` reliable
    /// messages the server already sent there. Anything else is echoed as usual.
    pub(crate) fn on_first_reliable(
        &mut self,
        message: &[u8],
        sent_before: u32,
    ) -> Option<Vec<u8>> {
        match *self {
            Self::Idle => *self = Self::Plain,
            Self::Awaiting if is_probe(message) => {
                *self = Self::Read(sent_before);
                return Some(reversed(message));
            }
            Self::Awaiting => *self = Self::NotProbe,
            _ => {}
        }
        None
    }
}

/// What the client's key check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyCheck {
    /// The server read the probe and this side read its answer: the keys agree (and with
    /// `--rc4-after-first-message`, both switched at the same message).
    Agreed,
    /// The server does not take part (a plain echo server), or did not answer: why.
    Unchecked(String),
    /// The keys differ: what was seen.
    Differ(String),
}

impl KeyCheck {
    /// The verdict on the server's statement that the probe did not read.
    pub(crate) fn unreadable(key: bool) -> Self {
        Self::Differ(format!(
            "the server could not read the key probe ({} key on this side): the RC4 keys \
             differ (one side has --rc4-key and the other none, or another), or only one side \
             uses --rc4-after-first-message",
            if key { "with the" } else { "no" }
        ))
    }

    /// The verdict on an answer that does not read back.
    fn unread_answer(key: bool) -> Self {
        Self::Differ(format!(
            "the server read the key probe, but its answer does not read back here ({} key on \
             this side): the RC4 keys differ, though both sides switch after the first message",
            if key { "with the" } else { "no" }
        ))
    }

    /// One line for the user.
    pub(crate) fn describe(&self, key: bool) -> String {
        match (self, key) {
            (Self::Agreed, true) => "RC4 key checked: the server reads this side's data".into(),
            (Self::Agreed, false) => {
                "checked: no RC4 on either side, the server reads this side's plaintext".into()
            }
            (Self::Unchecked(why), _) => format!("RC4 key not checked: {why}"),
            (Self::Differ(why), _) => format!("RC4 key mismatch: {why}"),
        }
    }
}

/// What a message means to the client's side of the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The check is over.
    Verdict(KeyCheck),
    /// The server takes part: send the probe now ([`ClientCheck::probe_sent`]).
    SendProbe,
    /// Part of the check, nothing to do.
    Check,
    /// Not the check's: a message the server sent on its own (or the probe's echo).
    Other,
}

/// The client's side of the key check, without I/O: it is told what arrives and says what it
/// means.
#[derive(Debug, Clone)]
pub(crate) struct ClientCheck {
    nonce: u64,
    probe: [u8; PROBE_LEN],
    /// Whether this side has an RC4 key (for the words of a verdict).
    key: bool,
    probe_sent: bool,
    /// Reliable messages received on channel 0 so far.
    reliable_seen: u64,
    /// The index of the answer among them, once the server said it.
    answer_at: Option<u64>,
}

impl ClientCheck {
    /// A check with its hello's `nonce` and the probe's `random` bytes.
    pub(crate) fn new(nonce: u64, random: u64, key: bool) -> Self {
        Self {
            nonce,
            probe: probe(random),
            key,
            probe_sent: false,
            reliable_seen: 0,
            answer_at: None,
        }
    }

    /// The hello to send now.
    pub(crate) fn hello(&self) -> Vec<u8> {
        hello(
            self.nonce,
            if self.probe_sent {
                PROBE_SENT
            } else {
                PROBE_NEXT
            },
        )
    }

    /// The probe, to send as the session's first reliable message.
    pub(crate) fn probe(&self) -> [u8; PROBE_LEN] {
        self.probe
    }

    /// Notes that the probe went.
    pub(crate) fn probe_sent(&mut self) {
        self.probe_sent = true;
    }

    /// Whether the probe went.
    pub(crate) fn is_probe_sent(&self) -> bool {
        self.probe_sent
    }

    /// Takes an unreliable (or ordered) message.
    pub(crate) fn on_unreliable(&mut self, message: &[u8]) -> Seen {
        if let Some((nonce, _)) = read_hello(message) {
            if nonce == self.nonce && !self.probe_sent {
                return Seen::Verdict(KeyCheck::Unchecked(
                    "the server sends back the key-check hello as it came: a plain echo \
                     server, not `soe serve`"
                        .into(),
                ));
            }
            return Seen::Check;
        }
        let Some((nonce, status)) = read_answer(message) else {
            return Seen::Other;
        };
        if nonce != self.nonce {
            return Seen::Check;
        }
        match (status, self.probe_sent) {
            (Status::TooLate, _) => Seen::Verdict(KeyCheck::Unchecked(
                "the server had reliable data from this session before the hello".into(),
            )),
            (Status::Awaited, false) => Seen::SendProbe,
            (Status::Unreadable, true) => Seen::Verdict(KeyCheck::unreadable(self.key)),
            (Status::Read(index), true) if u64::from(index) < self.reliable_seen => {
                // That message came, and it was not the probe reversed.
                Seen::Verdict(KeyCheck::unread_answer(self.key))
            }
            (Status::Read(index), true) => {
                self.answer_at = Some(u64::from(index));
                Seen::Check
            }
            _ => Seen::Check,
        }
    }

    /// Takes a reliable message that came on `channel` (its number).
    pub(crate) fn on_reliable(&mut self, channel: usize, message: &[u8]) -> Seen {
        if channel != 0 {
            return Seen::Other;
        }
        let index = self.reliable_seen;
        self.reliable_seen += 1;
        if read_hello(message).is_some_and(|(nonce, _)| nonce == self.nonce) && !self.probe_sent {
            // An echo server that sends everything back reliably.
            return Seen::Verdict(KeyCheck::Unchecked(
                "the server sends back the key-check hello (reliably): an echo server, not \
                 `soe serve`"
                    .into(),
            ));
        }
        if self.probe_sent && message == reversed(&self.probe).as_slice() {
            return Seen::Verdict(KeyCheck::Agreed);
        }
        if self.answer_at == Some(index) {
            return Seen::Verdict(KeyCheck::unread_answer(self.key));
        }
        Seen::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_reads_only_as_itself() {
        for seed in [0u64, 1, 0xDEAD_BEEF, u64::MAX] {
            let p = probe(seed);
            assert!(is_probe(&p));
            let mut garbled = p;
            garbled[3] ^= 0x40;
            assert!(!is_probe(&garbled));
            assert!(!is_probe(&p[..15]));
            // the answer is no echo
            assert_ne!(reversed(&p), p.to_vec());
        }
        assert!(!is_probe(&hello(1, PROBE_NEXT)));
    }

    #[test]
    fn hellos_and_answers_read_back_and_nothing_else_does() {
        for nonce in [0, 7, u64::MAX] {
            for phase in [PROBE_NEXT, PROBE_SENT] {
                assert_eq!(read_hello(&hello(nonce, phase)), Some((nonce, phase)));
            }
            for status in [
                Status::Awaited,
                Status::Read(0),
                Status::Read(70_000),
                Status::Unreadable,
                Status::TooLate,
            ] {
                assert_eq!(read_answer(&answer(nonce, status)), Some((nonce, status)));
                assert!(read_hello(&answer(nonce, status)).is_none());
            }
        }
        let h = hello(9, PROBE_NEXT);
        assert!(read_hello(&h[..h.len() - 1]).is_none());
        assert!(read_hello(&[&h[..], b"x"].concat()).is_none());
        assert!(read_hello(&hello(9, b'x')).is_none());
        // The first version's fixed hello is no hello now (no nonce).
        assert!(read_hello(b"\x7fsoe key check?").is_none());
        assert!(read_answer(b"\x7fsoe key check!").is_none());
    }

    /// What a client and a server with these keys find when the probe and its answer go
    /// through their ciphers (each direction one keystream from the key; `None`: no RC4).
    fn check_through(
        client_key: Option<&[u8]>,
        server_key: Option<&[u8]>,
    ) -> (KeyCheck, ServerCheck) {
        use soe_crypto::Rc4;
        let cipher = |key: Option<&[u8]>| key.map(|k| Rc4::new(k).unwrap());
        let through = |c: &mut Option<Rc4>, bytes: &mut Vec<u8>| {
            if let Some(c) = c.as_mut() {
                c.apply(bytes);
            }
        };
        let (mut c_send, mut c_recv) = (cipher(client_key), cipher(client_key));
        let (mut s_recv, mut s_send) = (cipher(server_key), cipher(server_key));
        let mut client = ClientCheck::new(11, 42, client_key.is_some());
        let mut server = ServerCheck::default();
        let reply = server.on_unreliable(&client.hello()).unwrap();
        assert_eq!(client.on_unreliable(&reply.answer), Seen::SendProbe);
        let mut wire = client.probe().to_vec();
        client.probe_sent();
        through(&mut c_send, &mut wire);
        through(&mut s_recv, &mut wire);
        // The server answers, or echoes what it read.
        let mut back = server.on_first_reliable(&wire, 0).unwrap_or(wire);
        through(&mut s_send, &mut back);
        through(&mut c_recv, &mut back);
        if let Seen::Verdict(v) = client.on_reliable(0, &back) {
            return (v, server);
        }
        let reply = server.on_unreliable(&client.hello()).unwrap();
        match client.on_unreliable(&reply.answer) {
            Seen::Verdict(v) => (v, server),
            other => panic!("no verdict: {other:?}"),
        }
    }

    #[test]
    fn a_wrong_keystream_does_not_cancel_out() {
        for (client_key, server_key) in [
            (Some(&b"one key"[..]), Some(&b"another"[..])),
            (Some(b"one key"), None),
            (None, Some(b"one key")),
            (Some(b"same key"), Some(b"same key")),
            (None, None),
        ] {
            let (verdict, server) = check_through(client_key, server_key);
            let agree = client_key == server_key;
            assert_eq!(
                verdict == KeyCheck::Agreed,
                agree,
                "{client_key:?} {server_key:?}"
            );
            assert_eq!(server == ServerCheck::Read(0), agree);
            assert_eq!(server == ServerCheck::Mismatch, !agree);
        }
    }

    #[test]
    fn ordinary_clients_are_echoed() {
        let mut server = ServerCheck::default();
        // no hello: a 16-byte first message is an ordinary message
        assert_eq!(server.on_first_reliable(&probe(1), 0), None);
        assert!(server.on_unreliable(b"\x01hello").is_none());
        // a hello now is too late
        let reply = server.on_unreliable(&hello(3, PROBE_NEXT)).unwrap();
        assert_eq!(read_answer(&reply.answer), Some((3, Status::TooLate)));
        let mut server = ServerCheck::default();
        assert!(server.on_unreliable(&hello(3, PROBE_NEXT)).is_some());
        assert_eq!(server, ServerCheck::Awaiting);
        // after the hello, a first message that is no probe is ordinary too
        assert_eq!(server.on_first_reliable(b"short", 0), None);
        assert_eq!(server, ServerCheck::NotProbe);
    }

    /// Issue 35 §3.3: the hello's answers are lost, so the client sends no probe and starts its
    /// workload with a 16-byte message: the server echoes it and counts no mismatch, whatever
    /// else comes, as long as no hello says a probe went.
    #[test]
    fn a_lost_answer_is_no_verdict() {
        let mut server = ServerCheck::default();
        let mut client = ClientCheck::new(5, 6, true);
        let _lost = server.on_unreliable(&client.hello()).unwrap();
        let _lost_again = server.on_unreliable(&client.hello()).unwrap();
        let workload = *b"0123456789abcdef";
        assert_eq!(server.on_first_reliable(&workload, 0), None, "echoed");
        // A late hello of this session (sent before it gave up) gets a statement, not a count.
        let reply = server.on_unreliable(&hello(5, PROBE_NEXT)).unwrap();
        assert!(!reply.mismatch);
        assert_eq!(server, ServerCheck::NotProbe);
        // ...and the client, whose probe did not go, takes no verdict from it.
        assert_eq!(client.on_unreliable(&reply.answer), Seen::Check);
        // The same statement once the probe went is a mismatch, counted once.
        client.probe_sent();
        let reply = server.on_unreliable(&client.hello()).unwrap();
        assert!(reply.mismatch);
        assert!(!server.on_unreliable(&client.hello()).unwrap().mismatch);
        assert!(matches!(
            client.on_unreliable(&reply.answer),
            Seen::Verdict(KeyCheck::Differ(_))
        ));
    }

    /// A game server's own messages, before the answer or in its place, are never taken for
    /// the answer; only the message the server names is judged.
    #[test]
    fn only_the_answer_is_judged() {
        let mut client = ClientCheck::new(5, 6, true);
        assert_eq!(client.on_unreliable(b"\x01tick"), Seen::Other);
        assert_eq!(
            client.on_unreliable(&answer(99, Status::Awaited)),
            Seen::Check,
            "another nonce"
        );
        assert_eq!(
            client.on_unreliable(&answer(5, Status::Awaited)),
            Seen::SendProbe
        );
        client.probe_sent();
        assert_eq!(client.on_reliable(0, b"world update 1"), Seen::Other);
        assert_eq!(client.on_reliable(1, b"on another channel"), Seen::Other);
        // The server says its answer is its second reliable message on channel 0.
        assert_eq!(
            client.on_unreliable(&answer(5, Status::Read(1))),
            Seen::Check
        );
        assert!(matches!(
            client.on_reliable(0, b"garbled answer!!"),
            Seen::Verdict(KeyCheck::Differ(_))
        ));
        // The same with the answer right: agreed, whatever its index.
        let mut client = ClientCheck::new(5, 6, true);
        assert_eq!(
            client.on_unreliable(&answer(5, Status::Awaited)),
            Seen::SendProbe
        );
        client.probe_sent();
        assert_eq!(client.on_reliable(0, b"world update 1"), Seen::Other);
        let right = reversed(&client.probe());
        assert_eq!(
            client.on_reliable(0, &right),
            Seen::Verdict(KeyCheck::Agreed)
        );
        // A statement about a message already seen judges it at once.
        let mut client = ClientCheck::new(5, 6, false);
        assert_eq!(
            client.on_unreliable(&answer(5, Status::Awaited)),
            Seen::SendProbe
        );
        client.probe_sent();
        assert_eq!(client.on_reliable(0, b"not the answer"), Seen::Other);
        assert!(matches!(
            client.on_unreliable(&answer(5, Status::Read(0))),
            Seen::Verdict(KeyCheck::Differ(_))
        ));
        // A plain echo server sends the hello back, the way it came or reliably.
        let mut client = ClientCheck::new(5, 6, false);
        let echoed = client.hello();
        assert!(matches!(
            client.on_unreliable(&echoed),
            Seen::Verdict(KeyCheck::Unchecked(_))
        ));
        assert!(matches!(
            client.on_reliable(0, &echoed),
            Seen::Verdict(KeyCheck::Unchecked(_))
        ));
    }

    /// One key check over a path that loses each unreliable datagram (hellos, answers, ticks)
    /// with probability `loss`, in steps of [`HELLO_EVERY`]; reliable messages always arrive,
    /// in order, through each side's cipher. A client that gives up on the hello sends its
    /// 16-byte workload message instead of the probe. Returns the client's verdict, the
    /// server's state, and, when the client gave up before its probe, whether the server
    /// echoed the workload.
    fn lossy_check(
        seed: u64,
        loss: f64,
        server_key: &[u8],
    ) -> (KeyCheck, ServerCheck, Option<bool>) {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        use soe_crypto::Rc4;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut lost = move || rng.random_bool(loss);
        let (mut c_send, mut c_recv) =
            (Rc4::new(b"the key").unwrap(), Rc4::new(b"the key").unwrap());
        let (mut s_recv, mut s_send) =
            (Rc4::new(server_key).unwrap(), Rc4::new(server_key).unwrap());
        let mut client = ClientCheck::new(seed, seed ^ 0x5eed, true);
        let mut server = ServerCheck::default();
        let hello_steps = (HELLO_WAIT.as_millis() / HELLO_EVERY.as_millis()) as u32;
        let (mut step, mut deadline) = (0u32, hello_steps);
        loop {
            if step == deadline {
                if client.is_probe_sent() {
                    return (KeyCheck::Unchecked("timeout".into()), server, None);
                }
                // Given up: the workload's first message goes, 16 bytes like a probe.
                let mut wire = b"0123456789abcdef".to_vec();
                c_send.apply(&mut wire);
                s_recv.apply(&mut wire);
                let echoed = server.on_first_reliable(&wire, 0).is_none();
                return (
                    KeyCheck::Unchecked("no answer".into()),
                    server,
                    Some(echoed),
                );
            }
            step += 1;
            // The server's tick, and the client's hello and its answer, each may be lost.
            if !lost() {
                assert_eq!(client.on_unreliable(b"\x01tick"), Seen::Other);
            }
            let Some(reply) = (!lost())
                .then(|| server.on_unreliable(&client.hello()))
                .flatten()
            else {
                continue;
            };
            if lost() {
                continue;
            }
            match client.on_unreliable(&reply.answer) {
                Seen::Verdict(v) => return (v, server, None),
                Seen::SendProbe => {
                    let mut wire = client.probe().to_vec();
                    client.probe_sent();
                    deadline = step + 12;
                    c_send.apply(&mut wire);
                    s_recv.apply(&mut wire);
                    let mut back = server.on_first_reliable(&wire, 0).unwrap_or(wire);
                    s_send.apply(&mut back);
                    c_recv.apply(&mut back);
                    if let Seen::Verdict(v) = client.on_reliable(0, &back) {
                        return (v, server, None);
                    }
                    // A reliable world update follows the answer.
                    let mut update = b"world update".to_vec();
                    s_send.apply(&mut update);
                    c_recv.apply(&mut update);
                    assert_eq!(client.on_reliable(0, &update), Seen::Other);
                }
                Seen::Check | Seen::Other => {}
            }
        }
    }

    /// Issue 35 §3.3, over many seeded lossy paths: no lost datagram ever turns into a
    /// verdict. Matching keys are never called different, on either side; different keys are
    /// never called matching; a client that got no answer sends its workload, which the server
    /// echoes without a verdict; and without loss every check comes to its verdict.
    #[test]
    fn no_lost_datagram_becomes_a_verdict() {
        for seed in 0..400u64 {
            for loss in [0.0, 0.3, 0.6, 0.9, 1.0] {
                for (server_key, agree) in [(&b"the key"[..], true), (b"another", false)] {
                    let (verdict, server, echoed) = lossy_check(seed, loss, server_key);
                    let context = format!("seed {seed}, loss {loss}, keys agree: {agree}");
                    match &verdict {
                        KeyCheck::Agreed => assert!(agree, "{context}"),
                        KeyCheck::Differ(_) => assert!(!agree, "{context}"),
                        KeyCheck::Unchecked(_) => assert!(loss > 0.0, "{context}"),
                    }
                    if agree {
                        assert_ne!(server, ServerCheck::Mismatch, "{context}");
                    }
                    if let Some(echoed) = echoed {
                        assert!(echoed, "{context}: the workload was answered, not echoed");
                        assert_ne!(server, ServerCheck::Mismatch, "{context}");
                    }
                }
            }
        }
    }
}
