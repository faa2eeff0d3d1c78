//! The receiving side: a byte stream → keepalives and bundles.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::error::DecodeError;
use crate::LEN_PREFIX;

/// First allocation for a bundle whose length is known: at most this much, whatever the peer
/// declared. The buffer then grows (doubling) only as octets arrive, so a peer that declares
/// a large bundle and sends little of it costs little memory.
pub const INITIAL_ALLOCATION: usize = 256 << 10;

/// What the deframer found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A zero length: the peer's keepalive (ION sends one every 15 s of idleness).
    Keepalive,
    /// A complete bundle (its octets, not yet decoded as a bundle).
    Bundle(Bytes),
}

/// Counters of one connection's receiving side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Octets consumed (prefixes and bundles).
    pub bytes: u64,
    /// Complete bundles.
    pub bundles: u64,
    /// Octets of complete bundles.
    pub bundle_bytes: u64,
    /// Zero-length frames.
    pub keepalives: u64,
    /// Frames refused (a declared length above the limit): at most one, it ends the stream.
    pub refused: u64,
}

#[derive(Debug)]
enum State {
    /// Reading a length prefix: `have` of its 4 octets are in `prefix`.
    Prefix {
        prefix: [u8; LEN_PREFIX],
        have: usize,
    },
    /// Reading a bundle of `len` octets. `buf[..filled]` holds what arrived; `buf` may be
    /// longer (zeroed octets offered by [`Deframer::payload_buf`] and not yet filled).
    Body {
        len: usize,
        buf: Vec<u8>,
        filled: usize,
    },
    Failed,
}

/// Splits an STCP byte stream into keepalives and bundles (sans-IO: the caller reads the
/// socket and passes what it read).
///
/// Bounded memory: a declared length above `max_bundle` is an error before anything is
/// allocated; a bundle's buffer grows with the octets that actually arrived (see
/// [`INITIAL_ALLOCATION`]). Completed items wait in a queue drained with
/// [`Deframer::poll_item`]; the caller drains it after every input, so it holds at most the
/// bundles of one read.
#[derive(Debug)]
pub struct Deframer {
    max_bundle: u64,
    state: State,
    ready: VecDeque<Item>,
    stats: DecodeStats,
}

