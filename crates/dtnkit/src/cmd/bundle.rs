//! `dtnkit bundle`: inspect bundle files (human-readable or JSON) and make them.
//!
//! A file may hold several bundles back to back (as an LTP block does); `inspect` decodes and prints each, with
//! the content of its BPSec blocks, and with `--key` decrypts and verifies them (`bundle_security`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bpv7::{
    block_type_name, format_dtn_time, AdminRecord, BlockFlags, Bundle, BundleBuilder, BundleFlags,
    CanonicalBlock, CrcType, CreationTimestamp, Eid, StatusItem,
};
use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};

use super::bundle_security::{self, SecurityArgs};
use super::UsageError;

/// Subcommands of `dtnkit bundle`.
// Parsed once per process: the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum BundleCommand {
    /// Decode a bundle file and print every field of every block.
    Inspect(InspectArgs),
    /// Build a bundle and write it to a file.
    Make(MakeArgs),
}

/// Arguments of `dtnkit bundle inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// The bundle file (raw CBOR; several bundles back to back are allowed).
    pub file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// How many payload bytes to show.
    #[arg(long, default_value_t = 64)]
    pub preview: usize,
    /// Key file (hex digits) to decrypt BCBs and verify BIBs with; repeat for several keys. Exit code 1 when a
    /// security block does not decrypt or verify with any of them.
    #[arg(long = "key", value_name = "FILE")]
    pub keys: Vec<PathBuf>,
}

/// CRC choice on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub enum CrcArg {
    /// No CRC.
    None,
    /// CRC-16 X.25.
    #[value(name = "16")]
    Crc16,
    /// CRC-32C.
    #[value(name = "32c")]
    Crc32c,
}

impl From<CrcArg> for CrcType {
    fn from(c: CrcArg) -> CrcType {
        match c {
            CrcArg::None => CrcType::None,
            CrcArg::Crc16 => CrcType::Crc16,
            CrcArg::Crc32c => CrcType::Crc32c,
        }
    }
}

/// Arguments of `dtnkit bundle make`.
#[derive(Args)]
pub struct MakeArgs {
    /// Source EID (dtn:none, dtn://node/demux, ipn:N.S).
    #[arg(long, value_parser = parse_eid)]
    pub src: Eid,
    /// Destination EID.
    #[arg(long, value_parser = parse_eid)]
    pub dst: Eid,
    /// Report-to EID (default: the source).
    #[arg(long, value_parser = parse_eid)]
    pub report_to: Option<Eid>,
    /// Lifetime in milliseconds.
    #[arg(long, default_value_t = 86_400_000)]
    pub lifetime_ms: u64,
    /// Creation time in DTN milliseconds (since 2000-01-01T00:00:00Z); default now. 0 means "no clock" and adds a
    /// bundle age block.
    #[arg(long)]
    pub creation_ms: Option<u64>,
    /// Creation sequence number.
    #[arg(long, default_value_t = 0)]
    pub seq: u64,
    /// CRC type of every block.
    #[arg(long, value_enum, default_value = "32c")]
    pub crc: CrcArg,
    /// Payload text.
    #[arg(long, conflicts_with = "payload_file")]
    pub payload: Option<String>,
    /// Payload file.
    #[arg(long)]
    pub payload_file: Option<PathBuf>,
    /// Add a hop count block with this limit (1-255).
    #[arg(long)]
    pub hop_limit: Option<u64>,
    /// Add a previous node block.
    #[arg(long, value_parser = parse_eid)]
    pub previous_node: Option<Eid>,
    /// Add a bundle age block with this age (ms).
    #[arg(long)]
    pub age_ms: Option<u64>,
    /// Bundle processing flags, comma-separated names (must-not-fragment, report-delivery, ...) or a number.
    #[arg(long, value_delimiter = ',')]
    pub flags: Vec<String>,
    /// Extra extension block: TYPE[,FLAG...]=HEXDATA, e.g. 200,replicate=cafe (repeatable).
    #[arg(long = "ext")]
    pub extensions: Vec<String>,
    /// BPSec blocks to add.
    #[command(flatten)]
    pub security: SecurityArgs,
    /// Output file.
    #[arg(short, long)]
    pub output: PathBuf,
}

pub(super) fn parse_eid(s: &str) -> Result<Eid, String> {
    s.parse::<Eid>()
        .map_err(|e| format!("invalid endpoint ID {s:?}: {e}"))
}

