//! One record of the LTP segment CSV log (`docs/ltp-segment-log.md`), parsed without allocating.
//!
//! Columns are located by name from the header line, so extra columns added by a later format revision are
//! ignored and a reordering does not silently shift values. Every field is `Copy`: a parsed row does not borrow
//! the line buffer, which lets the k-way merge keep one pending row per input without copying strings.

use crate::Error;

/// Whether a row is a sent segment, a received segment or an engine event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Segment sent (`tx`).
    Tx,
    /// Segment received (`rx`).
    Rx,
    /// Engine event (`ev`).
    Ev,
}

/// The `seg_type` column: a segment type or an engine event.
#[allow(missing_docs)] // names mirror the log format table one to one
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegType {
    Rd,
    RdCp,
    RdCpEorp,
    RdCpEorpEob,
    Gd,
    GdEob,
    Rs,
    Ra,
    Cs,
    Cas,
    Cr,
    Car,
    TxStart,
    TxEnd,
    RxStart,
    RxBlock,
    RxEnd,
    RtoCp,
    RtoRs,
    RtoCx,
    LinkDown,
    LinkUp,
    /// A name this analyzer does not know (a newer log revision); counted, otherwise ignored.
    Other,
}

impl SegType {
    fn parse(s: &str) -> SegType {
        match s {
            "RD" => SegType::Rd,
            "RD_CP" => SegType::RdCp,
            "RD_CP_EORP" => SegType::RdCpEorp,
            "RD_CP_EORP_EOB" => SegType::RdCpEorpEob,
            "GD" => SegType::Gd,
            "GD_EOB" => SegType::GdEob,
            "RS" => SegType::Rs,
            "RA" => SegType::Ra,
            "CS" => SegType::Cs,
            "CAS" => SegType::Cas,
            "CR" => SegType::Cr,
            "CAR" => SegType::Car,
            "TX_START" => SegType::TxStart,
            "TX_END" => SegType::TxEnd,
            "RX_START" => SegType::RxStart,
            "RX_BLOCK" => SegType::RxBlock,
            "RX_END" => SegType::RxEnd,
            "RTO_CP" => SegType::RtoCp,
            "RTO_RS" => SegType::RtoRs,
            "RTO_CX" => SegType::RtoCx,
            "LINK_DOWN" => SegType::LinkDown,
            "LINK_UP" => SegType::LinkUp,
            _ => SegType::Other,
        }
    }

    /// True for red data segments (checkpoint or not).
    pub fn is_red_data(self) -> bool {
        matches!(
            self,
            SegType::Rd | SegType::RdCp | SegType::RdCpEorp | SegType::RdCpEorpEob
        )
    }

    /// True for red data segments flagged as checkpoints.
    pub fn is_checkpoint(self) -> bool {
        matches!(
            self,
            SegType::RdCp | SegType::RdCpEorp | SegType::RdCpEorpEob
        )
    }

    /// True for green data segments.
    pub fn is_green_data(self) -> bool {
        matches!(self, SegType::Gd | SegType::GdEob)
    }
}

/// The `outcome` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outcome {
    /// Empty field.
    #[default]
    None,
    /// `OK`.
    Ok,
    /// A cancel reason code (`USR_CNCLD`, `RXMTCYCEXC`, ...).
    Cancelled(CancelReason),
}

/// Cancel reasons of RFC 5326 section 3.2.4 as the log names them.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    UserCancelled,
    Unreachable,
    RetransmissionLimitExceeded,
    Miscolored,
    SystemCancelled,
    RetransmissionCyclesExceeded,
    /// A reason name this analyzer does not know.
    Other,
}

impl CancelReason {
    /// The log's name of the reason.
    pub fn name(self) -> &'static str {
        match self {
            CancelReason::UserCancelled => "USR_CNCLD",
            CancelReason::Unreachable => "UNREACH",
            CancelReason::RetransmissionLimitExceeded => "RLEXC",
            CancelReason::Miscolored => "MISCOLORED",
            CancelReason::SystemCancelled => "SYS_CNCLD",
            CancelReason::RetransmissionCyclesExceeded => "RXMTCYCEXC",
            CancelReason::Other => "OTHER",
        }
    }
}

impl Outcome {
    fn parse(s: &str) -> Outcome {
        match s {
            "" => Outcome::None,
            "OK" => Outcome::Ok,
            "USR_CNCLD" => Outcome::Cancelled(CancelReason::UserCancelled),
            "UNREACH" => Outcome::Cancelled(CancelReason::Unreachable),
            "RLEXC" => Outcome::Cancelled(CancelReason::RetransmissionLimitExceeded),
            "MISCOLORED" => Outcome::Cancelled(CancelReason::Miscolored),
            "SYS_CNCLD" => Outcome::Cancelled(CancelReason::SystemCancelled),
            "RXMTCYCEXC" => Outcome::Cancelled(CancelReason::RetransmissionCyclesExceeded),
            _ => Outcome::Cancelled(CancelReason::Other),
        }
    }

    /// `OK`, a reason name, or the empty string.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::None => "",
            Outcome::Ok => "OK",
            Outcome::Cancelled(r) => r.name(),
        }
    }
}

/// One parsed log record (all numeric columns of the format).
#[allow(missing_docs)] // field names and meanings are those of the format table
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRow {
    pub time_ns: u128,
    pub dir: Dir,
    pub local_engine: u64,
    pub remote_engine: u64,
    pub session_originator: u64,
    pub session_number: u64,
    pub seg_type: SegType,
    pub offset: u64,
    pub length: u64,
    pub checkpoint_serial: u64,
    pub report_serial: u64,
    pub claims: u64,
    pub retransmission: bool,
    pub datagram_len: u64,
    pub outcome: Outcome,
}