impl Deframer {
    /// A deframer refusing bundles longer than `max_bundle` octets.
    pub fn new(max_bundle: u64) -> Self {
        Self {
            max_bundle,
            state: State::Prefix {
                prefix: [0; LEN_PREFIX],
                have: 0,
            },
            ready: VecDeque::new(),
            stats: DecodeStats::default(),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> DecodeStats {
        self.stats
    }

    /// The limit in force.
    pub fn max_bundle(&self) -> u64 {
        self.max_bundle
    }

    /// Between frames (no partial prefix, no partial bundle): a connection that ends here lost
    /// nothing in transit on our side.
    pub fn is_at_boundary(&self) -> bool {
        matches!(self.state, State::Prefix { have: 0, .. })
    }

    /// The length and the octets received so far of the bundle being read, if one is.
    pub fn bundle_in_progress(&self) -> Option<(u64, u64)> {
        match &self.state {
            State::Body { len, filled, .. } => Some((*len as u64, *filled as u64)),
            _ => None,
        }
    }

    /// Octets allocated for the bundle being read (its buffer's capacity; 0 between bundles).
    /// At most `max(INITIAL_ALLOCATION, 2 × octets received)`, never above its length.
    pub fn allocated(&self) -> usize {
        match &self.state {
            State::Body { buf, .. } => buf.capacity(),
            _ => 0,
        }
    }

    /// Consumes all of `input`; completed items are queued for [`Deframer::poll_item`].
    /// After an error the stream is dead: every later call returns [`DecodeError::Failed`].
    pub fn handle_input(&mut self, mut input: &[u8]) -> Result<(), DecodeError> {
        while !input.is_empty() {
            match &mut self.state {
                State::Failed => return Err(DecodeError::Failed),
                State::Prefix { prefix, have } => {
                    let take = (LEN_PREFIX - *have).min(input.len());
                    let (head, rest) = input.split_at(take);
                    if let Some(dst) = prefix.get_mut(*have..*have + take) {
                        dst.copy_from_slice(head);
                    }
                    *have += take;
                    input = rest;
                    self.stats.bytes += take as u64;
                    if *have == LEN_PREFIX {
                        let len = u32::from_be_bytes(*prefix);
                        self.start_frame(len)?;
                    }
                }
                State::Body { len, buf, filled } => {
                    let take = (*len - *filled).min(input.len());
                    let (data, rest) = input.split_at(take);
                    input = rest;
                    let end = *filled + take;
                    if end > buf.len() {
                        grow(buf, end, *len);
                        // Octets within the initialised part are overwritten, the rest appended.
                        let inside = buf.len() - *filled;
                        let (a, b) = data.split_at(inside.min(data.len()));
                        if let Some(dst) = buf.get_mut(*filled..*filled + a.len()) {
                            dst.copy_from_slice(a);
                        }
                        buf.extend_from_slice(b);
                    } else if let Some(dst) = buf.get_mut(*filled..end) {
                        dst.copy_from_slice(data);
                    }
                    *filled = end;
                    self.stats.bytes += take as u64;
                    self.finish_body();
                }
            }
        }
        if matches!(self.state, State::Failed) {
            return Err(DecodeError::Failed);
        }
        Ok(())
    }

    /// While a bundle's octets are arriving: a zeroed part of its buffer, at most `max`
    /// octets and never past the bundle's end, to read the socket straight into (then call
    /// [`Deframer::payload_filled`] with the count read). Saves the copy out of a read buffer
    /// for large bundles. `None` between bundles (read the prefix with `handle_input`).
    pub fn payload_buf(&mut self, max: usize) -> Option<&mut [u8]> {
        let State::Body { len, buf, filled } = &mut self.state else {
            return None;
        };
        let end = (*filled + max).min(*len);
        if end > buf.len() {
            grow(buf, end, *len);
            buf.resize(end, 0);
        }
        buf.get_mut(*filled..end)
    }

    /// Accounts for `n` octets read into the slice [`Deframer::payload_buf`] returned. False
    /// (nothing changes) outside a bundle or beyond what was offered.
    pub fn payload_filled(&mut self, n: usize) -> bool {
        let State::Body { len, buf, filled } = &mut self.state else {
            return false;
        };
        if *filled + n > buf.len().min(*len) {
            return false;
        }
        *filled += n;
        self.stats.bytes += n as u64;
        self.finish_body();
        true
    }

    /// The next keepalive or bundle found, in stream order.
    pub fn poll_item(&mut self) -> Option<Item> {
        self.ready.pop_front()
    }

    fn start_frame(&mut self, len: u32) -> Result<(), DecodeError> {
        if len == 0 {
            self.stats.keepalives += 1;
            self.ready.push_back(Item::Keepalive);
            self.state = State::Prefix {
                prefix: [0; LEN_PREFIX],
                have: 0,
            };
            return Ok(());
        }
        let declared = u64::from(len);
        let len = match usize::try_from(len) {
            Ok(l) if declared <= self.max_bundle => l,
            _ => {
                self.stats.refused += 1;
                self.state = State::Failed;
                return Err(DecodeError::TooLong {
                    declared,
                    limit: self.max_bundle,
                });
            }
        };
        self.state = State::Body {
            len,
            buf: Vec::with_capacity(len.min(INITIAL_ALLOCATION)),
            filled: 0,
        };
        Ok(())
    }

    /// Completes the bundle being read if all its octets arrived.
    fn finish_body(&mut self) {
        let State::Body { len, filled, .. } = &self.state else {
            return;
        };
        if filled < len {
            return;
        }
        let done = std::mem::replace(
            &mut self.state,
            State::Prefix {
                prefix: [0; LEN_PREFIX],
                have: 0,
            },
        );
        if let State::Body { len, mut buf, .. } = done {
            buf.truncate(len);
            self.stats.bundles += 1;
            self.stats.bundle_bytes += len as u64;
            self.ready.push_back(Item::Bundle(Bytes::from(buf)));
        }
    }
}

/// Makes room for `need` octets in a bundle buffer of final length `len`: at least doubling
/// the capacity (amortised copies), never beyond `len`.
fn grow(buf: &mut Vec<u8>, need: usize, len: usize) {
    if need <= buf.capacity() {
        return;
    }
    let target = need.max(buf.capacity().saturating_mul(2)).min(len);
    buf.reserve_exact(target.saturating_sub(buf.len()));
}