/// Runs a `dtnkit bundle` subcommand.
pub fn run(c: BundleCommand) -> anyhow::Result<()> {
    match c {
        BundleCommand::Inspect(a) => inspect(&a),
        BundleCommand::Make(a) => make(&a),
    }
}

fn usage(msg: String) -> anyhow::Error {
    UsageError(msg).into()
}

fn read_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| usage(format!("{}: cannot read: {e}", path.display())))
}

fn inspect(a: &InspectArgs) -> anyhow::Result<()> {
    let data = Bytes::from(read_file(&a.file)?);
    if data.is_empty() {
        return Err(usage(format!(
            "{}: empty file, expected a CBOR bundle",
            a.file.display()
        )));
    }
    let keys = bundle_security::load_keys(&a.keys)?;
    // Bundles that break only the bundle-age rule (like the RFC 9173 examples) are shown, with a note.
    let limits = bpv7::DecodeLimits {
        require_bundle_age: false,
        ..bpv7::DecodeLimits::default()
    };
    let mut bundles = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let rest = data.slice(pos..);
        let (b, used) = Bundle::decode_prefix_with_limits(&rest, &limits).map_err(|e| {
            usage(format!(
                "{}: bundle {} (starting at byte {pos}) is invalid: {e}",
                a.file.display(),
                bundles.len() + 1
            ))
        })?;
        bundles.push((pos, used, b));
        pos += used;
    }
    let checks: Vec<_> = bundles
        .iter()
        .map(|(_, _, b)| (!keys.is_empty()).then(|| bundle_security::check(b, &keys)))
        .collect();
    if a.json {
        let list: Vec<Value> = bundles
            .iter()
            .zip(&checks)
            .map(|((at, len, b), check)| {
                let mut v = bundle_json(*at, *len, b, a.preview);
                if let Some((c, plain, _)) = check {
                    v["security_check"] = bundle_security::check_json(c);
                    v["checked_payload_len"] = json!(plain.payload().len());
                    let p = plain.payload();
                    let shown = &p[..p.len().min(a.preview)];
                    v["checked_payload_preview_hex"] = json!(hex(shown));
                    v["checked_payload_preview_text"] = json!(as_text(shown));
                }
                v
            })
            .collect();
        let v =
            json!({ "file": a.file.display().to_string(), "size": data.len(), "bundles": list });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{}: {} bytes, {} bundle(s)",
            a.file.display(),
            data.len(),
            bundles.len()
        );
        for (i, ((at, len, b), check)) in bundles.iter().zip(&checks).enumerate() {
            print!("{}", bundle_text(i + 1, *at, *len, b, a.preview));
            if let Some((c, plain, _)) = check {
                print!("{}", bundle_security::check_text(c));
                if plain.payload() != b.payload() {
                    let p = plain.payload();
                    let shown = &p[..p.len().min(a.preview)];
                    let more = if p.len() > shown.len() { " ..." } else { "" };
                    match as_text(shown) {
                        Some(t) => println!("  decrypted payload ({} bytes): {t:?}{more}", p.len()),
                        None => println!(
                            "  decrypted payload ({} bytes, hex): {}{more}",
                            p.len(),
                            hex(shown)
                        ),
                    }
                }
            }
        }
    }
    let failed = checks.iter().flatten().filter(|(_, _, ok)| !ok).count();
    if failed > 0 {
        anyhow::bail!(
            "{}: the security blocks of {failed} bundle(s) did not decrypt or verify with the given keys",
            a.file.display()
        );
    }
    Ok(())
}

fn flag_names(names: Vec<&'static str>, unassigned: u64) -> Value {
    let mut v: Vec<Value> = names.into_iter().map(Value::from).collect();
    if unassigned != 0 {
        v.push(Value::from(format!("unassigned {unassigned:#x}")));
    }
    Value::Array(v)
}

fn crc_json(t: CrcType, value: u32) -> Value {
    if t.is_none() {
        json!({ "type": t.name() })
    } else {
        json!({ "type": t.name(), "value": format!("{value:#0w$x}", w = 2 + 2 * t.size()) })
    }
}

