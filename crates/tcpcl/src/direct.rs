//! Direct reads into the reassembly buffer, written once for both TCPCL versions: the work
//! behind `payload_buf`, `payload_buf_uninit`, `payload_filled` and `payload_filled_uninit`
//! of [`crate::Session`] and [`crate::v3::Session`].
//!
//! A session lends the parts this path works on ([`Parts`]: the last offer, the framer's
//! data counters, the reassembly buffer of the segment being received, the statistics and
//! clocks) through [`DirectReceive`]; what differs between the versions (when the session
//! counts as closed, how a fatal error closes it, how a completed segment is ended) stays
//! with the session.

use std::mem::MaybeUninit;
use std::time::Duration;

use crate::error::SessionError;
use crate::framing::Framer;
use crate::reassembly::Reassembly;
use crate::stats::SessionStats;

/// The parts of a session the direct-read path works on, borrowed apart.
pub(crate) struct Parts<'a> {
    /// Data may be offered: the session is established.
    pub(crate) established: bool,
    pub(crate) offer: &'a mut Offer,
    pub(crate) framer: &'a mut Framer,
    /// The reassembly buffer of the transfer whose current segment is being buffered; `None`
    /// between segments and while a refused transfer's data is skipped.
    pub(crate) buffer: Option<&'a mut Reassembly>,
    pub(crate) stats: &'a mut SessionStats,
    /// Latest time passed in by the driver.
    pub(crate) latest: &'a mut Duration,
    pub(crate) last_received: &'a mut Duration,
}

/// A session (either version) that receives segment data by direct reads.
pub(crate) trait DirectReceive {
    /// The parts of [`Parts`], borrowed for one call.
    fn direct_parts(&mut self) -> Parts<'_>;

    /// The error of a call made after the session closed, if it has.
    fn direct_closed(&self) -> Option<SessionError>;

    /// Maps a fatal error to its wire consequence and closes (as after `handle_input`).
    fn direct_fail(&mut self, now: Duration, e: &SessionError);

    /// Goes on decoding with no more input: a segment whose data the last claim completed
    /// ends here, as `handle_input` ends it right after its data.
    fn direct_advance(&mut self, now: Duration) -> Result<(), SessionError>;
}

