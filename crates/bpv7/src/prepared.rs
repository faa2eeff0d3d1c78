//! A payload block encoded before the rest of its bundle, by another thread.
//!
//! Encoding a bundle copies its payload and computes the payload block's CRC: the two passes
//! over every byte of the bundle. Neither depends on the primary block (the creation timestamp,
//! the lifetime) or on the extension blocks, so the thread that received the payload (a node's
//! application connection) can do both with [`PreparedPayload::encode`], into a buffer that
//! keeps room in front. The thread that decides the bundle's identity and headers (the agent)
//! then writes only those in front of it with [`crate::Bundle::encode_around`] — no payload
//! byte is touched again — and gets the same bytes [`crate::Bundle::encode`] would give.

use bytes::{BufMut, Bytes, BytesMut};

use crate::block::CanonicalBlock;
use crate::cbor;
use crate::crc::CrcType;
use crate::flags::BlockFlags;

/// Room kept in front of a [`PreparedPayload`] for the bundle's head (the CBOR array start,
/// the primary block and the extension blocks) unless the caller asks for more: a primary
/// block with two long `dtn:` endpoints, a report-to, a hop-count and a previous-node block
/// fits with room to spare.
pub const HEAD_ROOM: usize = 1024;

/// A payload block (and the bundle's closing break) encoded with room in front for the rest
/// of the bundle (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedPayload {
    /// `room` bytes of head room, the encoded payload block, the CBOR break.
    buf: BytesMut,
    room: usize,
    flags: BlockFlags,
    crc_type: CrcType,
    /// The payload it was encoded from (shared, not copied): a bundle's payload block matches
    /// only if it still holds these very bytes.
    source: Bytes,
}

impl PreparedPayload {
    /// Encodes the payload block (number 1) of `payload` with `flags` and `crc_type`, leaving
    /// `room` bytes in front (one copy of the payload and its CRC: the work a bundle's encoding
    /// costs per byte).
    pub fn encode(
        flags: BlockFlags,
        crc_type: CrcType,
        payload: Bytes,
        room: usize,
    ) -> PreparedPayload {
        let block = CanonicalBlock::payload(flags, crc_type, payload.clone());
        let mut buf = BytesMut::with_capacity(room + block.encoded_len() + 1);
        buf.put_bytes(0, room);
        block.encode_into(&mut buf);
        buf.put_u8(cbor::BREAK);
        PreparedPayload {
            buf,
            room,
            flags,
            crc_type,
            source: payload,
        }
    }

    /// Length of the payload (the application data unit).
    pub fn payload_len(&self) -> usize {
        self.source.len()
    }

    /// The payload it encodes (the same shared bytes it was given).
    pub fn payload(&self) -> &Bytes {
        &self.source
    }

    /// Bytes of the encoded payload block and break (what follows the head).
    pub fn tail_len(&self) -> usize {
        self.buf.len() - self.room
    }

    /// The encoded payload block and break: the bundle's last [`Self::tail_len`] bytes, as
    /// [`crate::Bundle::encode_around`] will return them.
    pub fn tail(&self) -> &[u8] {
        &self.buf[self.room..]
    }

    /// Room in front of [`Self::tail`] for the bundle's head.
    pub fn room(&self) -> usize {
        self.room
    }

    /// Whether `block` is the payload block this encodes: number 1, the same flags and CRC
    /// type, and data that are the very bytes it was encoded from (the same shared buffer, not
    /// merely equal content: a block whose data were replaced, e.g. encrypted in place of the
    /// same length, does not match).
    pub fn matches(&self, block: &CanonicalBlock) -> bool {
        let data = block.data();
        block.block_type() == crate::block::BLOCK_TYPE_PAYLOAD
            && block.number() == crate::block::PAYLOAD_BLOCK_NUMBER
            && block.flags() == self.flags
            && block.crc_type() == self.crc_type
            && data.len() == self.source.len()
            && data.as_ptr() == self.source.as_ptr()
    }

    /// Writes `head` in front of the encoded payload block: the whole bundle, or the prepared
    /// payload back when the head does not fit the room.
    pub(crate) fn complete(mut self, head: &[u8]) -> Result<Bytes, PreparedPayload> {
        let Some(start) = self.room.checked_sub(head.len()) else {
            return Err(self);
        };
        self.buf[start..self.room].copy_from_slice(head);
        Ok(self.buf.freeze().slice(start..))
    }
}
