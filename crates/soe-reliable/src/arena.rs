//! A chunked byte arena: small buffers (encrypted messages, Groups, stored packets) are cut from
//! shared chunks, so they cost no allocation each. A chunk is freed when the last `Bytes` cut from
//! it is dropped.

use bytes::{Bytes, BytesMut};

/// Bytes an arena allocates at a time.
pub(crate) const ARENA_CHUNK: usize = 16 * 1024;

/// Makes room for `len` more bytes, a chunk at a time.
pub(crate) fn reserve(arena: &mut BytesMut, len: usize) {
    if arena.capacity() - arena.len() < len {
        arena.reserve(len.max(ARENA_CHUNK));
    }
}

/// Copies `data` into the arena and cuts it off as `Bytes`.
#[inline]
pub(crate) fn copy_to_arena(arena: &mut BytesMut, data: &[u8]) -> Bytes {
    reserve(arena, data.len());
    arena.extend_from_slice(data);
    arena.split().freeze()
}
