//! Erasure traces: the on/off time series of seed 000 (one sample per period, `1` = erased, `0` = delivered).
//!
//! Two text formats are read and written:
//!
//! - **plain** — the seeds' erasure vectors: one `0` or `1` per line. CRLF line ends and blank trailing lines are
//!   tolerated; anything else is rejected with the line number and the offending value. The sample period is not in
//!   the file; it comes from the caller (0.1 ms by default, as in seed 000).
//! - **run-length** — a compact form. The first line is the header `# dtnkit-rle period_us=<P>` (P a positive
//!   integer number of microseconds); every following non-empty line is `<value> <count>` with value `0` or `1` and
//!   count a positive integer: `count` consecutive samples of `value`. Lines starting with `#` after the header are
//!   comments.
//!
//! [`parse`] detects the format from the first line. Parsing is a pure function of the text (fuzzed in
//! `fuzz/fuzz_targets/trace_parse.rs`) and never allocates more than [`ParseOptions::max_samples`] bits.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default sample period of seed 000's erasure vectors: 0.1 ms.
pub const DEFAULT_PERIOD: Duration = Duration::from_micros(100);

/// The header that marks a run-length trace file.
pub const RLE_MAGIC: &str = "# dtnkit-rle";

/// Default limit on the number of samples a parsed trace may hold (2^28 samples = 7.4 h at 0.1 ms, 32 MiB of bits).
pub const DEFAULT_MAX_SAMPLES: usize = 1 << 28;

/// An erasure trace: `len` samples of `period` each, stored as a bit set (1 = erased).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasureTrace {
    period: Duration,
    len: usize,
    words: Vec<u64>,
}

/// Why a trace could not be parsed or built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceError {
    /// A line did not hold what the format allows.
    #[error("line {line}: found {value:?}, expected {expected}")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// The offending text (truncated to 40 characters).
        value: String,
        /// What the format allows at that place.
        expected: &'static str,
    },
    /// The trace holds no sample at all.
    #[error("the trace holds no samples")]
    Empty,
    /// The trace would exceed the configured sample limit.
    #[error("the trace exceeds the limit of {limit} samples")]
    TooLong {
        /// The limit that was hit.
        limit: usize,
    },
    /// The sample period is zero.
    #[error("the sample period must be positive")]
    ZeroPeriod,
}

/// A trace file that could not be loaded: the path plus the reason (I/O or [`TraceError`]).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A syntax error, reported as `file:line: ...` like a compiler.
    #[error("{path}:{line}: found {value:?}, expected {expected}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// Any other trace error.
    #[error("{path}: {source}")]
    Trace {
        /// The file.
        path: PathBuf,
        /// The error.
        source: TraceError,
    },
}

/// Knobs of the parser.
#[derive(Clone, Copy, Debug)]
pub struct ParseOptions {
    /// Period of plain-format samples (a run-length header overrides it).
    pub period: Duration,
    /// Refuse traces longer than this many samples (bounded memory on untrusted input).
    pub max_samples: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            period: DEFAULT_PERIOD,
            max_samples: DEFAULT_MAX_SAMPLES,
        }
    }
}

/// Output format of [`ErasureTrace::to_text`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One `0`/`1` per line.
    Plain,
    /// `# dtnkit-rle period_us=..` then `value count` lines.
    RunLength,
}

