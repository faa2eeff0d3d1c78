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
use crate::framing::{Framer, Unit};
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

/// Splits a byte stream into [`Item`]s. Feed input with [`StreamDecoder::next`] until it
/// returns `Ok(None)` (input exhausted, or waiting for more of a header).
#[derive(Debug, Clone)]
pub struct StreamDecoder {
    limits: DecodeLimits,
    framer: Framer,
}

impl StreamDecoder {
    /// A decoder expecting a contact header first (`expect_contact`) or messages directly.
    pub fn new(limits: DecodeLimits, expect_contact: bool) -> Self {
        StreamDecoder {
            limits,
            framer: Framer::new(expect_contact),
        }
    }

    /// Octets of an incomplete header held back (at most one header's worth).
    pub fn buffered(&self) -> usize {
        self.framer.buffered()
    }

    /// Whether the decoder is between messages (no partial header, no pending data).
    pub fn is_at_boundary(&self) -> bool {
        self.framer.is_at_boundary()
    }

    /// Octets of the current segment's data still expected, while inside a segment's data
    /// (`Some(0)`: all arrived, [`Item::SegmentEnd`] comes next); `None` between messages.
    pub fn data_remaining(&self) -> Option<u64> {
        self.framer.data_remaining()
    }

    /// Accounts for `n` octets of the current segment's data that the caller received
    /// without passing them through [`StreamDecoder::next`] (it read them straight into
    /// their destination): afterwards the decoder is where `next` would have left it after
    /// handing out those octets as [`Item::SegmentData`]. Returns false, changing nothing,
    /// if not inside a segment's data or if `n` exceeds [`StreamDecoder::data_remaining`].
    pub fn skip_data(&mut self, n: u64) -> bool {
        self.framer.skip_data(n)
    }

    /// The framer, for the direct-read path shared by both versions (`crate::direct`).
    pub(crate) fn framer_mut(&mut self) -> &mut Framer {
        &mut self.framer
    }

    /// Decodes the next item from `input`, advancing it past the octets consumed.
    ///
    /// `Ok(None)` means everything useful in `input` was consumed (a partial header is kept
    /// internally). After an error the stream cannot be resynchronised; the decoder must not
    /// be used again.
    pub fn next<'a>(&mut self, input: &mut &'a [u8]) -> Result<Option<Item<'a>>, DecodeError> {
        let limits = self.limits;
        let parse = |buf: &[u8], contact: bool| -> Result<Progress<Item<'static>>, DecodeError> {
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
        let data_len = |item: &Item<'static>| match item {
            Item::SegmentStart(h) => Some(h.data_len),
            _ => None,
        };
        Ok(self.framer.next(input, parse, data_len)?.map(|u| match u {
            Unit::Parsed(item) => item,
            Unit::Data(d) => Item::SegmentData(d),
            Unit::End => Item::SegmentEnd,
        }))
    }

    /// Changes the limits (e.g. after negotiation); applies to headers not yet started.
    pub fn set_limits(&mut self, limits: DecodeLimits) {
        self.limits = limits;
    }
}