/// Implements [`DirectReceive`] and the public direct-read methods (`payload_buf`,
/// `payload_filled`, `payload_buf_uninit`, `payload_filled_uninit`, with their documentation
/// and safety contract) for a session type of either version: both keep the same fields
/// (`phase`, `offer`, `decoder`, `inc`, `stats`, `latest`, `last_received`) and methods
/// (`close_reason`, `fail`, `consume`), each of their own version.
macro_rules! direct_receive {
    ($session:ty) => {
        impl $crate::direct::DirectReceive for $session {
            fn direct_parts(&mut self) -> $crate::direct::Parts<'_> {
                $crate::direct::Parts {
                    established: self.phase == Phase::Established,
                    offer: &mut self.offer,
                    framer: self.decoder.framer_mut(),
                    buffer: self.inc.buffer(),
                    stats: &mut self.stats,
                    latest: &mut self.latest,
                    last_received: &mut self.last_received,
                }
            }

            fn direct_closed(&self) -> Option<$crate::error::SessionError> {
                (self.phase == Phase::Closed)
                    .then(|| $crate::error::SessionError::Closed(self.close_reason()))
            }

            fn direct_fail(&mut self, now: std::time::Duration, e: &$crate::error::SessionError) {
                self.fail(now, e);
            }

            fn direct_advance(
                &mut self,
                now: std::time::Duration,
            ) -> Result<(), $crate::error::SessionError> {
                self.consume(now, &mut &[][..])
            }
        }

        impl $session {
            /// Room to read the current segment's data into directly, instead of reading into a
            /// buffer of the driver's and passing it to [`Session::handle_input`], which copies the
            /// data a second time into the transfer's reassembly buffer.
            ///
            /// Offered only while the decoder is inside the data of a segment whose transfer is
            /// being reassembled; `None` otherwise (between messages, while a refused transfer's
            /// data is skipped, before establishment, after the end): the driver then reads as
            /// usual. The slice is the part of the reassembly buffer right after the data received
            /// so far, at most `max` octets and never past the current segment, so whatever the
            /// driver stores there is exactly the next octets of the stream. It is never empty (a
            /// zero-length read would look like end-of-stream); `max == 0` gives `None`.
            ///
            /// The driver reads into it (one `read(2)`), then reports the octet count with
            /// [`Session::payload_filled`]. The slice is initialised memory (zero-filled the first
            /// time it is offered, reused if a read comes up short), so no `unsafe` is needed
            /// anywhere: the zeroing touches the same cache lines the kernel writes right after,
            /// and costs far less than copying the data out of a separate read buffer.
            pub fn payload_buf(&mut self, max: usize) -> Option<&mut [u8]> {
                $crate::direct::payload_buf(self, max)
            }

            /// Reports that the driver stored the next `n` octets of the stream at the start of the
            /// slice from the last [`Session::payload_buf`]. The session advances exactly as
            /// [`Session::handle_input`] would have for the same octets: statistics, timers,
            /// acknowledgment of a completed segment, `BundleReceived` of a completed transfer.
            ///
            /// `n == 0` does nothing. Any other call to `handle_input` in between invalidates the
            /// slice; reporting more than was offered is a driver bug and fails with
            /// [`SessionError::PayloadOverrun`]. Errors are fatal, as for `handle_input`.
            pub fn payload_filled(
                &mut self,
                now: std::time::Duration,
                n: usize,
            ) -> Result<(), $crate::error::SessionError> {
                // SAFETY: a zero-filled offer assumes nothing about the octets.
                unsafe { $crate::direct::payload_filled(self, now, n, false) }
            }

            /// [`Session::payload_buf`] without the zero-fill: the reassembly buffer's spare capacity,
            /// for a driver that reads with a system call that writes the slice (`read(2)` into its
            /// pointer) and then claims the octets with [`Session::payload_filled_uninit`]. Offered
            /// under the same conditions and bounds as `payload_buf`.
            pub fn payload_buf_uninit(
                &mut self,
                max: usize,
            ) -> Option<&mut [std::mem::MaybeUninit<u8>]> {
                $crate::direct::payload_buf_uninit(self, max)
            }

            /// [`Session::payload_filled`] for the slice of [`Session::payload_buf_uninit`].
            ///
            /// # Safety
            ///
            /// The first `n` octets of the slice the last `payload_buf_uninit` returned were
            /// initialised (written by the read), and no other method of the session was called in
            /// between. Claiming more than was offered, or after a `payload_buf` offer, is checked
            /// and fails with [`SessionError::PayloadOverrun`] as for `payload_filled`.
            pub unsafe fn payload_filled_uninit(
                &mut self,
                now: std::time::Duration,
                n: usize,
            ) -> Result<(), $crate::error::SessionError> {
                // SAFETY: the caller's contract above.
                unsafe { $crate::direct::payload_filled(self, now, n, true) }
            }
        }
    };
}
pub(crate) use direct_receive;

/// The framer's remaining segment data, the offer and the buffer to offer room of, once the
/// session is established (before, and after the end, the last offer is forgotten).
fn offering<S: DirectReceive>(
    s: &mut S,
) -> Option<(Option<u64>, &mut Offer, Option<&mut Reassembly>)> {
    let p = s.direct_parts();
    if !p.established {
        p.offer.clear();
        return None;
    }
    Some((p.framer.data_remaining(), p.offer, p.buffer))
}

/// `payload_buf`: up to `max` octets of zero-filled room in the reassembly buffer, never past
/// the current segment, while its data is being buffered.
pub(crate) fn payload_buf<S: DirectReceive>(s: &mut S, max: usize) -> Option<&mut [u8]> {
    let (remaining, offer, buffer) = offering(s)?;
    offer.offer(remaining, max, false, |want| buffer?.room(want))
}

