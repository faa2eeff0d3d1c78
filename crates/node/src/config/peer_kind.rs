//! Peer profiles: which implementation a neighbour runs (`peer_kind` of a `[[span]]` or
//! `[[tcp_peer]]`) and the defaults that follow from it.
//!
//! A profile only changes defaults: every key written in the entry overrides what the profile
//! would give. The needs behind each profile are documented in `docs/interop.md`:
//!
//! - `dtnkit` (the default): several bundles per LTP block (aggregation), pacing bursts as deep
//!   as `burst_ms` at the current rate, an intermediate checkpoint every
//!   [`DTNKIT_CHECKPOINT_BYTES`] of a long red part (reports, retransmission and adaptive
//!   pacing during the block, not once at its end);
//! - `ion` (ION 4.1.3): several bundles per block as well (ION does the same), bursts capped at
//!   [`SMALL_BUFFER_BURST_BYTES`] (ION keeps the kernel's default 212 992-byte UDP receive
//!   buffer); TCPCL sessions we open speak version 3 (ION 4.1.3 speaks no other);
//! - `hdtn` (HDTN 1.3.1): exactly one bundle per block — HDTN decodes a block as one bundle and
//!   refuses the rest, while its reports claim the whole block, so any aggregation loses bundles
//!   silently —, bursts capped as for ION (the same 212 992-byte buffer), adaptive-pacing
//!   rounds of at least [`SHARED_HOST_ROUND_MS`] (its one reading thread loses runs whenever
//!   its host takes the CPU away for longer than the buffer lasts);
//! - `dtn7` (dtn7-rs, TCPCL only): bundles beyond its advertised transfer MRU are sent whole
//!   (`exceed_peer_transfer_mru`), since it advertises 64 000 bytes and accepts megabytes;
//! - `generic`: an implementation not known here: the safe choices, one bundle per block and
//!   capped bursts.
//!
//! Adaptive pacing starts at 100 Mb/s towards `dtnkit` peers and at
//! [`CONSERVATIVE_START_DATAGRAMS_PER_S`] segments per second towards every other kind (their
//! 212 992-byte buffers dropped most of the first blocks sent at 100 Mb/s): 25 Mb/s at 1 KiB
//! segments, up to [`CONSERVATIVE_START_MAX_BPS`] for larger ones (`LtpProfile::start_bps`); it
//! finds the peer's rate from there (`ltp::pacing::RateController`).
//!
//! Only `dtnkit` and `hdtn` peers get intermediate checkpoints by default: ION counts every
//! report it sends against a small per-session limit derived from its `maxber`, which is 0 until
//! the end of the red part has arrived (docs/interop.md), and would cancel a block that draws a
//! report before its end; HDTN 1.3.1 answers them (measured).

use serde::Deserialize;

/// Largest pacing burst for receivers with the kernel's default UDP buffer (212 992 bytes):
/// under a third of it, so a burst leaves room for what the receiver has not read yet.
pub const SMALL_BUFFER_BURST_BYTES: u64 = 64 * 1024;

/// `checkpoint_bytes` towards another dtnkit node: an intermediate checkpoint per MiB of a
/// block's first transmission (a 500 kB block keeps its single checkpoint).
pub const DTNKIT_CHECKPOINT_BYTES: u64 = 1 << 20;

/// Adaptive pacing's lowest start rate towards implementations other than dtnkit: below what
/// ION 4.1.3 drains of 1 KiB segments (~85 Mb/s), so the first blocks are not mostly dropped; the
/// quick start doubles it per clean round from there (dtnkit peers start at
/// `ltp::AdaptiveRate`'s default, 100 Mb/s).
pub const CONSERVATIVE_START_BPS: u64 = 25_000_000;

/// Adaptive pacing's start towards implementations other than dtnkit, in segments per second:
/// about a third of what ION 4.1.3 drains whatever the segment size. ION's receiver costs per
/// datagram, not per byte: ION → ION on loopback moved 76–90 Mb/s of 1 KiB segments (9 300–11 000
/// a second) and 440–630 Mb/s of 8 KiB ones (6 700–9 600 a second). A start fixed in bits per
/// second that suits 1 KiB segments sent 8 KiB ones at 380 a second, a twentieth of what ION
/// takes, and since ION answers one checkpoint per block the rate can move only when a whole
/// block was sent: the first 5 MB block took 1.6 s, as long as ION → ION needed for twenty.
pub const CONSERVATIVE_START_DATAGRAMS_PER_S: u64 = 3_000;

/// Highest start rate [`CONSERVATIVE_START_DATAGRAMS_PER_S`] gives (reached at 8 KiB segments):
/// with larger segments the receiver's cost per byte takes over, and it was not measured. Below
/// half the lowest ION → ION rate seen at 8 KiB on a quiet machine (440 Mb/s).
pub const CONSERVATIVE_START_MAX_BPS: u64 = 200_000_000;

