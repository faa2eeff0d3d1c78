//! The abstract security block (RFC 9172 section 3.6): the block-type-specific data of both the BIB and the BCB, a
//! CBOR sequence of security targets, security context id, security context flags, security source, optional
//! security context parameters and the security results (one set per target, in target order).
//!
//! Parameter and result values are kept as the CBOR items they were received as ([`CborValue`]), so a block of a
//! security context this crate does not implement decodes, prints and re-encodes unchanged; the two contexts of RFC
//! 9173 read them through the typed views ([`CborValue::as_uint`], [`CborValue::as_bytes`]).

use bytes::Bytes;

use bpv7::cbor::{self, Reader};
use bpv7::Eid;

use crate::error::AsbError;

/// Bit 0 of the security context flags: the security context parameters field is present.
pub const FLAG_PARAMETERS_PRESENT: u64 = 0x01;

/// One CBOR data item, held as its encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CborValue(Bytes);

impl CborValue {
    /// An unsigned integer.
    pub fn uint(v: u64) -> Self {
        let mut out = Vec::with_capacity(9);
        cbor::put_uint(&mut out, v);
        CborValue(out.into())
    }

    /// A byte string.
    pub fn bytes(data: &[u8]) -> Self {
        let mut out = Vec::with_capacity(9 + data.len());
        cbor::put_bstr(&mut out, data);
        CborValue(out.into())
    }

    /// The item's encoding.
    pub fn encoded(&self) -> &Bytes {
        &self.0
    }

    /// The value if the item is an unsigned integer.
    pub fn as_uint(&self) -> Option<u64> {
        let mut r = Reader::new(&self.0, 0);
        r.uint("value").ok().filter(|_| r.remaining() == 0)
    }

    /// The content if the item is a byte string (a zero-copy slice).
    pub fn as_bytes(&self) -> Option<Bytes> {
        let mut r = Reader::new(&self.0, 0);
        r.bstr("value").ok().filter(|_| r.remaining() == 0)
    }
}

/// A security context parameter or security result: an id and a value whose meaning the security context defines.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecurityItem {
    /// The parameter or result id.
    pub id: u64,
    /// The value.
    pub value: CborValue,
}

impl SecurityItem {
    /// An item with an unsigned integer value.
    pub fn uint(id: u64, v: u64) -> Self {
        SecurityItem {
            id,
            value: CborValue::uint(v),
        }
    }

    /// An item with a byte string value.
    pub fn bytes(id: u64, data: &[u8]) -> Self {
        SecurityItem {
            id,
            value: CborValue::bytes(data),
        }
    }
}

/// The first item with `id` in `items`.
pub fn find(items: &[SecurityItem], id: u64) -> Option<&SecurityItem> {
    items.iter().find(|i| i.id == id)
}

/// An abstract security block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asb {
    /// Block numbers of the security targets (0 = the primary block), at least one, no duplicates.
    pub targets: Vec<u64>,
    /// The security context id (RFC 9173: 1 BIB-HMAC-SHA2, 2 BCB-AES-GCM; negative ids are private use).
    pub context_id: i64,
    /// The security context flags as received; bit 0 is written from `parameters` on encode.
    pub context_flags: u64,
    /// The node that added the security operations.
    pub source: Eid,
    /// The security context parameters, present iff bit 0 of the flags is set.
    pub parameters: Option<Vec<SecurityItem>>,
    /// The security results: one set per target, in the order of `targets`.
    pub results: Vec<Vec<SecurityItem>>,
}

/// Reads a definite array head whose element count cannot exceed what is left of the input (each element takes at
/// least one byte), so a hostile count never sizes an allocation.
fn bounded_array(r: &mut Reader<'_>, field: &'static str) -> Result<usize, AsbError> {
    let (n, at) = r.definite_array(field)?;
    if n > r.remaining() as u64 {
        return Err(AsbError::Cbor(bpv7::DecodeError::Truncated {
            field,
            at: at.max(r.pos()),
        }));
    }
    Ok(n as usize)
}

fn read_items(
    r: &mut Reader<'_>,
    field: &'static str,
    item: &'static str,
    id: &'static str,
    value: &'static str,
) -> Result<Vec<SecurityItem>, AsbError> {
    let n = bounded_array(r, field)?;
    let mut items: Vec<SecurityItem> = Vec::with_capacity(n);
    for _ in 0..n {
        r.array_of(item, "2 ([id, value])", |n| n == 2)?;
        let id = r.uint(id)?;
        if items.iter().any(|i| i.id == id) {
            return Err(AsbError::DuplicateId { field, id });
        }
        let value = CborValue(r.skip_item(value)?);
        items.push(SecurityItem { id, value });
    }
    Ok(items)
}

fn put_items(out: &mut Vec<u8>, items: &[SecurityItem]) {
    cbor::put_array(out, items.len() as u64);
    for i in items {
        cbor::put_array(out, 2);
        cbor::put_uint(out, i.id);
        out.extend_from_slice(i.value.encoded());
    }
}

