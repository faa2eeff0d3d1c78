//! LV (§5.1.8) and TLV (§5.1.9, §5.4) encodings.

use super::codec::{put_uint, Reader};
use super::header::min_octets;
use super::{
    ConditionCode, DecodeError, EncodeError, FaultHandler, FilestoreAction, FilestoreRequest,
    FilestoreResponse, Tlv,
};

/// TLV type octets (§5.4, Table 5-15).
pub(super) mod tlv_type {
    pub const FILESTORE_REQUEST: u8 = 0x00;
    pub const FILESTORE_RESPONSE: u8 = 0x01;
    pub const MESSAGE_TO_USER: u8 = 0x02;
    pub const FAULT_HANDLER_OVERRIDE: u8 = 0x04;
    pub const FLOW_LABEL: u8 = 0x05;
    pub const ENTITY_ID: u8 = 0x06;

    /// Whether the type octet is one [`super::Tlv`] has a variant for.
    pub fn is_known(t: u8) -> bool {
        matches!(t, 0x00 | 0x01 | 0x02 | 0x04 | 0x05 | 0x06)
    }
}

impl FilestoreAction {
    /// The action with this 4-bit code (Table 5-16), `None` for 9..=15 and above.
    pub fn from_u8(code: u8) -> Option<Self> {
        use FilestoreAction::*;
        Some(match code {
            0 => CreateFile,
            1 => DeleteFile,
            2 => RenameFile,
            3 => AppendFile,
            4 => ReplaceFile,
            5 => CreateDirectory,
            6 => RemoveDirectory,
            7 => DenyFile,
            8 => DenyDirectory,
            _ => return None,
        })
    }

    /// The 4-bit action code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl FaultHandler {
    /// The handler with this 4-bit code (Table 5-19), `None` for 0 and 5..=15 and above.
    pub fn from_u8(code: u8) -> Option<Self> {
        Some(match code {
            1 => FaultHandler::Cancel,
            2 => FaultHandler::Suspend,
            3 => FaultHandler::Ignore,
            4 => FaultHandler::Abandon,
            _ => return None,
        })
    }

    /// The 4-bit handler code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl Tlv {
    /// The TLV type octet.
    pub fn tlv_type(&self) -> u8 {
        match self {
            Tlv::FilestoreRequest(_) => tlv_type::FILESTORE_REQUEST,
            Tlv::FilestoreResponse(_) => tlv_type::FILESTORE_RESPONSE,
            Tlv::MessageToUser(_) => tlv_type::MESSAGE_TO_USER,
            Tlv::FaultHandlerOverride { .. } => tlv_type::FAULT_HANDLER_OVERRIDE,
            Tlv::FlowLabel(_) => tlv_type::FLOW_LABEL,
            Tlv::EntityId(_) => tlv_type::ENTITY_ID,
            Tlv::Unknown { tlv_type, .. } => *tlv_type,
        }
    }

    /// Octets of the encoded TLV (type, length and value); an Entity ID TLV's value is
    /// `entity_id_len` octets wide, or as many as the id needs if it is wider.
    pub fn encoded_len(&self, entity_id_len: u8) -> usize {
        2 + self.value_len(entity_id_len)
    }

    fn value_len(&self, entity_id_len: u8) -> usize {
        match self {
            Tlv::FilestoreRequest(r) => {
                1 + 1 + r.first.len() + r.second.as_ref().map_or(0, |s| 1 + s.len())
            }
            Tlv::FilestoreResponse(r) => response_value_len(r),
            Tlv::MessageToUser(v) | Tlv::FlowLabel(v) | Tlv::Unknown { value: v, .. } => v.len(),
            Tlv::FaultHandlerOverride { .. } => 1,
            Tlv::EntityId(id) => usize::from(entity_id_width(*id, entity_id_len)),
        }
    }
}

fn tlv_name(t: u8) -> &'static str {
    match t {
        tlv_type::FILESTORE_REQUEST => "filestore request",
        tlv_type::FILESTORE_RESPONSE => "filestore response",
        tlv_type::MESSAGE_TO_USER => "message to user",
        tlv_type::FAULT_HANDLER_OVERRIDE => "fault handler override",
        tlv_type::FLOW_LABEL => "flow label",
        tlv_type::ENTITY_ID => "entity id",
        _ => "unknown",
    }
}