/// `adaptive_round_ms` by default: `ltp::pacing::MIN_ROUND_TIME`.
pub const DEFAULT_ROUND_MS: f64 = 4.0;

/// `adaptive_round_ms` towards HDTN: long enough that a round spans the pauses of a receiver
/// whose host takes its CPU away every few milliseconds. HDTN 1.3.1 reads its 212 992-byte
/// socket (26 datagrams of 8 KiB) from one thread; on a loaded host it loses a run whenever that
/// thread waits longer than the buffer lasts at the current rate. Rounds of 4 ms at 1–3 Gb/s
/// (1 MiB between intermediate checkpoints) often fell between such pauses, read as clean and
/// carried the rate up, and 15–22 % of the data was sent again (8 KiB segments on loopback).
/// Measured against HDTN 1.3.1 on this kind of host (docs/interop.md), 4 / 20 / 40 ms alternated
/// round by round: 20 ms kept every run at or below 10 % resent at a higher rate than 40 ms,
/// whose slower reaction let two starts of 1 KiB rounds overrun HDTN (14 % resent).
pub const SHARED_HOST_ROUND_MS: f64 = 20.0;

/// Smallest `checkpoint_bytes` other than 0: below it reports would rival data segments in
/// number (and the receiver counts intermediate checkpoints as progress only up to its block
/// limit divided by this, `ltp::MIN_CHECKPOINT_INTERVAL`).
pub const MIN_CHECKPOINT_BYTES: u64 = ltp::MIN_CHECKPOINT_INTERVAL;

/// The implementation a neighbour runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    /// Another dtnkit node.
    #[default]
    Dtnkit,
    /// NASA JPL's ION.
    Ion,
    /// NASA Glenn's HDTN.
    Hdtn,
    /// dtn7-rs (TCPCL only).
    Dtn7,
    /// Anything else.
    Generic,
}

/// Defaults of an LTP span for one peer kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LtpProfile {
    /// `aggregation_bytes`.
    pub aggregation_bytes: usize,
    /// `aggregation_ms`.
    pub aggregation_ms: f64,
    /// `max_bundles_per_block` (0 = no limit).
    pub max_bundles_per_block: usize,
    /// `max_burst_bytes` (0 = no cap).
    pub max_burst_bytes: u64,
    /// `checkpoint_bytes` (0 = a single checkpoint per block).
    pub checkpoint_bytes: u64,
    /// `learn_receiver_pause`.
    pub learn_receiver_pause: bool,
    /// `adaptive_round_ms`.
    pub adaptive_round_ms: f64,
    /// Start rate of adaptive pacing (bit/s), the least one with
    /// `adaptive_start_datagrams_per_s`.
    pub adaptive_start_bps: u64,
    /// Start of adaptive pacing in segments per second (0 = `adaptive_start_bps` alone): see
    /// [`LtpProfile::start_bps`].
    pub adaptive_start_datagrams_per_s: u64,
}

impl LtpProfile {
    /// Adaptive pacing's start rate for segments of `max_segment_size` bytes: the larger of
    /// `adaptive_start_bps` and `adaptive_start_datagrams_per_s` such segments a second (at most
    /// [`CONSERVATIVE_START_MAX_BPS`] for the latter).
    pub fn start_bps(&self, max_segment_size: usize) -> u64 {
        let per_datagram = self
            .adaptive_start_datagrams_per_s
            .saturating_mul(8)
            .saturating_mul(max_segment_size as u64)
            .min(CONSERVATIVE_START_MAX_BPS);
        self.adaptive_start_bps.max(per_datagram)
    }
}

/// Defaults of a TCPCL neighbour for one peer kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpProfile {
    /// `exceed_peer_transfer_mru`.
    pub exceed_peer_transfer_mru: bool,
    /// `version`: the TCPCL version of the sessions we open to it.
    pub version: u8,
}