impl Asb {
    /// Decodes block-type-specific data; every field is checked and nothing may follow the results.
    pub fn decode(data: &Bytes) -> Result<Asb, AsbError> {
        let mut r = Reader::new(data, 0);
        let n = bounded_array(&mut r, "security targets")?;
        if n == 0 {
            return Err(AsbError::NoTargets);
        }
        let mut targets: Vec<u64> = Vec::with_capacity(n);
        for _ in 0..n {
            let t = r.uint("security target")?;
            if targets.contains(&t) {
                return Err(AsbError::DuplicateTarget(t));
            }
            targets.push(t);
        }
        let context_id = r.int("security context id")?;
        let context_flags = r.uint("security context flags")?;
        let source = Eid::decode(&mut r, "security source")?;
        let parameters = if context_flags & FLAG_PARAMETERS_PRESENT != 0 {
            Some(read_items(
                &mut r,
                "security parameters",
                "security parameter",
                "security parameter id",
                "security parameter value",
            )?)
        } else {
            None
        };
        let sets = bounded_array(&mut r, "security results")?;
        if sets != targets.len() {
            return Err(AsbError::ResultCount {
                targets: targets.len(),
                results: sets,
            });
        }
        let mut results = Vec::with_capacity(sets);
        for _ in 0..sets {
            results.push(read_items(
                &mut r,
                "security results",
                "security result",
                "security result id",
                "security result value",
            )?);
        }
        if r.remaining() > 0 {
            return Err(AsbError::TrailingBytes {
                count: r.remaining(),
                at: r.pos(),
            });
        }
        Ok(Asb {
            targets,
            context_id,
            context_flags,
            source,
            parameters,
            results,
        })
    }

    /// The flags as encoded: bit 0 follows `parameters`, the other bits are kept.
    pub fn wire_flags(&self) -> u64 {
        let rest = self.context_flags & !FLAG_PARAMETERS_PRESENT;
        if self.parameters.is_some() {
            rest | FLAG_PARAMETERS_PRESENT
        } else {
            rest
        }
    }

    /// Encodes the block-type-specific data (shortest-form CBOR).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        cbor::put_array(&mut out, self.targets.len() as u64);
        for t in &self.targets {
            cbor::put_uint(&mut out, *t);
        }
        cbor::put_int(&mut out, self.context_id);
        cbor::put_uint(&mut out, self.wire_flags());
        self.source.encode(&mut out);
        if let Some(p) = &self.parameters {
            put_items(&mut out, p);
        }
        cbor::put_array(&mut out, self.results.len() as u64);
        for set in &self.results {
            put_items(&mut out, set);
        }
        out
    }

    /// A parameter by id.
    pub fn parameter(&self, id: u64) -> Option<&SecurityItem> {
        self.parameters.as_deref().and_then(|p| find(p, id))
    }

    /// The results for `target`, if it is one of the security targets.
    pub fn results_for(&self, target: u64) -> Option<&[SecurityItem]> {
        let i = self.targets.iter().position(|t| *t == target)?;
        self.results.get(i).map(Vec::as_slice)
    }

    /// Removes the security operation on `target` (its target entry and its results); false if it had none.
    pub fn remove_target(&mut self, target: u64) -> bool {
        let Some(i) = self.targets.iter().position(|t| *t == target) else {
            return false;
        };
        self.targets.remove(i);
        if i < self.results.len() {
            self.results.remove(i);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Bytes {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
            .into()
    }

    #[test]
    fn decodes_the_rfc9173_a1_bib() {
        let data = hex("810101018202820201828201078203008181820158403bdc69b3a34a2b5d3a8554368bd1e808f606219d2a10a846eae3886ae4ecc83c4ee550fdfb1cc636b904e2f1a73e303dcd4b6ccece003e95e8164dcc89a156e1");
        let asb = Asb::decode(&data).unwrap();
        assert_eq!(asb.targets, vec![1]);
        assert_eq!(asb.context_id, 1);
        assert_eq!(asb.source, Eid::ipn(2, 1));
        assert_eq!(asb.parameter(1).unwrap().value.as_uint(), Some(7));
        assert_eq!(asb.parameter(3).unwrap().value.as_uint(), Some(0));
        let mac = asb.results_for(1).unwrap()[0].value.as_bytes().unwrap();
        assert_eq!(mac.len(), 64);
        assert_eq!(Bytes::from(asb.encode()), data);
    }

    #[test]
    fn structural_errors_are_typed() {
        let ok = hex("8101020082028202018181820141aa");
        assert!(Asb::decode(&ok).is_ok());
        type Check = fn(&AsbError) -> bool;
        let cases: [(&str, Check); 6] = [
            ("8002008202820201 80", |e| matches!(e, AsbError::NoTargets)),
            ("820101020082028202018181820141aa", |e| {
                matches!(e, AsbError::DuplicateTarget(1))
            }),
            ("810102008202820201 80", |e| {
                matches!(
                    e,
                    AsbError::ResultCount {
                        targets: 1,
                        results: 0
                    }
                )
            }),
            ("8101020082028202018182820141aa820141bb", |e| {
                matches!(e, AsbError::DuplicateId { id: 1, .. })
            }),
            ("8101020082028202018181820141aa00", |e| {
                matches!(e, AsbError::TrailingBytes { count: 1, .. })
            }),
            ("81010201820282020181818201", |e| {
                matches!(e, AsbError::Cbor(_))
            }),
        ];
        for (h, check) in cases {
            let e = Asb::decode(&hex(&h.replace(' ', ""))).unwrap_err();
            assert!(check(&e), "{h}: {e:?}");
        }
    }

    #[test]
    fn negative_context_ids_and_hostile_counts() {
        let mut a = Asb::decode(&hex("8101020082028202018181820141aa")).unwrap();
        a.context_id = -7;
        let again = Asb::decode(&Bytes::from(a.encode())).unwrap();
        assert_eq!(again, a);
        // A targets array claiming 2^32 elements in 5 bytes of input.
        let huge = hex("9affffffff01");
        assert!(matches!(Asb::decode(&huge), Err(AsbError::Cbor(_))));
    }
}
