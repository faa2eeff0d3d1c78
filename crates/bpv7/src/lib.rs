//! Bundle Protocol version 7 (RFC 9171) codec: a pure, sans-IO encoder/decoder for bundles, endpoint IDs, block
//! CRCs, administrative records (status reports), fragmentation and reassembly.
//!
//! * **Strict decoding** ([`Bundle::decode`]): every rule of RFC 9171 4.1-4.4 is checked and violations come back
//!   as a typed [`DecodeError`] naming the field, byte offset or block number. Decoding never panics and never
//!   allocates on the strength of a length field before checking it against the input.
//! * **Zero-copy**: payload and block data are [`bytes::Bytes`] slices of the input buffer.
//! * **Byte-exact forwarding**: decoded blocks keep their original encoding and are re-sent verbatim until modified,
//!   so unknown extension blocks (and BPSec blocks over them) survive a hop unchanged.
//! * **Encoding policy**: we send shortest-form CBOR (RFC 9171 "SHOULD"); on receive, non-shortest integers are
//!   tolerated and recorded ([`Bundle::had_non_shortest_encoding`]). The primary block may carry no CRC (many
//!   deployed nodes send it that way) although RFC 9171 expects one unless a BIB covers it. Blocks must be
//!   definite-length arrays and strings must be definite-length (RFC 9171 fixes the element counts); only the
//!   bundle itself is an indefinite-length array, as RFC 9171 4.1 requires.
//!
//! ```
//! use bpv7::{Bundle, BundleBuilder, CrcType, Eid};
//! let bundle = BundleBuilder::new("ipn:1.1".parse().unwrap(), "ipn:2.1".parse().unwrap())
//!     .crc_type(CrcType::Crc32c)
//!     .hop_limit(16)
//!     .payload(&b"hello"[..])
//!     .build()
//!     .unwrap();
//! let wire = bytes::Bytes::from(bundle.encode());
//! let back = Bundle::decode(wire).unwrap();
//! assert_eq!(back, bundle);
//! assert_eq!(&back.payload()[..], b"hello");
//! ```
#![warn(missing_docs)]

pub mod admin;
pub mod block;
pub mod builder;
pub mod bundle;
pub mod cbor;
pub mod crc;
pub mod eid;
pub mod error;
pub mod flags;
pub mod fragment;
pub mod prepared;
pub mod primary;
pub mod stream;
pub mod time;

/// Re-exported so users (and the fuzz target) name the same `Bytes` type the codec hands out.
pub use bytes;

pub use admin::{AdminRecord, ReasonCode, StatusItem, StatusReport};
pub use block::{block_type_name, CanonicalBlock, HopCount};
pub use builder::BundleBuilder;
pub use bundle::{Bundle, BundleId, DecodeLimits, UpdateError};
pub use crc::CrcType;
pub use eid::{Eid, EidError};
pub use error::DecodeError;
pub use flags::{BlockFlags, BundleFlags};
pub use fragment::{
    fragment, AduKey, FragmentError, Reassembler, ReassemblyError, ReassemblyLimits,
};
pub use prepared::PreparedPayload;
pub use primary::{FragmentInfo, PrimaryBlock};
pub use stream::{FragmentEncoder, FragmentPlan, Piece};
pub use time::{dtn_time_from_unix_ms, format_dtn_time, CreationTimestamp};
