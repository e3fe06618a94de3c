//! A chunked byte arena: small buffers (encrypted messages, Groups, stored packets) are cut from
//! shared chunks, so they cost no allocation each. A chunk is freed when the last `Bytes` cut from
//! it is dropped.
//!
//! Chunks start small and grow only while the bytes cut from them are still alive when the next
//! chunk is needed: a session that sends or receives a few small messages between acks keeps a
//! chunk of [`FIRST_CHUNK`] and reuses it in place, where a fixed [`ARENA_CHUNK`] cost every
//! echoing session 16 KiB; a busy one reaches [`ARENA_CHUNK`] after a few chunks and amortizes
//! its allocations as before.

use std::ops::{Deref, DerefMut};

use bytes::BytesMut;

/// The largest chunk an arena allocates at a time.
pub(crate) const ARENA_CHUNK: usize = 16 * 1024;

/// The first chunk an arena allocates.
pub(crate) const FIRST_CHUNK: usize = 1024;

/// A byte arena: the buffer being cut from, and the size of its next chunk.
#[derive(Debug)]
pub(crate) struct Arena {
    buf: BytesMut,
    /// The size of the next chunk allocated (doubles up to [`ARENA_CHUNK`]).
    chunk: usize,
}

impl Arena {
    /// An empty arena: its first chunk is allocated when first needed.
    pub(crate) fn new() -> Self {
        Self {
            buf: BytesMut::new(),
            chunk: FIRST_CHUNK,
        }
    }
}

impl Deref for Arena {
    type Target = BytesMut;
    fn deref(&self) -> &BytesMut {
        &self.buf
    }
}

impl DerefMut for Arena {
    fn deref_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }
}

/// Makes room for `len` more bytes: in the current chunk, else in the same allocation once
/// nothing cut from it is alive, else in a new chunk (larger than the last one, up to
/// [`ARENA_CHUNK`], since the last one was still in use).
#[inline]
pub(crate) fn reserve(arena: &mut Arena, len: usize) {
    if arena.buf.capacity() - arena.buf.len() >= len {
        return;
    }
    if arena.buf.try_reclaim(len) {
        return;
    }
    reserve_chunk(arena, len);
}

#[cold]
fn reserve_chunk(arena: &mut Arena, len: usize) {
    let chunk = arena.chunk;
    arena.chunk = (chunk * 2).min(ARENA_CHUNK);
    arena.buf.reserve(len.max(chunk));
}

/// Copies `data` into the arena and cuts it off as `Bytes`.
#[inline]
pub(crate) fn copy_to_arena(arena: &mut Arena, data: &[u8]) -> bytes::Bytes {
    reserve(arena, data.len());
    arena.buf.extend_from_slice(data);
    arena.buf.split().freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_reused_once_free_and_grows_only_while_in_use() {
        let mut a = Arena::new();
        let message = [7u8; 100];
        // One message alive at a time (an echo acknowledged before the next): one small chunk,
        // reused in place.
        let first = copy_to_arena(&mut a, &message);
        let base = first.as_ptr() as usize;
        drop(first);
        for _ in 0..100 {
            let m = copy_to_arena(&mut a, &message);
            assert_eq!(&m[..], &message[..]);
            drop(m);
        }
        // Only the first chunk was ever allocated.
        assert_eq!(a.chunk, 2 * FIRST_CHUNK);
        let again = copy_to_arena(&mut a, &message);
        let at = again.as_ptr() as usize;
        assert!(
            (base..base + FIRST_CHUNK).contains(&at),
            "cut from the first chunk"
        );
        drop(again);
        // Many alive at once: the chunks grow, up to the cap.
        let held: Vec<_> = (0..1_000)
            .map(|_| copy_to_arena(&mut a, &message))
            .collect();
        assert!(held.iter().all(|m| m[..] == message[..]));
        assert_eq!(a.chunk, ARENA_CHUNK);
        assert!(a.capacity() <= ARENA_CHUNK);
        // A message larger than any chunk gets a chunk of its own size.
        let big = copy_to_arena(&mut a, &[1u8; 3 * ARENA_CHUNK]);
        assert_eq!(big.len(), 3 * ARENA_CHUNK);
    }
}