/// Reads an LV.
pub(super) fn decode_lv(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<u8>, DecodeError> {
    let len = r.u8(field)?;
    Ok(r.take(usize::from(len), field)?.to_vec())
}

/// Appends an LV whose value is at most 255 octets (checked by the caller).
pub(super) fn put_lv(out: &mut Vec<u8>, v: &[u8]) {
    debug_assert!(v.len() <= 255);
    out.push(v.len() as u8);
    out.extend_from_slice(v);
}

/// `LvTooLong` if `v` does not fit an LV.
pub(super) fn check_lv(field: &'static str, v: &[u8]) -> Result<(), EncodeError> {
    if v.len() > 255 {
        return Err(EncodeError::LvTooLong {
            field,
            len: v.len(),
        });
    }
    Ok(())
}

/// Reads one TLV of any type; unknown types are kept as [`Tlv::Unknown`].
pub(super) fn decode_tlv(r: &mut Reader<'_>) -> Result<Tlv, DecodeError> {
    let t = r.u8("TLV type")?;
    let len = r.u8("TLV length")?;
    let value = r.take(usize::from(len), tlv_name(t))?;
    let mut v = Reader::new(value);
    let tlv = match t {
        tlv_type::FILESTORE_REQUEST => {
            let b = v.u8("filestore request action")?;
            let action = filestore_action(b >> 4, "filestore request action")?;
            let first = decode_lv(&mut v, "filestore request first file name")?;
            let second = if action.has_second_name() {
                Some(decode_lv(&mut v, "filestore request second file name")?)
            } else {
                None
            };
            v.finish("filestore request")?;
            Tlv::FilestoreRequest(FilestoreRequest {
                action,
                first,
                second,
            })
        }
        tlv_type::FILESTORE_RESPONSE => {
            let b = v.u8("filestore response action")?;
            let action = filestore_action(b >> 4, "filestore response action")?;
            let first = decode_lv(&mut v, "filestore response first file name")?;
            let second = if action.has_second_name() {
                Some(decode_lv(&mut v, "filestore response second file name")?)
            } else {
                None
            };
            let message = decode_lv(&mut v, "filestore response message")?;
            v.finish("filestore response")?;
            Tlv::FilestoreResponse(FilestoreResponse {
                action,
                status: b & 0x0F,
                first,
                second,
                message,
            })
        }
        tlv_type::MESSAGE_TO_USER => Tlv::MessageToUser(value.to_vec()),
        tlv_type::FLOW_LABEL => Tlv::FlowLabel(value.to_vec()),
        tlv_type::FAULT_HANDLER_OVERRIDE => {
            let [b] = value else {
                return Err(DecodeError::InvalidTlvLength {
                    tlv: "fault handler override",
                    len,
                });
            };
            let condition =
                ConditionCode::from_u8(b >> 4).ok_or(DecodeError::ReservedConditionCode {
                    field: "fault handler override condition",
                    value: b >> 4,
                })?;
            let handler = FaultHandler::from_u8(b & 0x0F).ok_or(DecodeError::InvalidValue {
                field: "fault handler code",
                value: b & 0x0F,
            })?;
            Tlv::FaultHandlerOverride { condition, handler }
        }
        tlv_type::ENTITY_ID => {
            if !(1..=8).contains(&len) {
                return Err(DecodeError::InvalidTlvLength {
                    tlv: "entity id",
                    len,
                });
            }
            Tlv::EntityId(v.uint(usize::from(len), "entity id")?)
        }
        _ => Tlv::Unknown {
            tlv_type: t,
            value: value.to_vec(),
        },
    };
    Ok(tlv)
}

fn filestore_action(code: u8, field: &'static str) -> Result<FilestoreAction, DecodeError> {
    FilestoreAction::from_u8(code).ok_or(DecodeError::InvalidValue { field, value: code })
}

/// Checks a TLV can be encoded (and decodes back to itself), without writing anything.
pub(super) fn validate_tlv(tlv: &Tlv, entity_id_len: u8) -> Result<(), EncodeError> {
    match tlv {
        Tlv::FilestoreRequest(r) => {
            check_names("filestore request", r.action, &r.first, &r.second)?
        }
        Tlv::FilestoreResponse(r) => return validate_response(r),
        Tlv::Unknown { tlv_type, .. } if tlv_type::is_known(*tlv_type) => {
            return Err(EncodeError::KnownTlvTypeAsUnknown {
                tlv_type: *tlv_type,
            })
        }
        Tlv::MessageToUser(_)
        | Tlv::EntityId(_)
        | Tlv::FlowLabel(_)
        | Tlv::FaultHandlerOverride { .. }
        | Tlv::Unknown { .. } => {}
    }
    let len = tlv.value_len(entity_id_len);
    if len > 255 {
        return Err(EncodeError::TlvTooLong {
            tlv: tlv_name(tlv.tlv_type()),
            len,
        });
    }
    Ok(())
}

/// Appends a TLV already checked by [`validate_tlv`].
pub(super) fn write_tlv(out: &mut Vec<u8>, tlv: &Tlv, entity_id_len: u8) {
    out.push(tlv.tlv_type());
    // validate_tlv checked the value fits in 255 octets, and every LV inside it.
    out.push(tlv.value_len(entity_id_len) as u8);
    match tlv {
        Tlv::FilestoreRequest(r) => {
            out.push(r.action.code() << 4);
            put_lv(out, &r.first);
            if let Some(s) = &r.second {
                put_lv(out, s);
            }
        }
        Tlv::FilestoreResponse(r) => write_response_value(out, r),
        Tlv::MessageToUser(v) | Tlv::FlowLabel(v) | Tlv::Unknown { value: v, .. } => {
            out.extend_from_slice(v)
        }
        Tlv::FaultHandlerOverride { condition, handler } => {
            out.push((condition.code() << 4) | handler.code())
        }
        Tlv::EntityId(id) => put_uint(out, *id, entity_id_width(*id, entity_id_len)),
    }
}

fn check_names(
    tlv: &'static str,
    action: FilestoreAction,
    first: &[u8],
    second: &Option<Vec<u8>>,
) -> Result<(), EncodeError> {
    if action.has_second_name() != second.is_some() {
        return Err(EncodeError::SecondNameMismatch {
            tlv,
            action: action.code(),
            has_second: second.is_some(),
        });
    }
    check_lv("first file name", first)?;
    if let Some(second) = second {
        check_lv("second file name", second)?;
    }
    Ok(())
}

/// Value octets of a filestore response TLV.
fn response_value_len(r: &FilestoreResponse) -> usize {
    1 + 1 + r.first.len() + r.second.as_ref().map_or(0, |s| 1 + s.len()) + 1 + r.message.len()
}

/// Octets of an encoded filestore response TLV.
pub(super) fn response_len(r: &FilestoreResponse) -> usize {
    2 + response_value_len(r)
}

/// Checks a filestore response TLV can be encoded.
pub(super) fn validate_response(r: &FilestoreResponse) -> Result<(), EncodeError> {
    check_names("filestore response", r.action, &r.first, &r.second)?;
    if r.status > 0x0F {
        return Err(EncodeError::FieldOutOfRange {
            field: "filestore response status",
            value: r.status,
            max: 0x0F,
        });
    }
    check_lv("filestore message", &r.message)?;
    let len = response_value_len(r);
    if len > 255 {
        return Err(EncodeError::TlvTooLong {
            tlv: "filestore response",
            len,
        });
    }
    Ok(())
}

/// Appends a filestore response TLV already checked by [`validate_response`].
pub(super) fn write_response(out: &mut Vec<u8>, r: &FilestoreResponse) {
    out.push(tlv_type::FILESTORE_RESPONSE);
    out.push(response_value_len(r) as u8);
    write_response_value(out, r);
}

fn write_response_value(out: &mut Vec<u8>, r: &FilestoreResponse) {
    out.push((r.action.code() << 4) | r.status);
    put_lv(out, &r.first);
    if let Some(s) = &r.second {
        put_lv(out, s);
    }
    put_lv(out, &r.message);
}

/// Octets of the value of an Entity ID TLV (a fault location or a Metadata option) in a PDU
/// whose header has `entity_id_len`-octet ids: that width, like the header's ids, unless `id`
/// needs more. The decoder accepts any width 1..=8 (the TLV's length says which), so every
/// decoded id encodes again, if need be wider than the header's.
pub(crate) fn entity_id_width(id: u64, entity_id_len: u8) -> u8 {
    entity_id_len.max(min_octets(id))
}

/// Octets of an Entity ID TLV carrying `id`.
pub(super) fn entity_id_tlv_len(id: u64, entity_id_len: u8) -> usize {
    2 + usize::from(entity_id_width(id, entity_id_len))
}

/// Appends an Entity ID TLV carrying `id`.
pub(super) fn write_entity_id_tlv(out: &mut Vec<u8>, id: u64, entity_id_len: u8) {
    let width = entity_id_width(id, entity_id_len);
    out.push(tlv_type::ENTITY_ID);
    out.push(width);
    put_uint(out, id, width);
}