impl PeerKind {
    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Dtnkit => "dtnkit",
            PeerKind::Ion => "ion",
            PeerKind::Hdtn => "hdtn",
            PeerKind::Dtn7 => "dtn7",
            PeerKind::Generic => "generic",
        }
    }

    /// The LTP span defaults, or why this kind cannot be an LTP neighbour.
    pub fn ltp_profile(self) -> Result<LtpProfile, &'static str> {
        let aggregating = LtpProfile {
            aggregation_bytes: 64 * 1024,
            aggregation_ms: 1.0,
            max_bundles_per_block: 0,
            max_burst_bytes: 0,
            checkpoint_bytes: 0,
            learn_receiver_pause: false,
            adaptive_round_ms: DEFAULT_ROUND_MS,
            adaptive_start_bps: CONSERVATIVE_START_BPS,
            adaptive_start_datagrams_per_s: CONSERVATIVE_START_DATAGRAMS_PER_S,
        };
        match self {
            PeerKind::Dtnkit => Ok(LtpProfile {
                checkpoint_bytes: DTNKIT_CHECKPOINT_BYTES,
                adaptive_start_bps: ltp::AdaptiveRate::default().initial_bps,
                adaptive_start_datagrams_per_s: 0,
                ..aggregating
            }),
            // ION 4.1.3 stops reading its socket for tens of milliseconds after each block it
            // completes (handing the block to its bundle agent) and drops what arrives
            // meanwhile: 11-16 % resent at 8 KiB segments on loopback without a hold.
            PeerKind::Ion => Ok(LtpProfile {
                max_burst_bytes: SMALL_BUFFER_BURST_BYTES,
                learn_receiver_pause: true,
                ..aggregating
            }),
            // HDTN answers intermediate checkpoints (measured with HDTN 1.3.1, 5 MB blocks):
            // with reports every MiB the rate is learnt within the first block instead of
            // after it, which at the conservative start rate took 1.6 s per 5 MB.
            PeerKind::Hdtn => Ok(LtpProfile {
                max_bundles_per_block: 1,
                max_burst_bytes: SMALL_BUFFER_BURST_BYTES,
                checkpoint_bytes: DTNKIT_CHECKPOINT_BYTES,
                adaptive_round_ms: SHARED_HOST_ROUND_MS,
                ..aggregating
            }),
            PeerKind::Generic => Ok(LtpProfile {
                max_bundles_per_block: 1,
                max_burst_bytes: SMALL_BUFFER_BURST_BYTES,
                ..aggregating
            }),
            PeerKind::Dtn7 => Err("dtn7 has no LTP convergence layer (use [[tcp_peer]])"),
        }
    }

    /// The TCPCL neighbour defaults.
    pub fn tcp_profile(self) -> TcpProfile {
        TcpProfile {
            exceed_peer_transfer_mru: self == PeerKind::Dtn7,
            version: if self == PeerKind::Ion { 3 } else { 4 },
        }
    }

    /// Whether a receiver of this kind loses every bundle of a block but the first.
    pub fn one_bundle_per_block(self) -> bool {
        self == PeerKind::Hdtn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_differ_where_the_implementations_do() {
        let p = |k: PeerKind| k.ltp_profile().unwrap();
        assert_eq!(p(PeerKind::Dtnkit).max_bundles_per_block, 0);
        assert_eq!(p(PeerKind::Ion).max_bundles_per_block, 0);
        assert_eq!(p(PeerKind::Hdtn).max_bundles_per_block, 1);
        assert_eq!(p(PeerKind::Generic).max_bundles_per_block, 1);
        assert_eq!(p(PeerKind::Dtnkit).max_burst_bytes, 0);
        assert_eq!(p(PeerKind::Dtnkit).start_bps(1024), 100_000_000);
        assert_eq!(p(PeerKind::Dtnkit).start_bps(65_000), 100_000_000);
        assert_eq!(
            p(PeerKind::Dtnkit).checkpoint_bytes,
            DTNKIT_CHECKPOINT_BYTES
        );
        for k in [PeerKind::Ion, PeerKind::Hdtn, PeerKind::Generic] {
            assert_eq!(p(k).max_burst_bytes, SMALL_BUFFER_BURST_BYTES, "{k:?}");
            assert!(p(k).max_burst_bytes < 212_992 / 3);
            // 3 000 segments a second: 25 Mb/s at 1 KiB (24.6, raised to the least), 33.6 at
            // 1400 bytes, 196.6 at 8 KiB, capped at 200 beyond.
            assert_eq!(p(k).start_bps(1024), CONSERVATIVE_START_BPS, "{k:?}");
            assert_eq!(p(k).start_bps(1400), 33_600_000, "{k:?}");
            assert_eq!(p(k).start_bps(8192), 196_608_000, "{k:?}");
            assert_eq!(p(k).start_bps(65_000), CONSERVATIVE_START_MAX_BPS, "{k:?}");
        }
        // ION counts every report against a small limit; HDTN answers intermediate
        // checkpoints (docs/interop.md).
        assert_eq!(p(PeerKind::Ion).checkpoint_bytes, 0);
        assert_eq!(p(PeerKind::Generic).checkpoint_bytes, 0);
        assert_eq!(p(PeerKind::Hdtn).checkpoint_bytes, DTNKIT_CHECKPOINT_BYTES);
        assert!(PeerKind::Dtn7.ltp_profile().is_err());
        assert!(PeerKind::Dtn7.tcp_profile().exceed_peer_transfer_mru);
        assert!(!PeerKind::Hdtn.tcp_profile().exceed_peer_transfer_mru);
        assert_eq!(PeerKind::Ion.tcp_profile().version, 3);
        assert_eq!(
            PeerKind::Hdtn.tcp_profile().version,
            4,
            "HDTN and dtnkit speak v4"
        );
        assert_eq!(PeerKind::default(), PeerKind::Dtnkit);
    }
}
