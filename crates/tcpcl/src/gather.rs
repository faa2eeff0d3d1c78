//! Assembly of the vectored output of one `poll_transmit_vectored` call (both versions).

use bytes::{Bytes, BytesMut};

use crate::error::EncodeError;
use crate::msg::SegmentHeader;

/// Capacity reserved at a time for staged octets: dozens of headers and control messages
/// share one allocation.
const STAGING_BLOCK: usize = 4096;

/// Collects the output as a list of [`Bytes`]: the small octets (control messages, segment
/// headers) are staged in a reusable [`BytesMut`] and split off as one `Bytes` just before the
/// next payload slice, so a run of control messages and the following segment header become
/// a single entry, and payload is never copied.
#[derive(Debug, Default)]
pub(crate) struct Gather {
    staging: BytesMut,
    /// Encoding scratch: the message encoders write to a `Vec<u8>`.
    scratch: Vec<u8>,
    /// Octets appended since the last `finish`.
    appended: usize,
}

impl Gather {
    /// Stages already encoded small octets.
    pub(crate) fn small(&mut self, octets: &[u8]) {
        if octets.is_empty() {
            return;
        }
        if self.staging.capacity() - self.staging.len() < octets.len() {
            // Split-off parts still alive keep the old block; start a new one.
            self.staging.reserve(octets.len().max(STAGING_BLOCK));
        }
        self.staging.extend_from_slice(octets);
        self.appended += octets.len();
    }

    /// Stages a TCPCLv4 segment header.
    pub(crate) fn header(&mut self, h: &SegmentHeader) -> Result<(), EncodeError> {
        self.encoded(|out| h.encode(out))
    }

    /// Stages what an infallible encoder appends.
    pub(crate) fn staged(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        let _ = self.encoded::<std::convert::Infallible>(|out| {
            encode(out);
            Ok(())
        });
    }

    /// Stages whatever `encode` appends to its (reused) scratch buffer, if it succeeds.
    pub(crate) fn encoded<E>(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let r = encode(&mut scratch);
        if r.is_ok() {
            self.small(&scratch);
        }
        self.scratch = scratch;
        r
    }

    /// Appends the staged octets, then `data` (zero-copy).
    pub(crate) fn payload(&mut self, out: &mut Vec<Bytes>, data: Bytes) {
        self.flush(out);
        self.appended += data.len();
        out.push(data);
    }

    /// Appends what is staged; returns the octets appended since the last call.
    pub(crate) fn finish(&mut self, out: &mut Vec<Bytes>) -> usize {
        self.flush(out);
        std::mem::take(&mut self.appended)
    }

    fn flush(&mut self, out: &mut Vec<Bytes>) {
        if !self.staging.is_empty() {
            out.push(self.staging.split().freeze());
        }
    }
}