pub(super) fn hex(data: &[u8]) -> String {
    data.iter()
        .fold(String::with_capacity(data.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Printable text if the bytes are UTF-8 without control characters (other than newline/tab).
fn as_text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data)
        .ok()
        .filter(|s| s.chars().all(|c| !c.is_control() || c == '\n' || c == '\t'))
}

/// Decoded meaning of a known extension block, as text.
fn block_content(b: &CanonicalBlock) -> Option<String> {
    if let Some(r) = b.as_previous_node() {
        return Some(r.map_or_else(|e| format!("invalid: {e}"), |e| e.to_string()));
    }
    if let Some(r) = b.as_bundle_age() {
        return Some(r.map_or_else(|e| format!("invalid: {e}"), |ms| format!("{ms} ms")));
    }
    if let Some(r) = b.as_hop_count() {
        return Some(r.map_or_else(
            |e| format!("invalid: {e}"),
            |h| format!("{} of limit {}", h.count, h.limit),
        ));
    }
    None
}

fn status_item_text(name: &str, s: &StatusItem) -> Option<String> {
    s.asserted.then(|| match s.time_ms {
        Some(t) => format!("{name} at {t} ({})", format_dtn_time(t)),
        None => name.to_owned(),
    })
}

fn admin_json(b: &Bundle) -> Option<Value> {
    if !b.is_admin_record() {
        return None;
    }
    Some(match AdminRecord::decode(&b.payload()) {
        Ok(AdminRecord::StatusReport(sr)) => {
            let item = |s: &StatusItem| json!({ "asserted": s.asserted, "time_ms": s.time_ms });
            json!({
                "record_type": 1,
                "status_report": {
                    "received": item(&sr.received),
                    "forwarded": item(&sr.forwarded),
                    "delivered": item(&sr.delivered),
                    "deleted": item(&sr.deleted),
                    "reason_code": sr.reason.code(),
                    "reason": sr.reason.description(),
                    "subject_source": sr.source.to_string(),
                    "subject_creation_ms": sr.timestamp.dtn_time_ms,
                    "subject_sequence": sr.timestamp.sequence,
                    "subject_fragment": sr.fragment.map(|(o, l)| json!({ "offset": o, "length": l })),
                }
            })
        }
        Ok(AdminRecord::Other {
            record_type,
            content,
        }) => {
            json!({ "record_type": record_type, "content_hex": hex(&content) })
        }
        Err(e) => json!({ "error": e.to_string() }),
    })
}

fn admin_text(b: &Bundle) -> Option<String> {
    if !b.is_admin_record() {
        return None;
    }
    Some(match AdminRecord::decode(&b.payload()) {
        Ok(AdminRecord::StatusReport(sr)) => {
            let asserted: Vec<String> = [
                ("received", &sr.received),
                ("forwarded", &sr.forwarded),
                ("delivered", &sr.delivered),
                ("deleted", &sr.deleted),
            ]
            .iter()
            .filter_map(|(n, s)| status_item_text(n, s))
            .collect();
            let mut s = format!(
                "status report: {} — reason {} ({}) — subject {} {}",
                if asserted.is_empty() {
                    "nothing asserted".to_owned()
                } else {
                    asserted.join(", ")
                },
                sr.reason.code(),
                sr.reason.description(),
                sr.source,
                sr.timestamp
            );
            if let Some((o, l)) = sr.fragment {
                let _ = write!(s, " fragment {o}+{l}");
            }
            s
        }
        Ok(AdminRecord::Other {
            record_type,
            content,
        }) => {
            format!(
                "administrative record type {record_type}, content {}",
                hex(&content)
            )
        }
        Err(e) => format!("invalid administrative record: {e}"),
    })
}

fn bundle_json(at: usize, len: usize, b: &Bundle, preview: usize) -> Value {
    let p = b.primary();
    let flags = p.wire_flags();
    let blocks: Vec<Value> = b
        .blocks()
        .iter()
        .map(|blk| {
            let data = blk.data();
            let shown = &data[..data.len().min(preview)];
            json!({
                "number": blk.number(),
                "type": blk.block_type(),
                "type_name": block_type_name(blk.block_type()),
                "flags": blk.flags().bits(),
                "flag_names": flag_names(blk.flags().names(), blk.flags().unassigned_bits()),
                "crc": crc_json(blk.crc_type(), blk.received_crc()),
                "data_len": data.len(),
                "content": block_content(blk),
                "security": bundle_security::block_json(b, blk),
                "data_preview_hex": hex(shown),
                "data_preview_text": as_text(shown),
            })
        })
        .collect();
    let created = p.timestamp.dtn_time_ms;
    json!({
        "offset": at,
        "length": len,
        "id": b.id().to_string(),
        "primary": {
            "version": 7,
            "flags": flags.bits(),
            "flag_names": flag_names(flags.names(), flags.unassigned_bits()),
            "crc": crc_json(p.crc_type, p.received_crc()),
            "destination": p.destination.to_string(),
            "source": p.source.to_string(),
            "report_to": p.report_to.to_string(),
            "creation_ms": created,
            "creation_utc": (created != 0).then(|| format_dtn_time(created)),
            "sequence": p.timestamp.sequence,
            "lifetime_ms": p.lifetime_ms,
            "expires_utc": (created != 0).then(|| format_dtn_time(created.saturating_add(p.lifetime_ms))),
            "fragment": p.fragment.map(|f| json!({ "offset": f.offset, "total_adu_length": f.total_adu_len })),
        },
        "blocks": blocks,
        "payload_len": b.payload().len(),
        "admin_record": admin_json(b),
        "non_shortest_cbor": b.had_non_shortest_encoding(),
        "missing_bundle_age": b.validate().is_err(),
    })
}

fn bundle_text(index: usize, at: usize, len: usize, b: &Bundle, preview: usize) -> String {
    let p = b.primary();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "bundle {index} (bytes {at}..{}, {len} bytes), id {}",
        at + len,
        b.id()
    );
    let crc = |t: CrcType, v: u32| {
        if t.is_none() {
            "no CRC".to_owned()
        } else {
            format!("{t} {v:#0w$x}", w = 2 + 2 * t.size())
        }
    };
    let _ = writeln!(
        s,
        "  primary block: version 7, {}",
        crc(p.crc_type, p.received_crc())
    );
    let _ = writeln!(s, "    flags:        {}", p.wire_flags());
    let _ = writeln!(s, "    destination:  {}", p.destination);
    let _ = writeln!(s, "    source:       {}", p.source);
    let _ = writeln!(s, "    report-to:    {}", p.report_to);
    let created = p.timestamp.dtn_time_ms;
    if created == 0 {
        let _ = writeln!(
            s,
            "    created:      0 (source had no clock), sequence {}",
            p.timestamp.sequence
        );
    } else {
        let _ = writeln!(
            s,
            "    created:      {created} ms DTN = {}, sequence {}",
            format_dtn_time(created),
            p.timestamp.sequence
        );
    }
    let _ = write!(s, "    lifetime:     {} ms", p.lifetime_ms);
    if created != 0 {
        let _ = write!(
            s,
            " (expires {})",
            format_dtn_time(created.saturating_add(p.lifetime_ms))
        );
    }
    s.push('\n');
    if let Some(f) = p.fragment {
        let _ = writeln!(
            s,
            "    fragment:     offset {} of total ADU length {}",
            f.offset, f.total_adu_len
        );
    }
    for blk in b.blocks() {
        let _ = writeln!(
            s,
            "  block {}: {} (type {}), flags {}, {}, {} bytes of data",
            blk.number(),
            block_type_name(blk.block_type()),
            blk.block_type(),
            blk.flags(),
            crc(blk.crc_type(), blk.received_crc()),
            blk.data().len()
        );
        if let Some(c) = block_content(blk) {
            let _ = writeln!(s, "    content: {c}");
        } else if let Some(lines) = bundle_security::block_text(b, blk) {
            for l in lines {
                let _ = writeln!(s, "    {l}");
            }
        } else {
            let data = blk.data();
            let shown = &data[..data.len().min(preview)];
            let more = if data.len() > shown.len() { " ..." } else { "" };
            match as_text(shown) {
                Some(t) if !shown.is_empty() => {
                    let _ = writeln!(s, "    data: {t:?}{more}");
                }
                _ if !shown.is_empty() => {
                    let _ = writeln!(s, "    data (hex): {}{more}", hex(shown));
                }
                _ => {}
            }
        }
    }
    if let Some(a) = admin_text(b) {
        let _ = writeln!(s, "  {a}");
    }
    if b.validate().is_err() {
        let _ = writeln!(
            s,
            "  note: creation time 0 but no bundle age block (RFC 9171 4.3.1 requires one; a node refuses this bundle)"
        );
    }
    if b.had_non_shortest_encoding() {
        let _ = writeln!(
            s,
            "  note: the encoding uses non-shortest CBOR integers (accepted)"
        );
    }
    s
}

