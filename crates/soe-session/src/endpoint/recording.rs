//! The endpoint's side of the flight recorder ([`crate::recorder`]): the calls a host makes,
//! and the hooks the endpoint's own calls make.

use std::time::Instant;

use bytes::Bytes;
use soe_wire::Channel;

use super::{Endpoint, SessionHandle, handle};
use crate::recorder::{Recorded, RecorderStats, Recording};
use crate::{Delivery, Event, PeerAddress, SendError};

impl<A: PeerAddress> Endpoint<A> {
    /// Starts (`on`) or stops recording one session while it runs: the flight recorder
    /// ([`recorder`](crate::recorder)) keeps its last datagrams each way and its messages,
    /// within the budgets of [`EndpointConfig::with_recording`](crate::EndpointConfig::with_recording).
    /// Stopping forgets what was recorded. Returns `false` for an unknown handle, or when the
    /// endpoint's budget is under two chunks.
    pub fn set_recording(&mut self, h: SessionHandle, on: bool) -> bool {
        let Some(key) = self.key_of(h) else {
            return false;
        };
        if !on {
            self.recorder.stop(key, h.generation);
            return true;
        }
        // Any session exists because of a call that gave the recorder the time.
        let Some(now) = self.recorder.clock() else {
            return false;
        };
        self.recorder.start(key, h.generation, now)
    }

    /// Whether a session is being recorded.
    pub fn is_recording(&self, h: SessionHandle) -> bool {
        self.key_of(h)
            .is_some_and(|key| self.recorder.is_recording(key, h.generation))
    }

    /// Takes a session's recording: a live session's so far (it goes on recording, from
    /// empty), or the one kept when a recorded session ended abnormally
    /// ([`ends_abnormally`](crate::recorder::ends_abnormally)), until it is taken here or by
    /// [`poll_recording`](Self::poll_recording), or the budget needs its room. `None` when the
    /// session is not recorded (or its recording is gone).
    pub fn take_recording(&mut self, h: SessionHandle) -> Option<Recording<A>> {
        let live = self
            .sessions
            .get(h.index())
            .filter(|e| e.generation == h.generation)
            .map(|e| (&e.session, e.remote));
        self.recorder.take(h.index(), h.generation, live)
    }

    /// The next kept recording of a session that ended abnormally, oldest first, with the
    /// session's handle (see [`take_recording`](Self::take_recording)). A host that writes
    /// every such recording (`soe serve --record DIR`) polls this after its events.
    pub fn poll_recording(&mut self) -> Option<(SessionHandle, Recording<A>)> {
        let (key, generation, recording) = self.recorder.poll_ended()?;
        Some((handle(key, generation), recording))
    }

    /// The flight recorder's counters.
    pub fn recorder_stats(&self) -> RecorderStats {
        self.recorder.stats()
    }

    /// Hook: a datagram from session `key`'s peer was handled (`rejected`: its CRC failed).
    #[inline]
    pub(super) fn record_received(
        &mut self,
        key: usize,
        now: Instant,
        datagram: &[u8],
        rejected: bool,
    ) {
        if let Some(e) = self.sessions.get(key) {
            self.recorder
                .received(key, e.generation, now, datagram, rejected);
        }
    }

    /// Hook: session `key` of `generation` hands `event` to the application.
    pub(super) fn record_event(&mut self, key: usize, generation: u32, event: &Event) {
        if !self.recorder.is_recording(key, generation) {
            return;
        }
        let Some(e) = self.sessions.get(key) else {
            return;
        };
        match event {
            Event::Message {
                channel,
                data,
                kind,
            } => {
                let what = Recorded::Delivered {
                    channel: *channel,
                    kind: *kind,
                    encrypted: e.session.is_encrypting(),
                };
                self.recorder.message(key, generation, what, data);
            }
            Event::Closed { reason, by_peer } => {
                self.recorder
                    .closed(key, generation, &e.session, e.remote, *reason, *by_peer);
            }
            _ => {}
        }
    }

    /// Hook, before a send: a copy of `data` (a reference count) when session `key` is
    /// recorded.
    #[inline]
    pub(super) fn recorded_copy(&self, key: usize, data: &Bytes) -> Option<Bytes> {
        let generation = self.sessions.get(key)?.generation;
        self.recorder
            .is_recording(key, generation)
            .then(|| data.clone())
    }

    /// Hook, after a send: records the message queued, if it was (`copy` is
    /// [`Endpoint::recorded_copy`]'s: `None`, at once, when the session is not recorded).
    #[inline]
    pub(super) fn record_queued(
        &mut self,
        key: usize,
        copy: Option<Bytes>,
        sent: &Result<(), SendError>,
        channel: Channel,
        kind: Delivery,
    ) {
        if let Some(data) = copy {
            self.record_queued_copy(key, data, sent, channel, kind);
        }
    }

    fn record_queued_copy(
        &mut self,
        key: usize,
        data: Bytes,
        sent: &Result<(), SendError>,
        channel: Channel,
        kind: Delivery,
    ) {
        let (Ok(()), Some(e)) = (sent, self.sessions.get(key)) else {
            return;
        };
        let what = Recorded::Queued {
            channel,
            kind,
            encrypted: e.session.is_encrypting(),
        };
        self.recorder.message(key, e.generation, what, &data);
    }

    /// Hook: session `key` was just inserted (`established`: not half-open): with every session
    /// recorded, it is from now.
    pub(super) fn record_from_start(&mut self, key: usize, established: bool) {
        if let (true, Some(e)) = (established, self.sessions.get(key)) {
            self.recorder.start_every(key, e.generation);
        }
    }
}
