//! The framing common to both TCPCL versions: a contact header, then messages, some of which
//! (data segments) are followed by a known number of data octets.
//!
//! [`Framer`] keeps the part of a byte stream that crosses read boundaries: a header cut in two
//! is accumulated in a small buffer that only ever grows to the size of the header being read;
//! segment data is never buffered but handed out as slices of the caller's input. The
//! version-specific stream decoders ([`crate::StreamDecoder`], [`crate::v3::StreamDecoder`])
//! supply the header parser.

use crate::decode::Progress;
use crate::error::DecodeError;

/// One unit taken from the stream by [`Framer::next`].
#[derive(Debug)]
pub(crate) enum Unit<'a, T> {
    /// A contact header or message header, as parsed by the caller's parser.
    Parsed(T),
    /// A piece of the current segment's data (a slice of the input).
    Data(&'a [u8]),
    /// The current segment's data is complete.
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Contact,
    Header,
    Data { remaining: u64 },
}

/// Splits a byte stream into parsed headers and segment data.
#[derive(Debug, Clone)]
pub(crate) struct Framer {
    state: State,
    partial: Vec<u8>,
    need: usize,
}

impl Framer {
    /// A framer expecting a contact header first (`expect_contact`) or messages directly.
    pub(crate) fn new(expect_contact: bool) -> Self {
        Framer {
            state: if expect_contact {
                State::Contact
            } else {
                State::Header
            },
            partial: Vec::new(),
            need: 0,
        }
    }

    /// Octets of an incomplete header held back.
    pub(crate) fn buffered(&self) -> usize {
        self.partial.len()
    }

    /// Between messages: no partial header, no pending data.
    pub(crate) fn is_at_boundary(&self) -> bool {
        self.partial.is_empty() && !matches!(self.state, State::Data { .. })
    }

    /// Data octets of the current segment still expected (`None` between messages).
    pub(crate) fn data_remaining(&self) -> Option<u64> {
        match self.state {
            State::Data { remaining } => Some(remaining),
            _ => None,
        }
    }

    /// Accounts for `n` data octets the caller received without passing them through
    /// [`Framer::next`]; false, changing nothing, outside data or beyond what remains.
    pub(crate) fn skip_data(&mut self, n: u64) -> bool {
        match self.state {
            State::Data { remaining } if n <= remaining => {
                self.state = State::Data {
                    remaining: remaining - n,
                };
                true
            }
            _ => false,
        }
    }

    /// Takes the next unit from `input`, advancing it past the octets consumed.
    ///
    /// `parse(buf, contact)` decodes a contact header (`contact` true) or a message header
    /// from the start of `buf`; `data_len` tells how many data octets follow a parsed header
    /// (`None`: none, not a segment). `Ok(None)`: everything useful in `input` was consumed.
    /// After an error the stream cannot be resynchronised.
    pub(crate) fn next<'a, T>(
        &mut self,
        input: &mut &'a [u8],
        parse: impl Fn(&[u8], bool) -> Result<Progress<T>, DecodeError>,
        data_len: impl Fn(&T) -> Option<u64>,
    ) -> Result<Option<Unit<'a, T>>, DecodeError> {
        if let State::Data { remaining } = self.state {
            if remaining == 0 {
                self.state = State::Header;
                return Ok(Some(Unit::End));
            }
            if input.is_empty() {
                return Ok(None);
            }
            let take = usize::try_from(remaining).map_or(input.len(), |r| r.min(input.len()));
            let (data, rest) = input.split_at(take);
            *input = rest;
            self.state = State::Data {
                remaining: remaining - take as u64,
            };
            return Ok(Some(Unit::Data(data)));
        }
        if input.is_empty() {
            return Ok(None);
        }
        let contact = self.state == State::Contact;
        let parsed = if self.partial.is_empty() {
            // Fast path: the whole header is in this piece of input.
            match parse(input, contact)? {
                Progress::Done(v, n) => {
                    *input = input.get(n..).unwrap_or_default();
                    v
                }
                Progress::NeedMore(n) => {
                    self.partial.extend_from_slice(input);
                    *input = &[];
                    self.need = n;
                    return Ok(None);
                }
            }
        } else {
            loop {
                let want = self
                    .need
                    .saturating_sub(self.partial.len())
                    .min(input.len());
                let (head, rest) = input.split_at(want);
                self.partial.extend_from_slice(head);
                *input = rest;
                if self.partial.len() < self.need {
                    return Ok(None);
                }
                match parse(&self.partial, contact)? {
                    Progress::Done(v, _) => {
                        // `need` is always the end of the field that was short, so a header
                        // completes exactly at the end of the buffered octets.
                        self.partial.clear();
                        break v;
                    }
                    Progress::NeedMore(n) => self.need = n,
                }
            }
        };
        self.state = match data_len(&parsed) {
            Some(remaining) => State::Data { remaining },
            None => State::Header,
        };
        Ok(Some(Unit::Parsed(parsed)))
    }
}