fn parse_flags(list: &[String]) -> anyhow::Result<BundleFlags> {
    let mut flags = BundleFlags::empty();
    for item in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if let Some(f) = BundleFlags::from_name(item) {
            flags |= f;
        } else if let Some(n) = parse_number(item) {
            flags |= BundleFlags(n);
        } else {
            let names: Vec<&str> = BundleFlags::NAMED.iter().map(|(_, n)| *n).collect();
            return Err(usage(format!(
                "--flags: unknown flag {item:?}; expected a number or one of {}",
                names.join(", ")
            )));
        }
    }
    Ok(flags)
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

/// Parses `TYPE[,FLAG...]=HEX`.
fn parse_ext(spec: &str) -> anyhow::Result<(u64, BlockFlags, Bytes)> {
    let bad = |why: &str| {
        usage(format!(
            "--ext {spec:?}: {why}; expected TYPE[,FLAG...]=HEXDATA, e.g. 200,replicate=cafe"
        ))
    };
    let (head, data) = spec.split_once('=').ok_or_else(|| bad("missing '='"))?;
    let mut parts = head.split(',');
    let block_type = parts
        .next()
        .and_then(parse_number)
        .ok_or_else(|| bad("bad block type"))?;
    if matches!(block_type, 0 | 1) {
        return Err(bad(
            "block type 0 and 1 (payload) cannot be added as extension blocks",
        ));
    }
    let mut flags = BlockFlags::empty();
    for f in parts {
        flags |= BlockFlags::from_name(f)
            .or_else(|| parse_number(f).map(BlockFlags))
            .ok_or_else(|| {
                let names: Vec<&str> = BlockFlags::NAMED.iter().map(|(_, n)| *n).collect();
                bad(&format!(
                    "unknown block flag {f:?} (known: {})",
                    names.join(", ")
                ))
            })?;
    }
    let data = parse_hex(data).ok_or_else(|| bad("data is not an even number of hex digits"))?;
    Ok((block_type, flags, Bytes::from(data)))
}

