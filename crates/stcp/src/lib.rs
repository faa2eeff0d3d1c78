//! STCP, the "simple TCP" convergence layer of ION (`stcpcli`/`stcpclo`) and HDTN (STCP
//! induct/outduct): on a TCP connection, each bundle is preceded by its length as a 4-octet
//! unsigned integer in network byte order. There is no contact header, no session, no
//! segmentation and no acknowledgment. A length of zero is a keepalive: ION's sender writes
//! one after 15 s without traffic; HDTN's receiver skips them too.
//!
//! The crate is sans-IO: [`Deframer`] turns received octets into [`Item`]s, [`Framer`] turns
//! bundles into octets to write and tells which bundles the kernel took completely. Neither
//! opens a socket, reads a clock or spawns a thread.
//!
//! # Policies
//!
//! - **Limit before allocation.** A declared length above the configured maximum bundle size
//!   is [`DecodeError::TooLong`]: nothing is allocated for it and the stream is dead (STCP has
//!   no way to skip a frame it refuses, nor to tell the sender why: the driver closes the
//!   connection). A bundle's buffer grows with the octets that arrive, from at most
//!   [`decode::INITIAL_ALLOCATION`], so a peer that announces 4 GiB and stops costs little.
//! - **Keepalives are counted, never delivered as bundles.** Any number of them may appear
//!   between bundles.
//! - **"Sent" means "written".** Without an acknowledgment the sender can only know that the
//!   kernel accepted a bundle's last octet; that is when [`Framer::poll_sent`] hands out its
//!   token. A connection lost after that may still lose the bundle in flight (in the kernel
//!   buffers or the network). [`Framer::abort`] returns the bundles not completely written.
//! - **Bundles of 4 GiB or more cannot be framed** (32-bit length):
//!   [`EncodeError::TooLarge`], the bundle is not queued.
//!
//! ```
//! use std::time::Duration;
//! use stcp::{bytes::Bytes, Deframer, Framer, Item};
//!
//! let now = Duration::ZERO;
//! let mut tx = Framer::new(None, now);
//! tx.send_bundle(7, Bytes::from_static(b"a bundle")).unwrap();
//! let mut wire = Vec::new();
//! let mut slices = [std::io::IoSlice::new(&[]); 8];
//! let n = tx.io_slices(&mut slices);
//! for s in &slices[..n] {
//!     wire.extend_from_slice(s);
//! }
//! tx.handle_written(now, wire.len());
//! assert_eq!(tx.poll_sent(), Some(7));
//! assert_eq!(&wire[..4], &[0, 0, 0, 8]);
//!
//! let mut rx = Deframer::new(1 << 20);
//! rx.handle_input(&[0, 0, 0, 0]).unwrap(); // a keepalive
//! rx.handle_input(&wire).unwrap();
//! assert_eq!(rx.poll_item(), Some(Item::Keepalive));
//! assert_eq!(rx.poll_item(), Some(Item::Bundle(Bytes::from_static(b"a bundle"))));
//! ```

#![warn(missing_docs)]

pub mod decode;
pub mod encode;
pub mod error;

/// Re-export of the `bytes` crate used in the API (bundles are `Bytes`).
pub use bytes;
pub use decode::{DecodeStats, Deframer, Item};
pub use encode::{encode_prefix, EncodeStats, Framer, KEEPALIVE};
pub use error::{DecodeError, EncodeError};

/// Octets of the length prefix.
pub const LEN_PREFIX: usize = 4;

/// The longest bundle a 32-bit length can announce.
pub const MAX_FRAME: u64 = u32::MAX as u64;
