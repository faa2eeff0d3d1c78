//! Incremental decoding of a TCPCLv3 byte stream (the v3 counterpart of
//! [`crate::StreamDecoder`], on the same framer: headers accumulated only when cut by a read,
//! segment data handed out as slices of the input).

use crate::decode::Progress;
use crate::error::DecodeError;
use crate::framing::{Framer, Unit};

use super::decode::{decode_contact_header, decode_header, Header};
use super::msg::{ContactHeader, Message, SegmentHeader};

/// One unit decoded from a v3 stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item<'a> {
    /// The peer's contact header.
    Contact(ContactHeader),
    /// A message without data (every type but DATA_SEGMENT).
    Message(Message),
    /// A DATA_SEGMENT header; `data_len` octets follow as [`Item::SegmentData`] pieces, then
    /// [`Item::SegmentEnd`].
    SegmentStart(SegmentHeader),
    /// A piece of the current segment's data (a slice of the input).
    SegmentData(&'a [u8]),
    /// The current segment's data is complete.
    SegmentEnd,
}

/// Splits a v3 byte stream into [`Item`]s; feed it with [`StreamDecoder::next`] until that
/// returns `Ok(None)`.
#[derive(Debug, Clone)]
pub struct StreamDecoder {
    framer: Framer,
}

impl StreamDecoder {
    /// A decoder expecting a contact header first (`expect_contact`) or messages directly.
    pub fn new(expect_contact: bool) -> Self {
        StreamDecoder {
            framer: Framer::new(expect_contact),
        }
    }

    /// Octets of an incomplete header held back (at most one header's worth).
    pub fn buffered(&self) -> usize {
        self.framer.buffered()
    }

    /// Whether the decoder is between messages.
    pub fn is_at_boundary(&self) -> bool {
        self.framer.is_at_boundary()
    }

    /// Data octets of the current segment still expected (`None` between messages).
    pub fn data_remaining(&self) -> Option<u64> {
        self.framer.data_remaining()
    }

    /// Accounts for `n` data octets read straight into their destination (see
    /// [`crate::StreamDecoder::skip_data`]).
    pub fn skip_data(&mut self, n: u64) -> bool {
        self.framer.skip_data(n)
    }

    /// The framer, for the direct-read path shared by both versions (`crate::direct`).
    pub(crate) fn framer_mut(&mut self) -> &mut Framer {
        &mut self.framer
    }

    /// Decodes the next item from `input`, advancing it past the octets consumed. After an
    /// error the stream cannot be resynchronised.
    pub fn next<'a>(&mut self, input: &mut &'a [u8]) -> Result<Option<Item<'a>>, DecodeError> {
        let parse = |buf: &[u8], contact: bool| -> Result<Progress<Item<'static>>, DecodeError> {
            if contact {
                Ok(match decode_contact_header(buf)? {
                    Progress::Done(h, n) => Progress::Done(Item::Contact(h), n),
                    Progress::NeedMore(n) => Progress::NeedMore(n),
                })
            } else {
                Ok(match decode_header(buf)? {
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
}