fn make(a: &MakeArgs) -> anyhow::Result<()> {
    let payload = match (&a.payload, &a.payload_file) {
        (Some(t), _) => Bytes::from(t.clone().into_bytes()),
        (None, Some(f)) => Bytes::from(read_file(f)?),
        (None, None) => {
            return Err(usage(
                "one of --payload TEXT or --payload-file FILE is required".into(),
            ))
        }
    };
    let creation_ms = match a.creation_ms {
        Some(ms) => ms,
        None => {
            let unix_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            bpv7::dtn_time_from_unix_ms(unix_ms)
        }
    };
    let mut builder = BundleBuilder::new(a.src.clone(), a.dst.clone())
        .report_to(a.report_to.clone().unwrap_or_else(|| a.src.clone()))
        .creation(CreationTimestamp::new(creation_ms, a.seq))
        .lifetime_ms(a.lifetime_ms)
        .crc_type(a.crc.into())
        .flags(parse_flags(&a.flags)?)
        .payload(payload);
    if let Some(n) = &a.previous_node {
        builder = builder.previous_node(n.clone());
    }
    if let Some(age) = a.age_ms {
        builder = builder.bundle_age_ms(age);
    }
    if let Some(limit) = a.hop_limit {
        if !(1..=255).contains(&limit) {
            return Err(usage(format!(
                "--hop-limit {limit}: must be 1..=255 (RFC 9171 4.4.3)"
            )));
        }
        builder = builder.hop_limit(limit);
    }
    for e in &a.extensions {
        let (t, f, d) = parse_ext(e)?;
        builder = builder.extension_block(t, f, d);
    }
    let mut bundle = builder
        .build()
        .map_err(|e| usage(format!("cannot build the bundle: {e}")))?;
    bundle_security::secure(&mut bundle, &a.security)?;
    let wire = bundle.encode();
    std::fs::write(&a.output, &wire)
        .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", a.output.display()))?;
    println!(
        "wrote {} bytes to {} (bundle {})",
        wire.len(),
        a.output.display(),
        bundle.id()
    );
    Ok(())
}
