//! Counters of the FEC layer, per span.

/// Per-span counters, cumulative since the span was added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FecStats {
    /// LTP segments taken from the engine into matrices.
    pub segments_in: u64,
    /// Matrices closed, encoded and queued.
    pub matrices_sent: u64,
    /// Information symbols sent (the LTP segments themselves).
    pub info_symbols_sent: u64,
    /// Repair symbols sent.
    pub repair_symbols_sent: u64,
    /// Bytes of FEC datagrams sent (headers included).
    pub bytes_sent: u64,
    /// Matrices whose last symbol left.
    pub matrices_transmitted: u64,
    /// Sum over those of their transmission time (first symbol leaves → last symbol's end at
    /// the pacing rate), ns: seed 003's Fig. 10.
    pub matrix_tx_ns_total: u64,
    /// The longest of those transmission times, ns.
    pub matrix_tx_ns_max: u64,
    /// Segments refused because the sender's queue was at its hard limit (the driver kept
    /// pushing while [`crate::Fec::accepting`] was false), or too long for a row.
    pub input_dropped: u64,
    /// Symbols received and placed in a matrix.
    pub symbols_received: u64,
    /// Of those, repair symbols.
    pub repair_symbols_received: u64,
    /// Matrices whose K information symbols all arrived (no decoding needed).
    pub matrices_complete: u64,
    /// Matrices restored by decoding (at least one information symbol was missing).
    pub matrices_decoded: u64,
    /// Matrices given up with fewer than K symbols.
    pub matrices_failed: u64,
    /// LTP segments restored by decoding and handed up.
    pub segments_repaired: u64,
    /// Information symbols of failed matrices that never arrived.
    pub segments_lost: u64,
    /// Segments handed up to LTP (received or restored).
    pub segments_out: u64,
    /// HSLTP: import sessions cancelled because their matrix failed.
    pub sessions_cancelled: u64,
    /// Symbols of matrices already decided (late repair symbols, duplicates), dropped.
    pub late_symbols: u64,
    /// Symbols whose K, N or T contradict earlier symbols of the same matrix, dropped.
    pub inconsistent_symbols: u64,
    /// Matrices given up to keep the receive buffer within `max_rx_bytes` or because too many
    /// were open at once.
    pub matrices_evicted: u64,
    /// Redundancy feedback: failure signals from the receiver that raised the redundancy of
    /// the following matrices (duplicates of one signal count once).
    pub feedback_raises: u64,
    /// Redundancy feedback: repair symbols added to matrices beyond the rate and
    /// `min_repair` (included in `repair_symbols_sent` once sent).
    pub feedback_repair_symbols: u64,
    /// Restored rows whose length prefix was invalid (a sender bug or corruption).
    pub bad_rows: u64,
}
