//! The reassembly buffer of one incoming bundle, shared by both TCPCL versions.
//!
//! `buf[..filled]` holds the data received so far. `buf[filled..]` is zero-filled room: what a
//! session's `payload_buf` handed out for the driver to read into, never past the current
//! segment; it is kept (not re-zeroed) when a read returns less than offered. The capacity
//! behind it is reserved once for the whole announced transfer, not initialised. Data passed through `handle_input` overwrites that room first, so the buffer always
//! holds exactly the stream's data octets in order.
//!
//! `payload_buf_uninit` hands out the buffer's spare capacity instead (no zero-fill): the
//! zeroed room is then dropped first (`buf.len() == filled`), and the driver's read is
//! claimed with [`Reassembly::filled_uninit`].
//!
//! With a checksum (`SessionConfig::checksum_received_from`) the CRC-32C of the data is updated
//! with every piece as it lands, while those octets are still in the CPU's cache, instead of
//! in a separate pass over the whole bundle once it is complete.
//!
//! With a pool (`SessionConfig::recycle_buffers`) the buffer is taken from it and the finished
//! bundle's storage goes back to it when dropped ([`crate::pool`]). A recycled buffer comes
//! with length 0: its old octets lie in the spare capacity, which is treated as uninitialised
//! here as for any fresh buffer (zero-filled before `room` hands it out, overwritten by the
//! read that claims it after `room_uninit`), so they never become data.

use std::mem::MaybeUninit;

use bytes::Bytes;

use crate::pool::BufferPool;

/// Data of one bundle being received.
#[derive(Debug, Default)]
pub(crate) struct Reassembly {
    buf: Vec<u8>,
    filled: usize,
    /// CRC-32C of `buf[..filled]`, when asked for.
    crc: Option<u32>,
    /// Where `buf` came from and goes back to, once the bundle is dropped.
    pool: Option<BufferPool>,
}

impl Reassembly {
    /// An empty buffer with `capacity` octets reserved, not initialised (the caller bounds it
    /// by its limits). The driver reads into it with `payload_buf_uninit`; the safe
    /// `payload_buf` zero-fills only the room it hands out. (Allocating it zeroed cost a
    /// `memset` of every transfer of 1 MB — recycled heap memory, which `calloc` clears — 12 %
    /// of the receiving session thread.)
    ///
    /// `checksum`: keep the CRC-32C of the data as it arrives ([`Reassembly::finish`]).
    /// `pool`: take the buffer from it (and give the bundle's storage back to it).
    pub(crate) fn with_capacity(
        capacity: usize,
        checksum: bool,
        pool: Option<&BufferPool>,
    ) -> Self {
        Reassembly {
            buf: pool.map_or_else(|| Vec::with_capacity(capacity), |p| p.take(capacity)),
            filled: 0,
            crc: checksum.then_some(0),
            pool: pool.cloned(),
        }
    }

    /// Extends the checksum over `buf[from..self.filled]`.
    fn checksum_from(&mut self, from: usize) {
        if let (Some(crc), Some(new)) = (self.crc.as_mut(), self.buf.get(from..self.filled)) {
            *crc = crc32c::crc32c_append(*crc, new);
        }
    }

    /// The data received so far (without the room handed out after it).
    pub(crate) fn data(&self) -> &[u8] {
        self.buf.get(..self.filled).unwrap_or_default()
    }

    /// Appends a piece of segment data.
    pub(crate) fn push(&mut self, d: &[u8]) {
        if let Some(crc) = self.crc.as_mut() {
            *crc = crc32c::crc32c_append(*crc, d);
        }
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
        let from = self.filled;
        self.filled = self.filled.saturating_add(n).min(self.buf.len());
        self.checksum_from(from);
    }

    /// Up to `want` octets of uninitialised room right after the data received so far (any
    /// zeroed room left by [`Reassembly::room`] is given up first, so that the room starts
    /// right after the data).
    pub(crate) fn room_uninit(&mut self, want: usize) -> Option<&mut [MaybeUninit<u8>]> {
        self.buf.truncate(self.filled);
        // Reserved at the segment's start (bounded by the hard limits): no reallocation.
        self.buf.reserve(want);
        self.buf.spare_capacity_mut().get_mut(..want)
    }

    /// The driver stored `n` octets at the start of the room from [`Reassembly::room_uninit`].
    ///
    /// # Safety
    ///
    /// `n` is at most the length of that room, nothing else touched the buffer since it was
    /// handed out, and its first `n` octets were initialised.
    pub(crate) unsafe fn filled_uninit(&mut self, n: usize) {
        let from = self.filled;
        let end = from.saturating_add(n).min(self.buf.capacity());
        // SAFETY: `buf.len() == filled` since `room_uninit` (nothing touched it since, per the
        // caller's contract), and the caller initialised `buf[filled..filled + n]`, which lies
        // within the capacity (clamped above all the same).
        unsafe { self.buf.set_len(end) };
        self.filled = end;
        self.checksum_from(from);
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

    /// The data received, without the unused room, and its CRC-32C if it was kept.
    pub(crate) fn finish(mut self) -> (Bytes, Option<u32>) {
        self.buf.truncate(self.filled);
        let bytes = match &self.pool {
            Some(pool) => pool.bytes(std::mem::take(&mut self.buf)),
            None => Bytes::from(std::mem::take(&mut self.buf)),
        };
        (bytes, self.crc)
    }
}