/// `payload_buf_uninit`: as [`payload_buf`], the buffer's spare capacity without zero-fill.
pub(crate) fn payload_buf_uninit<S: DirectReceive>(
    s: &mut S,
    max: usize,
) -> Option<&mut [MaybeUninit<u8>]> {
    let (remaining, offer, buffer) = offering(s)?;
    offer.offer(remaining, max, true, |want| buffer?.room_uninit(want))
}

/// `payload_filled` (`uninit == false`) and `payload_filled_uninit` (`uninit == true`):
/// claims `n` octets of the last offer, which must be of that kind, and advances the session
/// as `handle_input` would have for the same octets.
///
/// # Safety
///
/// With `uninit`: the first `n` octets of the slice the last `payload_buf_uninit` returned
/// were initialised, and no other method of the session was called in between (the
/// contract of `payload_filled_uninit`, documented on both sessions). Without it nothing is
/// assumed about the octets (the offer was zero-filled).
pub(crate) unsafe fn payload_filled<S: DirectReceive>(
    s: &mut S,
    now: Duration,
    n: usize,
    uninit: bool,
) -> Result<(), SessionError> {
    if let Some(e) = s.direct_closed() {
        return Err(e);
    }
    let p = s.direct_parts();
    *p.latest = (*p.latest).max(now);
    if n == 0 {
        p.offer.clear();
        return Ok(());
    }
    let framer = p.framer;
    if let Err(e) = p.offer.claim(n, uninit, |k| framer.skip_data(k)) {
        s.direct_fail(now, &e);
        return Err(e);
    }
    p.stats.bytes_received += n as u64;
    *p.last_received = now;
    if let Some(buffer) = p.buffer {
        if uninit {
            // SAFETY: the claim checked n against the room handed out; the caller initialised
            // it and touched nothing else in between.
            unsafe { buffer.filled_uninit(n) };
        } else {
            buffer.filled(n);
        }
    }
    let result = s.direct_advance(now);
    if let Err(e) = &result {
        s.direct_fail(now, e);
    }
    result
}

/// The slice `payload_buf` (or `payload_buf_uninit`: `.1`) last handed out, which
/// `payload_filled` (`payload_filled_uninit`) may claim (both versions).
#[derive(Debug, Default)]
pub(crate) struct Offer(usize, bool);

impl Offer {
    /// Forgets the slice (other input may overwrite it).
    pub(crate) fn clear(&mut self) {
        self.0 = 0;
    }

    /// Offers at most `max` octets of `room` (the reassembly buffer after the data received:
    /// zero-filled, or its spare capacity if `uninit`), never past the `remaining` data of the
    /// current segment; remembers how much, and of which kind.
    pub(crate) fn offer<'a, T>(
        &mut self,
        remaining: Option<u64>,
        max: usize,
        uninit: bool,
        room: impl FnOnce(usize) -> Option<&'a mut [T]>,
    ) -> Option<&'a mut [T]> {
        self.0 = 0;
        let remaining = remaining.filter(|r| *r > 0 && max > 0)?;
        let want = usize::try_from(remaining).map_or(max, |r| r.min(max));
        let room = room(want)?;
        self.0 = room.len();
        self.1 = uninit;
        Some(room)
    }

    /// Claims `n > 0` octets of the last offer, which must have been of the kind `uninit`
    /// says; `skip` accounts for them in the stream decoder. More than was offered, or a
    /// claim of the other kind, is a driver bug: the error is fatal to the session.
    pub(crate) fn claim(
        &mut self,
        n: usize,
        uninit: bool,
        skip: impl FnOnce(u64) -> bool,
    ) -> Result<(), SessionError> {
        let offered = if self.1 == uninit {
            std::mem::take(&mut self.0)
        } else {
            self.0 = 0;
            0
        };
        if n > offered || !skip(n as u64) {
            return Err(SessionError::PayloadOverrun { filled: n, offered });
        }
        Ok(())
    }
}
