//! Bundle Protocol Security (BPSec, RFC 9172) with the default security contexts of RFC 9173.
//!
//! - [`asb`]: the abstract security block codec shared by the Block Integrity Block (BIB, type 11) and the Block
//!   Confidentiality Block (BCB, type 12), with typed errors ([`AsbError`]).
//! - [`context`]: BIB-HMAC-SHA2 (id 1: HMAC 256/384/512, integrity scope flags, optional wrapped key) and
//!   BCB-AES-GCM (id 2: A128GCM/A256GCM, 96-bit IV, AAD scope flags, authentication tag as a result, optional
//!   wrapped key), and AES key wrap (RFC 3394).
//! - [`canonical`]: the canonical forms these sign and authenticate (IPPT and AAD).
//! - [`ops`]: adding, verifying, accepting and decrypting security blocks on a [`bpv7::Bundle`], and removing a
//!   security target; [`rules`]: the block interaction rules of RFC 9172 that every operation respects.
//! - [`inspect`]: names and meanings for inspection tools, and a check of a bundle's security blocks with
//!   candidate keys.
//! - [`policy`]: rules per source/destination pattern that say which services a node adds as the bundle's source
//!   and requires as its destination (the security acceptor), with keys read from files ([`key`]).
//!
//! Everything is sans-IO except [`policy::os_entropy`] (the operating system's random number generator for IVs and
//! per-bundle keys, replaceable by any source) and [`Key::load`].
//!
//! The four examples of RFC 9173 Appendix A come out byte for byte (`tests/rfc9173_vectors.rs`):
//!
//! ```
//! use bpsec::{ops, Key, ScopeFlags, ShaVariant};
//! use bpv7::{Bundle, BundleBuilder, CrcType, CreationTimestamp, Eid};
//!
//! // RFC 9173 A.1: a BIB over the payload, HMAC 512/512, no additional scope.
//! let mut bundle = BundleBuilder::new(Eid::ipn(2, 1), Eid::ipn(1, 2))
//!     .crc_type(CrcType::None)
//!     .creation(CreationTimestamp::new(0, 40))
//!     .lifetime_ms(1_000_000)
//!     .bundle_age_ms(0)
//!     .payload(&b"Ready to generate a 32-byte payload"[..])
//!     .build()?;
//! bundle.blocks_mut().retain(|b| b.block_type() == 1); // A.1 has no bundle age block
//! let mut spec = ops::BibSpec::payload(Eid::ipn(2, 1));
//! spec.sha = ShaVariant::Sha512;
//! spec.scope = ScopeFlags::NONE;
//! let key = Key::new(&[0x1a, 0x2b].repeat(8));
//! let bib = ops::add_bib(&mut bundle, &spec, ops::KeyMode::Direct(&key))?;
//! assert_eq!(bib, 2);
//! assert_eq!(ops::verify_bib(&bundle, bib, &key)?, vec![1]);
//! // The RFC's final bundle: 165 bytes, whose HMAC starts 3bdc69b3.
//! let wire = bundle.encode();
//! assert_eq!(wire.len(), 165);
//! assert_eq!(&wire[58..62], &[0x3b, 0xdc, 0x69, 0xb3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod asb;
pub mod canonical;
pub mod context;
pub mod error;
pub mod inspect;
pub mod key;
pub mod ops;
pub mod policy;
pub mod rules;

pub use asb::{Asb, CborValue, SecurityItem};
pub use canonical::ScopeFlags;
pub use context::aes_gcm::AesVariant;
pub use context::hmac_sha2::ShaVariant;
pub use error::{AsbError, SecurityError};
pub use key::{Key, KeyError};
pub use policy::{Accepted, EidPattern, OnFailure, Policy, Rejected, Rule, Secured};
pub use rules::SecurityBlocks;
