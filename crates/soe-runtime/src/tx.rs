//! A batch of datagrams taken from the protocol endpoint and handed to the socket in as few
//! system calls as it allows. The driver keeps one; sends made from an application's thread
//! ([`Endpoint::send_batch`](crate::Endpoint::send_batch)) keep another.

use std::io;
use std::time::Instant;

use crate::runtime::{AsyncUdpSocket, Outgoing};

/// The most bytes one segmented send carries (a UDP datagram's limit, before splitting).
const GSO_MAX_BYTES: usize = 64_000;
/// The most entries (single datagrams or segmented runs) of one batch.
const MAX_BATCH_ENTRIES: usize = 32;
/// A batch stops taking datagrams once it holds this many bytes.
const MAX_BATCH_BYTES: usize = 256 * 1024;

/// The datagrams of one batch, back to back, and its entries; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct TxBatch {
    /// The datagram last taken from the endpoint.
    datagram: Vec<u8>,
    /// The batch's datagrams, back to back.
    bytes: Vec<u8>,
    /// Single datagrams, or runs of equal-size datagrams to one destination sent as one
    /// segmented send (GSO).
    entries: Vec<Outgoing>,
    /// How many entries went already; the rest wait for the socket.
    sent: usize,
}

/// What one [`TxBatch::send`] did.
#[derive(Debug)]
pub(crate) enum Sent {
    /// Datagrams went (this many).
    Some(usize),
    /// The socket takes nothing now; the batch keeps its datagrams.
    WouldBlock,
    /// The first waiting datagram (this many, when segmented) failed with this error and was
    /// dropped, as a lost datagram; the protocol resends what matters.
    Dropped(usize, Outgoing, io::Error),
}

impl TxBatch {
    /// Whether datagrams taken from the endpoint wait for the socket.
    pub(crate) fn has_pending(&self) -> bool {
        self.sent < self.entries.len()
    }

    /// Takes the next batch of at most `budget` datagrams from `proto`; returns how many it
    /// took (0: nothing to send). Consecutive datagrams of one size to one destination become
    /// one segmented entry where the socket takes up to `max_segments` (GSO), as when a message
    /// is split into fragments.
    pub(crate) fn fill(
        &mut self,
        proto: &mut soe_session::Endpoint,
        now: Instant,
        budget: usize,
        max_segments: usize,
    ) -> usize {
        self.bytes.clear();
        self.entries.clear();
        self.sent = 0;
        let mut taken = 0;
        while taken < budget
            && self.entries.len() < MAX_BATCH_ENTRIES
            && self.bytes.len() < MAX_BATCH_BYTES
        {
            let Some(t) = proto.poll_transmit(now, &mut self.datagram) else {
                break;
            };
            let datagram = self.datagram.get(..t.len).unwrap_or(&self.datagram);
            let offset = self.bytes.len();
            self.bytes.extend_from_slice(datagram);
            taken += 1;
            let joins = self.entries.last().is_some_and(|last| {
                max_segments > 1
                    && last.destination == t.destination
                    // Every datagram so far of full size, and this one no longer.
                    && last.len % last.segment_size.max(1) == 0
                    && t.len <= last.segment_size
                    && last.datagrams() < max_segments
                    && last.len + t.len <= GSO_MAX_BYTES
            });
            match self.entries.last_mut() {
                Some(last) if joins => last.len += t.len,
                _ => self.entries.push(Outgoing {
                    destination: t.destination,
                    offset,
                    len: t.len,
                    segment_size: t.len,
                }),
            }
        }
        taken
    }

    /// Hands the waiting datagrams to `socket`, once.
    pub(crate) fn send(&mut self, socket: &dyn AsyncUdpSocket) -> Sent {
        let pending = self.entries.get(self.sent..).unwrap_or_default();
        match socket.try_send_batch(&self.bytes, pending) {
            Ok(n) => {
                let n = n.clamp(1, pending.len().max(1));
                let datagrams = pending.iter().take(n).map(Outgoing::datagrams).sum();
                self.sent += n;
                Sent::Some(datagrams)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Sent::WouldBlock,
            Err(e) => {
                let dropped = pending.first().copied();
                self.sent += 1;
                match dropped {
                    Some(entry) => Sent::Dropped(entry.datagrams(), entry, e),
                    None => Sent::Some(0),
                }
            }
        }
    }
}