fn truncated(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Accumulates samples into a bit set, enforcing the sample limit before growing.
struct Builder {
    len: usize,
    words: Vec<u64>,
    max: usize,
}

impl Builder {
    fn new(max: usize) -> Self {
        Builder {
            len: 0,
            words: Vec::new(),
            max,
        }
    }

    fn push_run(&mut self, value: bool, count: usize) -> Result<(), TraceError> {
        let new_len = self.len.checked_add(count).filter(|&n| n <= self.max);
        let Some(new_len) = new_len else {
            return Err(TraceError::TooLong { limit: self.max });
        };
        self.words.resize(new_len.div_ceil(64), 0);
        if value {
            let mut i = self.len;
            while i < new_len {
                let bit = i % 64;
                if bit == 0 && new_len - i >= 64 {
                    if let Some(w) = self.words.get_mut(i / 64) {
                        *w = u64::MAX;
                    }
                    i += 64;
                } else {
                    if let Some(w) = self.words.get_mut(i / 64) {
                        *w |= 1 << bit;
                    }
                    i += 1;
                }
            }
        }
        self.len = new_len;
        Ok(())
    }

    fn finish(self, period: Duration) -> Result<ErasureTrace, TraceError> {
        if period.is_zero() {
            return Err(TraceError::ZeroPeriod);
        }
        if self.len == 0 {
            return Err(TraceError::Empty);
        }
        Ok(ErasureTrace {
            period,
            len: self.len,
            words: self.words,
        })
    }
}

/// Parses a trace in either format (detected from the first line).
pub fn parse(text: &str, opts: &ParseOptions) -> Result<ErasureTrace, TraceError> {
    if text.starts_with(RLE_MAGIC) {
        parse_rle(text, opts)
    } else {
        parse_plain(text, opts)
    }
}

/// Splits into lines, stripping one trailing `\r` per line.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
}

/// Parses the plain format: one `0`/`1` per line; blank lines are allowed only at the end.
pub fn parse_plain(text: &str, opts: &ParseOptions) -> Result<ErasureTrace, TraceError> {
    let mut b = Builder::new(opts.max_samples);
    let mut blank_since: Option<usize> = None;
    // Runs are accumulated so the builder is called once per run, not per sample.
    let mut run: Option<(bool, usize)> = None;
    for (line_no, line) in lines(text) {
        let value = match line {
            "0" => false,
            "1" => true,
            "" => {
                blank_since.get_or_insert(line_no);
                continue;
            }
            other => {
                return Err(TraceError::Syntax {
                    line: line_no,
                    value: truncated(other),
                    expected: "0 or 1",
                });
            }
        };
        if let Some(blank) = blank_since {
            return Err(TraceError::Syntax {
                line: blank,
                value: String::new(),
                expected: "0 or 1 (blank lines only at the end)",
            });
        }
        run = match run {
            Some((v, n)) if v == value => Some((v, n + 1)),
            Some((v, n)) => {
                b.push_run(v, n)?;
                Some((value, 1))
            }
            None => Some((value, 1)),
        };
    }
    if let Some((v, n)) = run {
        b.push_run(v, n)?;
    }
    b.finish(opts.period)
}

/// Parses the run-length format (see the module documentation).
pub fn parse_rle(text: &str, opts: &ParseOptions) -> Result<ErasureTrace, TraceError> {
    let mut it = lines(text);
    let (_, header) = it.next().unwrap_or((1, ""));
    let period_us = header
        .strip_prefix(RLE_MAGIC)
        .map(str::trim)
        .and_then(|rest| rest.strip_prefix("period_us="))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&v| v > 0);
    let Some(period_us) = period_us else {
        return Err(TraceError::Syntax {
            line: 1,
            value: truncated(header),
            expected: "the header `# dtnkit-rle period_us=<positive integer>`",
        });
    };
    let mut b = Builder::new(opts.max_samples);
    for (line_no, line) in it {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut fields = trimmed.split_ascii_whitespace();
        let value = match fields.next() {
            Some("0") => false,
            Some("1") => true,
            _ => {
                return Err(TraceError::Syntax {
                    line: line_no,
                    value: truncated(line),
                    expected: "`<0|1> <count>`",
                })
            }
        };
        let count = fields
            .next()
            .and_then(|c| c.parse::<usize>().ok())
            .filter(|&c| c > 0);
        let (Some(count), None) = (count, fields.next()) else {
            return Err(TraceError::Syntax {
                line: line_no,
                value: truncated(line),
                expected: "`<0|1> <positive count>`",
            });
        };
        b.push_run(value, count)?;
    }
    b.finish(Duration::from_micros(period_us))
}

