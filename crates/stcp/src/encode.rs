//! The sending side: bundles (and keepalives when idle) → a byte stream, with the record of
//! which bundles the kernel has taken completely.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::time::Duration;

use bytes::Bytes;

use crate::error::EncodeError;
use crate::{LEN_PREFIX, MAX_FRAME};

/// The 4-octet prefix of a bundle of `len` octets.
pub fn encode_prefix(len: u64) -> Result<[u8; LEN_PREFIX], EncodeError> {
    if len == 0 {
        return Err(EncodeError::Empty);
    }
    u32::try_from(len)
        .map(u32::to_be_bytes)
        .map_err(|_| EncodeError::TooLarge {
            len,
            max: MAX_FRAME,
        })
}

/// A keepalive: a zero length.
pub const KEEPALIVE: [u8; LEN_PREFIX] = [0; LEN_PREFIX];

/// Counters of one connection's sending side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncodeStats {
    /// Octets reported written (prefixes and bundles).
    pub bytes: u64,
    /// Bundles completely written.
    pub bundles: u64,
    /// Octets of those bundles.
    pub bundle_bytes: u64,
    /// Keepalives completely written.
    pub keepalives: u64,
}

#[derive(Debug)]
struct Frame {
    /// None: a keepalive.
    token: Option<u64>,
    prefix: [u8; LEN_PREFIX],
    bundle: Bytes,
    /// Octets of prefix + bundle already written.
    written: usize,
}

impl Frame {
    fn len(&self) -> usize {
        LEN_PREFIX + self.bundle.len()
    }
}

/// Frames bundles for one connection (sans-IO: the caller writes what
/// [`Framer::io_slices`] offers and reports how much the kernel took with
/// [`Framer::handle_written`]).
///
/// STCP has no acknowledgment: a bundle is *sent* when its last octet was written to the
/// socket, which is all a sender can know. [`Framer::poll_sent`] hands out the tokens of such
/// bundles in order; [`Framer::abort`] the tokens of the rest when the connection is lost.
/// Bundles are never copied: the offered slices are the caller's `Bytes`.
///
/// Keepalives: with an interval set, a zero length is queued when nothing was written for
/// that long ([`Framer::poll_timeout`], [`Framer::handle_timeout`]), as ION's sender does,
/// so that a dead connection is noticed by the kernel while idle.
#[derive(Debug)]
pub struct Framer {
    frames: VecDeque<Frame>,
    queued_bytes: u64,
    keepalive: Option<Duration>,
    last_write: Duration,
    sent: VecDeque<u64>,
    stats: EncodeStats,
}

impl Framer {
    /// A framer that sends a keepalive after `keepalive` of idleness (None or zero: never).
    pub fn new(keepalive: Option<Duration>, now: Duration) -> Self {
        Self {
            frames: VecDeque::new(),
            queued_bytes: 0,
            keepalive: keepalive.filter(|k| !k.is_zero()),
            last_write: now,
            sent: VecDeque::new(),
            stats: EncodeStats::default(),
        }
    }

    /// Queues a bundle; `token` comes back from [`Framer::poll_sent`] once it is written.
    /// An error leaves nothing queued.
    pub fn send_bundle(&mut self, token: u64, bundle: Bytes) -> Result<(), EncodeError> {
        let prefix = encode_prefix(bundle.len() as u64)?;
        self.queued_bytes += (LEN_PREFIX + bundle.len()) as u64;
        self.frames.push_back(Frame {
            token: Some(token),
            prefix,
            bundle,
            written: 0,
        });
        Ok(())
    }

    /// Octets queued and not yet written.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Bundles queued (including one partly written).
    pub fn queued_bundles(&self) -> usize {
        self.frames.iter().filter(|f| f.token.is_some()).count()
    }

    /// True when nothing is waiting to be written.
    pub fn is_idle(&self) -> bool {
        self.frames.is_empty()
    }

    /// Fills `out` with the unwritten octets, in order (a prefix and its bundle are two
    /// slices); returns how many slices were filled. Write them with one `writev`.
    pub fn io_slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut slots = out.iter_mut();
        for f in &self.frames {
            let (p_skip, b_skip) = if f.written < LEN_PREFIX {
                (f.written, 0)
            } else {
                (LEN_PREFIX, f.written - LEN_PREFIX)
            };
            for part in [
                f.prefix.get(p_skip..).unwrap_or(&[]),
                f.bundle.get(b_skip..).unwrap_or(&[]),
            ] {
                if part.is_empty() {
                    continue;
                }
                let Some(slot) = slots.next() else { return n };
                *slot = IoSlice::new(part);
                n += 1;
            }
        }
        n
    }

    /// Records that the kernel took `n` more octets (from the start of what
    /// [`Framer::io_slices`] offered). Extra octets beyond the queue are ignored.
    pub fn handle_written(&mut self, now: Duration, mut n: usize) {
        if n > 0 {
            self.last_write = now;
        }
        while n > 0 {
            let Some(f) = self.frames.front_mut() else {
                return;
            };
            let take = (f.len() - f.written).min(n);
            f.written += take;
            n -= take;
            self.stats.bytes += take as u64;
            self.queued_bytes = self.queued_bytes.saturating_sub(take as u64);
            if f.written < f.len() {
                return;
            }
            if let Some(f) = self.frames.pop_front() {
                match f.token {
                    Some(t) => {
                        self.stats.bundles += 1;
                        self.stats.bundle_bytes += f.bundle.len() as u64;
                        self.sent.push_back(t);
                    }
                    None => self.stats.keepalives += 1,
                }
            }
        }
    }

    /// The token of the next bundle completely written.
    pub fn poll_sent(&mut self) -> Option<u64> {
        self.sent.pop_front()
    }

    /// When [`Framer::handle_timeout`] has something to do (a keepalive is due), if ever.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let k = self.keepalive?;
        self.frames.is_empty().then(|| self.last_write + k)
    }

    /// Queues a keepalive if the connection has been idle for the keepalive interval.
    pub fn handle_timeout(&mut self, now: Duration) {
        let Some(due) = self.poll_timeout() else {
            return;
        };
        if now >= due {
            self.queued_bytes += LEN_PREFIX as u64;
            self.frames.push_back(Frame {
                token: None,
                prefix: KEEPALIVE,
                bundle: Bytes::new(),
                written: 0,
            });
        }
    }

    /// The connection is lost: the tokens of every bundle not completely written (a partly
    /// written one included: the peer cannot use half a bundle), oldest first. The framer is
    /// empty afterwards.
    pub fn abort(&mut self) -> Vec<u64> {
        self.queued_bytes = 0;
        self.frames.drain(..).filter_map(|f| f.token).collect()
    }

    /// The counters so far.
    pub fn stats(&self) -> EncodeStats {
        self.stats
    }
}
