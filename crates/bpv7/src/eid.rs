//! Endpoint IDs (RFC 9171 4.2.5): `dtn:none`, `dtn://node/demux` and `ipn:node.service`, in text and CBOR form.
//!
//! The `ipn` scheme also accepts the three-component form `ipn:allocator.node.service` of RFC 9758 (the ipn-update
//! draft). On the wire an EID with allocator 0 uses the RFC 9171 two-element `[node, service]` SSP (so every RFC 9171
//! peer understands it); a non-zero allocator uses the three-element `[allocator, node, service]` SSP. A received
//! two-element SSP is read as allocator 0 with the 64-bit node number as sent (we do not split RFC 9758's "fully
//! qualified node number" into allocator and node).

use std::fmt;
use std::str::FromStr;

use bytes::BufMut;

use crate::cbor::{self, Reader};
use crate::error::DecodeError;

/// URI scheme code of `dtn` (RFC 9171 9.7).
pub const SCHEME_DTN: u64 = 1;
/// URI scheme code of `ipn`.
pub const SCHEME_IPN: u64 = 2;

/// An endpoint ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Eid {
    /// The null endpoint `dtn:none` (anonymous source, no report-to).
    DtnNone,
    /// `dtn://node/demux`; `demux` may be empty (a node ID, `dtn://node/`).
    Dtn {
        /// Node name (non-empty, no `/`).
        node: String,
        /// Demultiplexing token (everything after the slash following the node name).
        demux: String,
    },
    /// `ipn:node.service`, or `ipn:allocator.node.service` when `allocator` is non-zero.
    Ipn {
        /// Allocator identifier (RFC 9758); 0 for the classic two-component form.
        allocator: u64,
        /// Node number.
        node: u64,
        /// Service number.
        service: u64,
    },
}

/// Why an endpoint ID string or SSP is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EidError {
    /// Neither `dtn:` nor `ipn:`.
    #[error("unknown URI scheme (expected dtn: or ipn:)")]
    UnknownScheme,
    /// Unknown scheme code on the wire.
    #[error("unknown URI scheme code {0}")]
    UnknownSchemeCode(u64),
    /// A dtn SSP not of the form `//node/demux`.
    #[error("dtn SSP must be //node-name/demux with a non-empty node name")]
    BadDtnSsp,
    /// Characters outside VCHAR (0x21-0x7E) in a dtn SSP.
    #[error("dtn SSP contains a character outside VCHAR")]
    BadDtnChar,
    /// A dtn node name that is not a URI reg-name (RFC 9171 4.2.5.1.1, RFC 3986 3.2.2): only
    /// letters, digits, `-._~`, the sub-delimiters `!$&'()*+,;=` and `%` escapes of two hex
    /// digits; no `:`, `@`, `/`, `?`, `#`, `[` or `]`.
    #[error(
        "dtn node name must be a URI reg-name (letters, digits, -._~ !$&'()*+,;= and %XX escapes)"
    )]
    BadDtnNodeName,
    /// dtn:none encoded with an integer other than 0.
    #[error("dtn scheme integer SSP must be 0 (dtn:none), found {0}")]
    BadDtnNone(u64),
    /// ipn text form not `N.S` or `A.N.S` of decimal numbers.
    #[error("ipn SSP must be node.service or allocator.node.service (decimal numbers)")]
    BadIpnSsp,
}

impl Eid {
    /// `ipn:node.service` (allocator 0).
    pub fn ipn(node: u64, service: u64) -> Eid {
        Eid::Ipn {
            allocator: 0,
            node,
            service,
        }
    }

    /// `dtn://node/demux`, validated.
    pub fn dtn(node: &str, demux: &str) -> Result<Eid, EidError> {
        check_dtn_parts(node, demux)?;
        Ok(Eid::Dtn {
            node: node.to_owned(),
            demux: demux.to_owned(),
        })
    }

    /// True for `dtn:none`.
    pub fn is_none(&self) -> bool {
        matches!(self, Eid::DtnNone)
    }

    /// The node ID of this endpoint (`dtn://node/`, `ipn:node.0`); `dtn:none` maps to itself.
    pub fn node_id(&self) -> Eid {
        match self {
            Eid::DtnNone => Eid::DtnNone,
            Eid::Dtn { node, .. } => Eid::Dtn {
                node: node.clone(),
                demux: String::new(),
            },
            Eid::Ipn {
                allocator, node, ..
            } => Eid::Ipn {
                allocator: *allocator,
                node: *node,
                service: 0,
            },
        }
    }