/// Column names of the format, in the documented order.
pub const COLUMNS: [&str; 15] = [
    "time_ns",
    "dir",
    "local_engine",
    "remote_engine",
    "session_originator",
    "session_number",
    "seg_type",
    "offset",
    "length",
    "checkpoint_serial",
    "report_serial",
    "claims",
    "retransmission",
    "datagram_len",
    "outcome",
];

/// Maps the documented columns to their positions in one file's header.
#[derive(Debug, Clone)]
pub struct Header {
    /// `pos[i]` = index in the line of `COLUMNS[i]`.
    pos: [usize; 15],
    /// Number of fields a line must have at least.
    min_fields: usize,
}

impl Header {
    /// Parses a header line; every documented column must be present.
    pub fn parse(line: &str) -> Result<Header, String> {
        let names: Vec<&str> = line.trim_end().split(',').map(str::trim).collect();
        let mut pos = [0usize; 15];
        for (i, col) in COLUMNS.iter().enumerate() {
            pos[i] = names.iter().position(|n| n == col).ok_or_else(|| {
                format!("header has no `{col}` column (expected the columns of docs/ltp-segment-log.md)")
            })?;
        }
        let min_fields = pos.iter().copied().max().unwrap_or(0) + 1;
        Ok(Header { pos, min_fields })
    }

    /// Parses one data line. Fields are split into a fixed array: no allocation per line.
    pub fn parse_row(&self, line: &str) -> Result<SegmentRow, String> {
        let line = line.trim_end_matches(['\n', '\r']);
        let mut fields = [""; 32];
        let mut n = 0;
        for f in line.split(',') {
            if n == fields.len() {
                return Err(format!("more than {} fields", fields.len()));
            }
            fields[n] = f;
            n += 1;
        }
        if n < self.min_fields {
            return Err(format!("{n} fields, expected at least {}", self.min_fields));
        }
        let get = |i: usize| fields[self.pos[i]];
        let num = |i: usize| -> Result<u64, String> {
            get(i).parse::<u64>().map_err(|_| {
                format!(
                    "column `{}` = {:?}: expected an unsigned integer",
                    COLUMNS[i],
                    get(i)
                )
            })
        };
        let time_ns = get(0).parse::<u128>().map_err(|_| {
            format!(
                "column `time_ns` = {:?}: expected an unsigned integer",
                get(0)
            )
        })?;
        let dir = match get(1) {
            "tx" => Dir::Tx,
            "rx" => Dir::Rx,
            "ev" => Dir::Ev,
            other => return Err(format!("column `dir` = {other:?}: expected tx, rx or ev")),
        };
        let retransmission = match get(12) {
            "0" | "" => false,
            "1" => true,
            other => {
                return Err(format!(
                    "column `retransmission` = {other:?}: expected 0 or 1"
                ))
            }
        };
        Ok(SegmentRow {
            time_ns,
            dir,
            local_engine: num(2)?,
            remote_engine: num(3)?,
            session_originator: num(4)?,
            session_number: num(5)?,
            seg_type: SegType::parse(get(6)),
            offset: num(7)?,
            length: num(8)?,
            checkpoint_serial: num(9)?,
            report_serial: num(10)?,
            claims: num(11)?,
            retransmission,
            datagram_len: num(13)?,
            outcome: Outcome::parse(get(14)),
        })
    }
}

/// Reads rows from one CSV source line by line, reusing one line buffer.
pub struct RowReader<R> {
    name: String,
    input: R,
    header: Option<Header>,
    line: Vec<u8>,
    line_no: u64,
    /// Lines that could not be parsed (skipped).
    pub bad_lines: u64,
    /// The first parse problem, with file and line, for the report.
    pub first_bad: Option<String>,
}

impl<R: std::io::BufRead> RowReader<R> {
    /// Wraps a reader; `name` labels it in messages.
    pub fn new(name: impl Into<String>, input: R) -> Self {
        RowReader {
            name: name.into(),
            input,
            header: None,
            line: Vec::with_capacity(256),
            line_no: 0,
            bad_lines: 0,
            first_bad: None,
        }
    }

    /// The source's label.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next well-formed row, `None` at the end. Malformed lines (a truncated last line of a killed node,
    /// say) are counted and skipped; a missing or wrong header and I/O errors are errors.
    pub fn next_row(&mut self) -> Result<Option<SegmentRow>, Error> {
        loop {
            self.line.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.line)
                .map_err(|e| Error::Io(format!("{}: {e}", self.name)))?;
            if n == 0 {
                if self.header.is_none() {
                    return Err(Error::Format(format!(
                        "{}: empty file (no header line)",
                        self.name
                    )));
                }
                return Ok(None);
            }
            self.line_no += 1;
            // A corrupted byte makes one malformed line, not a failed analysis.
            let parsed = std::str::from_utf8(&self.line).map_err(|_| "not UTF-8".to_string());
            if parsed.as_ref().is_ok_and(|l| l.trim().is_empty()) {
                continue;
            }
            match (&self.header, parsed) {
                (None, Ok(line)) => {
                    let h = Header::parse(line)
                        .map_err(|m| Error::Format(format!("{} line 1: {m}", self.name)))?;
                    self.header = Some(h);
                }
                (None, Err(m)) => {
                    return Err(Error::Format(format!("{} line 1: {m}", self.name)));
                }
                (Some(h), parsed) => match parsed.and_then(|l| h.parse_row(l)) {
                    Ok(r) => return Ok(Some(r)),
                    Err(m) => {
                        self.bad_lines += 1;
                        if self.first_bad.is_none() {
                            self.first_bad =
                                Some(format!("{} line {}: {m}", self.name, self.line_no));
                        }
                    }
                },
            }
        }
    }
}
