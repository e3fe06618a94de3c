//! The backpressure buffer of one session: reliable writes that met a full send queue, and the
//! RC4 switches that came after them, kept in order until the session has room (as
//! `stream.write` keeps what it cannot pass on yet).
//!
//! The JS thread queues into it (from `sendBatch` and `setEncryption`); the pump thread empties
//! it after each turn of the event loop, which is when room can appear (acks arrive, the window
//! moves). Both hold the endpoint's session table while they touch it, so it needs no lock of
//! its own.

use std::collections::VecDeque;

use soe_runtime::bytes::Bytes;
use soe_runtime::{Channel, Connection, SendBatch, TrySendError};

/// What waits for room, in the order the application asked for it.
enum Item {
    /// A reliable message.
    Message(Channel, Bytes),
    /// An RC4 switch, which must fall between the messages sent before it and after it.
    Encryption(bool),
}

/// A session's writes that wait for room, in order.
#[derive(Default)]
pub(crate) struct Pending {
    queue: VecDeque<Item>,
    /// Messages in `queue` (it also holds RC4 switches), and their bytes.
    messages: usize,
    bytes: usize,
    /// Counts the times the queue went from empty to in use: a `drain` names the one it ends,
    /// so that JS can tell a late `drain` of an earlier one from the one it waits for.
    epoch: u32,
}

/// What [`Pending::flush`] left.
pub(crate) enum Flushed {
    /// Everything went into the session: its `drain` is due.
    Empty,
    /// Some still waits for room; `moved`: some went into the session first.
    Waiting { moved: bool },
    /// The session refused (it is closing): what waited was dropped, and its `disconnect`
    /// follows.
    Failed,
}

impl Pending {
    /// Whether anything waits (then later writes and switches queue behind it).
    pub(crate) fn in_use(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Messages waiting, and their bytes.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.messages, self.bytes)
    }

    /// The current epoch (see [`Pending::epoch`]).
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Queues a message behind the others; returns whether the queue was empty (a new epoch
    /// began, and the pump must be told to flush this session).
    pub(crate) fn push_message(&mut self, channel: Channel, data: Bytes) -> bool {
        let started = self.queue.is_empty();
        if started {
            self.epoch = self.epoch.wrapping_add(1);
        }
        self.messages += 1;
        self.bytes += data.len();
        self.queue.push_back(Item::Message(channel, data));
        started
    }

    /// Queues an RC4 switch behind the messages that wait (only while some do).
    pub(crate) fn push_encryption(&mut self, on: bool) {
        debug_assert!(self.in_use());
        self.queue.push_back(Item::Encryption(on));
    }

    /// Passes on to the session, through `batch`, what it has room for, in order.
    pub(crate) fn flush(&mut self, batch: &mut SendBatch<'_>, conn: &Connection) -> Flushed {
        let before = self.queue.len();
        while let Some(item) = self.queue.pop_front() {
            match item {
                Item::Encryption(on) => {
                    batch.set_encryption(conn, on);
                }
                // Only what the session has room for: a refused send would wake the loop for
                // another turn at once, and the pump would spin without reading the acks that
                // make room.
                Item::Message(channel, data) if batch.send_capacity(conn, channel) == 0 => {
                    self.queue.push_front(Item::Message(channel, data));
                    return Flushed::Waiting {
                        moved: self.queue.len() < before,
                    };
                }
                Item::Message(channel, data) => {
                    let len = data.len();
                    match batch.try_send_on(conn, channel, data) {
                        Ok(()) => {
                            self.messages -= 1;
                            self.bytes -= len;
                        }
                        Err(TrySendError::Full(data)) => {
                            self.queue.push_front(Item::Message(channel, data));
                            return Flushed::Waiting {
                                moved: self.queue.len() < before,
                            };
                        }
                        Err(_) => {
                            self.queue.clear();
                            self.messages = 0;
                            self.bytes = 0;
                            return Flushed::Failed;
                        }
                    }
                }
            }
        }
        Flushed::Empty
    }
}