    /// Appends the CBOR encoding `[scheme, SSP]`.
    pub fn encode<B: BufMut + ?Sized>(&self, out: &mut B) {
        cbor::put_array(out, 2);
        match self {
            Eid::DtnNone => {
                cbor::put_uint(out, SCHEME_DTN);
                cbor::put_uint(out, 0);
            }
            Eid::Dtn { node, demux } => {
                cbor::put_uint(out, SCHEME_DTN);
                let len = 2 + node.len() + 1 + demux.len();
                cbor::put_head(out, cbor::MAJOR_TSTR, len as u64);
                out.put_slice(b"//");
                out.put_slice(node.as_bytes());
                out.put_u8(b'/');
                out.put_slice(demux.as_bytes());
            }
            Eid::Ipn {
                allocator,
                node,
                service,
            } => {
                cbor::put_uint(out, SCHEME_IPN);
                if *allocator == 0 {
                    cbor::put_array(out, 2);
                } else {
                    cbor::put_array(out, 3);
                    cbor::put_uint(out, *allocator);
                }
                cbor::put_uint(out, *node);
                cbor::put_uint(out, *service);
            }
        }
    }

    /// Size of [`Eid::encode`]'s output.
    pub fn encoded_len(&self) -> usize {
        1 + match self {
            Eid::DtnNone => 2,
            Eid::Dtn { node, demux } => {
                let len = 3 + node.len() + demux.len();
                1 + cbor::head_len(len as u64) + len
            }
            Eid::Ipn {
                allocator,
                node,
                service,
            } => {
                let a = if *allocator == 0 {
                    0
                } else {
                    cbor::head_len(*allocator)
                };
                1 + 1 + a + cbor::head_len(*node) + cbor::head_len(*service)
            }
        }
    }

    /// Decodes `[scheme, SSP]` at the reader's position (`field` names the EID in errors).
    pub fn decode(r: &mut Reader<'_>, field: &'static str) -> Result<Eid, DecodeError> {
        let at = r.pos();
        r.array_of(field, "2", |n| n == 2)?;
        let invalid = |reason| DecodeError::InvalidEid { field, at, reason };
        match r.uint(field)? {
            SCHEME_DTN => {
                let b = r.peek(field)?;
                if b >> 5 == cbor::MAJOR_UINT {
                    match r.uint(field)? {
                        0 => Ok(Eid::DtnNone),
                        n => Err(invalid(EidError::BadDtnNone(n))),
                    }
                } else {
                    let ssp = r.tstr(field)?;
                    parse_dtn_ssp(ssp).map_err(invalid)
                }
            }
            SCHEME_IPN => {
                let n = r.array_of(field, "2 or 3", |n| n == 2 || n == 3)?;
                let allocator = if n == 3 { r.uint(field)? } else { 0 };
                let node = r.uint(field)?;
                let service = r.uint(field)?;
                Ok(Eid::Ipn {
                    allocator,
                    node,
                    service,
                })
            }
            code => Err(invalid(EidError::UnknownSchemeCode(code))),
        }
    }
}

fn check_dtn_parts(node: &str, demux: &str) -> Result<(), EidError> {
    if node.is_empty() || node.contains('/') {
        return Err(EidError::BadDtnSsp);
    }
    let vchar = |s: &str| s.bytes().all(|b| (0x21..=0x7E).contains(&b));
    if !vchar(node) || !vchar(demux) {
        return Err(EidError::BadDtnChar);
    }
    if !is_reg_name(node.as_bytes()) {
        return Err(EidError::BadDtnNodeName);
    }
    Ok(())
}

/// RFC 3986's reg-name: `*( unreserved / pct-encoded / sub-delims )` (non-empty is checked by
/// the caller). No deployed BPv7 peer we know of sends `:` or `@` in a node name (Hardy refuses
/// them), so there is no tolerant path.
fn is_reg_name(name: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = name.get(i) {
        let ok = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b);
        if ok {
            i += 1;
        } else if b == b'%'
            && name.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && name.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            i += 3;
        } else {
            return false;
        }
    }
    true
}

/// Parses a dtn SSP `//node/demux`.
fn parse_dtn_ssp(ssp: &str) -> Result<Eid, EidError> {
    let rest = ssp.strip_prefix("//").ok_or(EidError::BadDtnSsp)?;
    let (node, demux) = rest.split_once('/').ok_or(EidError::BadDtnSsp)?;
    Eid::dtn(node, demux)
}

impl FromStr for Eid {
    type Err = EidError;

    /// Parses `dtn:none`, `dtn://node/demux` (a missing slash after the node name is added: `dtn://n` is
    /// `dtn://n/`), `ipn:N.S` and `ipn:A.N.S`.
    fn from_str(s: &str) -> Result<Eid, EidError> {
        if let Some(ssp) = s.strip_prefix("dtn:") {
            if ssp == "none" {
                return Ok(Eid::DtnNone);
            }
            let rest = ssp.strip_prefix("//").ok_or(EidError::BadDtnSsp)?;
            let (node, demux) = rest.split_once('/').unwrap_or((rest, ""));
            Eid::dtn(node, demux)
        } else if let Some(ssp) = s.strip_prefix("ipn:") {
            let mut nums = [0u64; 3];
            let mut count = 0;
            for part in ssp.split('.') {
                if count == 3 || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(EidError::BadIpnSsp);
                }
                nums[count] = part.parse().map_err(|_| EidError::BadIpnSsp)?;
                count += 1;
            }
            match count {
                2 => Ok(Eid::ipn(nums[0], nums[1])),
                3 => Ok(Eid::Ipn {
                    allocator: nums[0],
                    node: nums[1],
                    service: nums[2],
                }),
                _ => Err(EidError::BadIpnSsp),
            }
        } else {
            Err(EidError::UnknownScheme)
        }
    }
}

