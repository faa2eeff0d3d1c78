//! The engine's side of LTP authentication ([`crate::auth`]): how much room a span's
//! authentication takes in every segment. Signing happens in `poll_transmit_vectored`,
//! verification in `handle_decoded`, before any session sees the segment.

use super::span::Span;
use super::MIN_SEGMENT_SIZE;

impl Span {
    /// Bytes authentication adds to every segment of this span (0 without keys).
    pub(crate) fn auth_overhead(&self) -> usize {
        self.cfg.auth.as_ref().map_or(0, |a| a.overhead())
    }

    /// The size data segments are planned to before authentication is added, so the
    /// authenticated segment still fits `max_segment_size`. Never below
    /// [`MIN_SEGMENT_SIZE`]: with a tiny segment size and a large RSA key the segments
    /// exceed `max_segment_size` rather than carry no data.
    pub(crate) fn data_segment_budget(&self) -> usize {
        match self.auth_overhead() {
            0 => self.cfg.max_segment_size,
            o => self
                .cfg
                .max_segment_size
                .saturating_sub(o)
                .max(MIN_SEGMENT_SIZE),
        }
    }
}
