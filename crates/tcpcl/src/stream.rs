//! Incremental decoding of a TCP byte stream into contact header, messages and segment data.
//!
//! The stream arrives in arbitrary pieces. Headers (everything but segment data) are parsed
//! in place when a piece holds them whole, and otherwise accumulated in a small buffer that
//! only ever grows to the size of the header being read (bounded by [`DecodeLimits`]).
//! Segment data is never buffered here: it is handed out as sub-slices of the caller's input
//! ([`Item::SegmentData`]), so the session copies each payload octet exactly once, into the
//! transfer's reassembly buffer (or skips it, for a refused transfer). A caller that reads
//! segment data straight into its destination instead accounts for it with
//! [`StreamDecoder::skip_data`].

use crate::decode::{decode_contact_header, decode_header, DecodeLimits, Header, Progress};
use crate::error::DecodeError;
use crate::msg::{ContactHeader, Message, SegmentHeader};

/// One unit decoded from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item<'a> {
    /// The peer's contact header.
    Contact(ContactHeader),
    /// A message without data (every type but XFER_SEGMENT).
    Message(Message),
    /// An XFER_SEGMENT header; `data_len` octets follow as [`Item::SegmentData`] pieces,
    /// then [`Item::SegmentEnd`].
    SegmentStart(SegmentHeader),
    /// A piece of the current segment's data (a slice of the input).
    SegmentData(&'a [u8]),
    /// The current segment's data is complete.
    SegmentEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Contact,
    Header,
    Data { remaining: u64 },
}

/// Splits a byte stream into [`Item`]s. Feed input with [`StreamDecoder::next`] until it
/// returns `Ok(None)` (input exhausted, or waiting for more of a header).
#[derive(Debug, Clone)]
pub struct StreamDecoder {
    limits: DecodeLimits,
    state: State,
    partial: Vec<u8>,
    need: usize,
}

impl StreamDecoder {
    /// A decoder expecting a contact header first (`expect_contact`) or messages directly.
    pub fn new(limits: DecodeLimits, expect_contact: bool) -> Self {
        StreamDecoder {
            limits,
            state: if expect_contact {
                State::Contact
            } else {
                State::Header
            },
            partial: Vec::new(),
            need: 0,
        }
    }

    /// Octets of an incomplete header held back (at most one header's worth).
    pub fn buffered(&self) -> usize {
        self.partial.len()
    }

    /// Whether the decoder is between messages (no partial header, no pending data).
    pub fn is_at_boundary(&self) -> bool {
        self.partial.is_empty() && !matches!(self.state, State::Data { .. })
    }

    /// Octets of the current segment's data still expected, while inside a segment's data
    /// (`Some(0)`: all arrived, [`Item::SegmentEnd`] comes next); `None` between messages.
    pub fn data_remaining(&self) -> Option<u64> {
        match self.state {
            State::Data { remaining } => Some(remaining),
            _ => None,
        }
    }

    /// Accounts for `n` octets of the current segment's data that the caller received
    /// without passing them through [`StreamDecoder::next`] (it read them straight into
    /// their destination): afterwards the decoder is where `next` would have left it after
    /// handing out those octets as [`Item::SegmentData`]. Returns false, changing nothing,
    /// if not inside a segment's data or if `n` exceeds [`StreamDecoder::data_remaining`].
    pub fn skip_data(&mut self, n: u64) -> bool {
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

    /// Decodes the next item from `input`, advancing it past the octets consumed.
    ///
    /// `Ok(None)` means everything useful in `input` was consumed (a partial header is kept
    /// internally). After an error the stream cannot be resynchronised; the decoder must not
    /// be used again.
    pub fn next<'a>(&mut self, input: &mut &'a [u8]) -> Result<Option<Item<'a>>, DecodeError> {
        if let State::Data { remaining } = self.state {
            if remaining == 0 {
                self.state = State::Header;
                return Ok(Some(Item::SegmentEnd));
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
            return Ok(Some(Item::SegmentData(data)));
        }
        if input.is_empty() {
            return Ok(None);
        }
        let contact = self.state == State::Contact;
        let limits = self.limits;
        let parse = |buf: &[u8]| -> Result<Progress<Item<'static>>, DecodeError> {
            if contact {
                Ok(match decode_contact_header(buf)? {
                    Progress::Done(h, n) => Progress::Done(Item::Contact(h), n),
                    Progress::NeedMore(n) => Progress::NeedMore(n),
                })
            } else {
                Ok(match decode_header(buf, &limits)? {
                    Progress::Done(Header::Message(m), n) => Progress::Done(Item::Message(m), n),
                    Progress::Done(Header::Segment(h), n) => {
                        Progress::Done(Item::SegmentStart(h), n)
                    }
                    Progress::NeedMore(n) => Progress::NeedMore(n),
                })
            }
        };
        let progress = if self.partial.is_empty() {
            // Fast path: the whole header is in this piece of input.
            match parse(input)? {
                Progress::Done(item, n) => {
                    *input = input.get(n..).unwrap_or_default();
                    Progress::Done(item, 0)
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
                match parse(&self.partial)? {
                    Progress::Done(item, n) => {
                        // `need` is always the end of the field that was short, so a header
                        // completes exactly at the end of the buffered octets.
                        self.partial.clear();
                        break Progress::Done(item, n);
                    }
                    Progress::NeedMore(n) => self.need = n,
                }
            }
        };
        let Progress::Done(item, _) = progress else {
            return Ok(None);
        };
        self.state = match &item {
            Item::SegmentStart(h) => State::Data {
                remaining: h.data_len,
            },
            _ => State::Header,
        };
        Ok(Some(item))
    }

    /// Changes the limits (e.g. after negotiation); applies to headers not yet started.
    pub fn set_limits(&mut self, limits: DecodeLimits) {
        self.limits = limits;
    }
}