impl fmt::Display for Eid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Eid::DtnNone => f.write_str("dtn:none"),
            Eid::Dtn { node, demux } => write!(f, "dtn://{node}/{demux}"),
            Eid::Ipn {
                allocator: 0,
                node,
                service,
            } => write!(f, "ipn:{node}.{service}"),
            Eid::Ipn {
                allocator,
                node,
                service,
            } => write!(f, "ipn:{allocator}.{node}.{service}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn round_trip(text: &str) -> Eid {
        let eid: Eid = text.parse().unwrap();
        assert_eq!(eid.to_string(), text);
        let mut buf = Vec::new();
        eid.encode(&mut buf);
        assert_eq!(buf.len(), eid.encoded_len());
        let b = Bytes::from(buf);
        let mut r = Reader::new(&b, 0);
        assert_eq!(Eid::decode(&mut r, "eid").unwrap(), eid);
        assert_eq!(r.remaining(), 0);
        eid
    }

    #[test]
    fn text_and_cbor_round_trip() {
        assert_eq!(round_trip("dtn:none"), Eid::DtnNone);
        round_trip("dtn://node1/");
        round_trip("dtn://node1/inbox/a~b");
        assert_eq!(round_trip("ipn:23.42"), Eid::ipn(23, 42));
        round_trip("ipn:977000.100.1");
        round_trip("ipn:18446744073709551615.18446744073709551615");
    }

    #[test]
    fn wire_forms() {
        let mut buf = Vec::new();
        Eid::DtnNone.encode(&mut buf);
        assert_eq!(buf, [0x82, 0x01, 0x00]);
        buf.clear();
        Eid::ipn(1, 2).encode(&mut buf);
        assert_eq!(buf, [0x82, 0x02, 0x82, 0x01, 0x02]);
        buf.clear();
        Eid::dtn("a", "b").unwrap().encode(&mut buf);
        assert_eq!(buf, [0x82, 0x01, 0x65, b'/', b'/', b'a', b'/', b'b']);
    }

    #[test]
    fn rejects_bad_text() {
        for bad in [
            "",
            "foo:bar",
            "dtn:",
            "dtn:/x",
            "dtn:///x",
            "dtn://a b/",
            "ipn:1",
            "ipn:1.2.3.4",
            "ipn:1.x",
            "ipn:-1.2",
            "ipn:1..2",
            "ipn:99999999999999999999.1",
            "dtn://a:b/x",
            "dtn://a@b/x",
            "dtn://a%2/x",
            "dtn://a%zz/x",
            "dtn://[a]/x",
            "dtn://a?b/x",
            "dtn://a#b/x",
        ] {
            assert!(bad.parse::<Eid>().is_err(), "{bad}");
        }
        assert_eq!("dtn://n".parse::<Eid>().unwrap().to_string(), "dtn://n/");
    }

    #[test]
    fn node_names_are_reg_names() {
        for good in ["a", "A-b.c_d~e", "x!$&'()*+,;=y", "a%2Fb", "%41"] {
            assert!(Eid::dtn(good, "").is_ok(), "{good}");
        }
        assert_eq!(Eid::dtn("a:b", "x"), Err(EidError::BadDtnNodeName));
        // The demux keeps every VCHAR.
        assert!(Eid::dtn("a", "x:y@z/%?#[]").is_ok());
        // On the wire too.
        let mut buf = vec![0x82, 0x01, 0x67];
        buf.extend_from_slice(b"//a@b/x");
        let b = Bytes::from(buf);
        let mut r = Reader::new(&b, 0);
        assert!(Eid::decode(&mut r, "eid").is_err());
    }

    proptest::proptest! {
        /// A node name is accepted exactly when every byte is a reg-name character or starts a
        /// complete %XX escape.
        #[test]
        fn node_name_grammar(name in "[a-zA-Z0-9:@%/?#\\[\\]!$&'()*+,;=._~-]{1,12}") {
            let b = name.as_bytes();
            let mut expect = !name.contains('/');
            let mut i = 0;
            while expect && i < b.len() {
                let c = b[i];
                if c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&c) {
                    i += 1;
                } else if c == b'%' && i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit() {
                    i += 3;
                } else {
                    expect = false;
                }
            }
            let got = Eid::dtn(&name, "d");
            proptest::prop_assert_eq!(got.is_ok(), expect, "{}", name);
            if let Ok(e) = got {
                let text = e.to_string();
                proptest::prop_assert_eq!(text.parse::<Eid>().unwrap(), e);
            }
        }
    }
}