/// Reads and parses a trace file; errors carry the path (and `path:line` for syntax errors).
pub fn load(path: &Path, opts: &ParseOptions) -> Result<ErasureTrace, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, opts).map_err(|e| match e {
        TraceError::Syntax {
            line,
            value,
            expected,
        } => LoadError::Syntax {
            path: path.to_path_buf(),
            line,
            value,
            expected,
        },
        source => LoadError::Trace {
            path: path.to_path_buf(),
            source,
        },
    })
}

impl ErasureTrace {
    /// Builds a trace from samples (`true` = erased).
    pub fn from_samples(
        period: Duration,
        samples: impl IntoIterator<Item = bool>,
    ) -> Result<Self, TraceError> {
        let mut b = Builder::new(usize::MAX);
        for s in samples {
            b.push_run(s, 1)?;
        }
        b.finish(period)
    }

    /// Builds a trace from runs `(value, count)`; zero-length runs are skipped. `max_samples` bounds the result.
    pub fn from_runs(
        period: Duration,
        runs: impl IntoIterator<Item = (bool, usize)>,
        max_samples: usize,
    ) -> Result<Self, TraceError> {
        let mut b = Builder::new(max_samples);
        for (v, n) in runs {
            b.push_run(v, n)?;
        }
        b.finish(period)
    }

    /// Sample period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Number of samples (never zero).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a trace holds at least one sample. (Provided for API symmetry with `len`.)
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total covered time: `len * period`.
    pub fn duration(&self) -> Duration {
        self.period
            .saturating_mul(u32::try_from(self.len).unwrap_or(u32::MAX))
    }

    /// Sample `i` (`true` = erased); out-of-range indices wrap around (the trace loops).
    pub fn sample(&self, i: usize) -> bool {
        let i = i % self.len.max(1);
        self.words
            .get(i / 64)
            .is_some_and(|w| (w >> (i % 64)) & 1 == 1)
    }

    /// Index of the sample covering time `t` (since the trace start), looping at the end.
    pub fn index_at(&self, t: Duration) -> usize {
        let period = self.period.as_nanos().max(1);
        let len = self.len.max(1) as u128;
        // Both operands fit in u128; the remainder is < len which fits in usize.
        usize::try_from((t.as_nanos() / period) % len).unwrap_or(0)
    }

    /// Whether the channel is erased at time `t` since the trace start (looping).
    pub fn erased_at(&self, t: Duration) -> bool {
        self.sample(self.index_at(t))
    }

    /// Number of erased samples.
    pub fn erased_count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Iterates the maximal runs `(value, count)` in order.
    pub fn runs(&self) -> Runs<'_> {
        Runs {
            trace: self,
            pos: 0,
        }
    }

    /// Renders the trace in `format`.
    pub fn to_text(&self, format: Format) -> String {
        match format {
            Format::Plain => {
                let mut s = String::with_capacity(self.len * 2);
                for i in 0..self.len {
                    s.push_str(if self.sample(i) { "1\n" } else { "0\n" });
                }
                s
            }
            Format::RunLength => {
                let mut s = format!("{RLE_MAGIC} period_us={}\n", self.period.as_micros());
                for (v, n) in self.runs() {
                    let _ = writeln!(s, "{} {n}", u8::from(v));
                }
                s
            }
        }
    }
}

/// Iterator over the runs of a trace (see [`ErasureTrace::runs`]).
pub struct Runs<'a> {
    trace: &'a ErasureTrace,
    pos: usize,
}

impl Iterator for Runs<'_> {
    type Item = (bool, usize);

    fn next(&mut self) -> Option<(bool, usize)> {
        if self.pos >= self.trace.len {
            return None;
        }
        let v = self.trace.sample(self.pos);
        let start = self.pos;
        let mut i = self.pos + 1;
        while i < self.trace.len {
            // Skip whole words that are uniformly `v`.
            if i.is_multiple_of(64) && i + 64 <= self.trace.len {
                let w = self.trace.words.get(i / 64).copied().unwrap_or(0);
                if (v && w == u64::MAX) || (!v && w == 0) {
                    i += 64;
                    continue;
                }
            }
            if self.trace.sample(i) != v {
                break;
            }
            i += 1;
        }
        self.pos = i;
        Some((v, i - start))
    }
}
