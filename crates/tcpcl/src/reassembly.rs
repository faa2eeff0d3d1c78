//! The reassembly buffer of one incoming bundle, shared by both TCPCL versions.
//!
//! `buf[..filled]` holds the data received so far. `buf[filled..]` is zero-filled room: the
//! whole announced transfer when it was reserved up front, else grown to what a session's
//! `payload_buf` handed out (or is about to) for the driver to read into, never past the current
//! segment; it is kept (not re-zeroed) when a read returns less than offered. Data passed through `handle_input` overwrites that room first, so the buffer always
//! holds exactly the stream's data octets in order.

use bytes::{Bytes, BytesMut};

use crate::error::SessionError;

/// Data of one bundle being received.
#[derive(Debug, Default)]
pub(crate) struct Reassembly {
    buf: BytesMut,
    filled: usize,
}

impl Reassembly {
    /// An empty buffer with `capacity` octets of zeroed room (the caller bounds it by its
    /// limits). Zeroed in one allocation: a large one comes from fresh pages that the kernel
    /// zeroes anyway and the allocator does not clear again, where growing the room read by read
    /// wrote every octet once more (a `memset` pass over each 50 MB transfer, 16-22 % of the
    /// receiving session thread).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Reassembly {
            buf: BytesMut::zeroed(capacity),
            filled: 0,
        }
    }

    /// Appends a piece of segment data.
    pub(crate) fn push(&mut self, d: &[u8]) {
        // Overwrite the zeroed room first (left by a direct read that came up short).
        let room = self.buf.get_mut(self.filled..).unwrap_or_default();
        let k = room.len().min(d.len());
        let (head, tail) = d.split_at(k);
        if let Some(dst) = room.get_mut(..k) {
            dst.copy_from_slice(head);
        }
        self.buf.extend_from_slice(tail);
        self.filled += d.len();
    }

    /// Up to `want` octets of zeroed room right after the data received so far.
    pub(crate) fn room(&mut self, want: usize) -> Option<&mut [u8]> {
        let end = self.filled.checked_add(want)?;
        if self.buf.len() < end {
            // Reserved at the segment's start (bounded by the hard limits): no reallocation.
            self.buf.resize(end, 0);
        }
        self.buf.get_mut(self.filled..end)
    }

    /// The driver stored `n` octets in the room from [`Reassembly::room`].
    pub(crate) fn filled(&mut self, n: usize) {
        self.filled = self.filled.saturating_add(n).min(self.buf.len());
    }

    /// Makes room for `segment_len` more data octets in one allocation (a no-op when the
    /// whole bundle was reserved up front).
    pub(crate) fn reserve_segment(&mut self, segment_len: u64) {
        let need = usize::try_from(segment_len)
            .unwrap_or(0)
            .saturating_add(self.filled)
            .saturating_sub(self.buf.len());
        self.buf.reserve(need);
    }

    /// The data received, without the unused room.
    pub(crate) fn finish(mut self) -> Bytes {
        self.buf.truncate(self.filled);
        self.buf.freeze()
    }
}

/// The slice `payload_buf` last handed out, which `payload_filled` may claim (both versions).
#[derive(Debug, Default)]
pub(crate) struct Offer(usize);

impl Offer {
    /// Forgets the slice (other input may overwrite it).
    pub(crate) fn clear(&mut self) {
        self.0 = 0;
    }

    /// Offers at most `max` octets of `room` (the reassembly buffer after the data received),
    /// never past the `remaining` data of the current segment; remembers how much.
    pub(crate) fn offer<'a>(
        &mut self,
        remaining: Option<u64>,
        max: usize,
        room: impl FnOnce(usize) -> Option<&'a mut [u8]>,
    ) -> Option<&'a mut [u8]> {
        self.0 = 0;
        let remaining = remaining.filter(|r| *r > 0 && max > 0)?;
        let want = usize::try_from(remaining).map_or(max, |r| r.min(max));
        let room = room(want)?;
        self.0 = room.len();
        Some(room)
    }

    /// Claims `n > 0` octets of the last offer; `skip` accounts for them in the stream decoder.
    /// More than was offered is a driver bug: the error is fatal to the session.
    pub(crate) fn claim(
        &mut self,
        n: usize,
        skip: impl FnOnce(u64) -> bool,
    ) -> Result<(), SessionError> {
        let offered = std::mem::take(&mut self.0);
        if n > offered || !skip(n as u64) {
            return Err(SessionError::PayloadOverrun { filled: n, offered });
        }
        Ok(())
    }
}
