//! The metrics of one run: the column set of the outputs, and their computation from the simulator's or the
//! lab's results and the `analyze` crate's summary of the run's segment logs.

use std::time::Duration;

use analyze::experiment::Metrics;

/// Metrics, in the column order of the CSV outputs, with their meaning (also listed in docs/bench.md).
pub const METRICS: [(&str, &str); 47] = [
    (
        "goodput_mbps",
        "application goodput (DTNperf: acknowledged payload / first send..last ACK), Mb/s",
    ),
    (
        "ltp_goodput_mbps",
        "LTP goodput from the segment logs (confirmed red block bytes / session span), Mb/s",
    ),
    (
        "efficiency_pct",
        "goodput / (forward rate x fraction of the run's trace in the good state), %",
    ),
    (
        "good_fraction",
        "fraction of the run's span the forward channel was good",
    ),
    (
        "tx_session_ms",
        "mean Tx session duration (first segment sent -> TX_END), completed red sessions",
    ),
    ("rx_session_ms", "mean Rx session duration"),
    (
        "ideal_ms",
        "Fig. 5 Ideal: mean duration of sessions without losses",
    ),
    (
        "retx_penalty_ms",
        "Fig. 5 EsPenReTx: mean re-tx cycles x measured cycle duration",
    ),
    (
        "cp_penalty_ms",
        "Fig. 5 EsPenCP: mean checkpoint timeouts x RTO",
    ),
    (
        "delta_id_ms",
        "Fig. 5 DeltaId: error of the ideal-part estimate",
    ),
    (
        "delta_pen_ms",
        "Fig. 5 DeltaPen: residual of the penalty estimates",
    ),
    ("cycle_ms", "measured retransmission-cycle duration"),
    (
        "retx_cycles",
        "mean retransmission cycles per session (Fig. 8)",
    ),
    ("rto_cp", "mean checkpoint timeouts per session"),
    (
        "lossy_sessions_pct",
        "sessions with at least one retransmission cycle or timeout (Fig. 7), %",
    ),
    ("retx_ratio", "retransmitted / first-pass data segments"),
    ("sessions", "completed red sessions"),
    ("cancelled", "cancelled red sessions"),
    ("bundles_acked", "bundles acknowledged to the client"),
    ("virtual_s", "simulated (or emulated) time, s"),
    ("wall_s", "wall-clock time of the run, s"),
    ("rows", "segment-log rows analyzed"),
    (
        "cfdp_completed",
        "[[cfdp]]: fraction of the run's transfers delivered complete (class 2: sender finished without fault)",
    ),
    (
        "cfdp_transfer_s",
        "[[cfdp]]: mean transfer time (put -> sender's Finished; class 1: -> last PDU received, at least -> EOF sent), completed class-2 transfers and every class-1 transfer, s",
    ),
    (
        "cfdp_delivery_s",
        "[[cfdp]]: mean put -> file delivered at the receiver, s",
    ),
    (
        "cfdp_nthr",
        "[[cfdp]]: mean normalized throughput file x 8 / (transfer_s x link rate) (seed 004's N_thr), same transfers as cfdp_transfer_s",
    ),
    (
        "cfdp_nthr0",
        "[[cfdp]]: cfdp_nthr with a failed class-2 transfer counted as 0",
    ),
    (
        "cfdp_s_ratio",
        "[[cfdp]]: class 1, unique File Data PDUs received / PDUs of the file (seed 004's S_ratio)",
    ),
    (
        "cfdp_weighted_nthr",
        "[[cfdp]]: class 1, N_thr x S_ratio (seed 004's N_thr of CFDP-repeat, eq. 3)",
    ),
    (
        "cfdp_retransmitted",
        "[[cfdp]]: File Data PDUs sent again after a NAK, per transfer",
    ),
    ("cfdp_naks", "[[cfdp]]: NAK PDUs sent by the receiver, per transfer"),
    (
        "cfdp_e2e_completed",
        "[[cfdp]] with relay_of: fraction of relay chains whose last transfer completed",
    ),
    (
        "cfdp_e2e_s",
        "[[cfdp]] with relay_of: mean put of a chain's first transfer -> file delivered by its last, s (also cfdpK_transfer_s, cfdpK_delivery_s, cfdpK_completed per transfer K)",
    ),
    (
        "cfdp_pdus_sent",
        "[[cfdp]]: File Data PDUs sent (all passes), per transfer",
    ),
    (
        "units_erased",
        "data units the forward channel erased, per CFDP transfer (File Data PDUs sent, never received) or per LTP run (datagrams lost on the first link's forward direction)",
    ),
    (
        "units_resent",
        "data units sent again, per CFDP transfer (File Data PDUs after a NAK) or per LTP run (data segments retransmitted)",
    ),
    (
        "resent_per_erased",
        "units_resent / units_erased (1: each erased unit resent once; undefined when nothing was erased)",
    ),
    (
        "bound_s",
        "[[cfdp]] class 2 over a link, completed transfers: selective-repeat lower bound on cfdp_transfer_s for the realised erasures and return-link windows: the larger of (first-pass + erased wire bytes) x 8 / link rate + one-way delay and each erased unit's NAK chain through the return windows, then the wait for a return window for the Finished, s",
    ),
    (
        "time_over_bound",
        "[[cfdp]] class 2 over a link: mean transfer time / bound_s per completed transfer (1: at the bound)",
    ),
    (
        "delivery_rtt_mean",
        "runs of at most 100 bundles: mean bundle delivery time (generation -> server received) in RTTs of the link (also bundleK_delivery_s, bundleK_delivery_rtt per bundle K = 1.. in generation order)",
    ),
    (
        "delivery_rtt_max",
        "runs of at most 100 bundles: the last bundle's delivery time in RTTs",
    ),
    (
        "fec_matrices_decoded",
        "[node.fec]: FEC matrices restored by decoding (receivers' FEC_DECODED log rows)",
    ),
    (
        "fec_matrices_failed",
        "[node.fec]: FEC matrices given up (FEC_FAILED rows)",
    ),
    (
        "fec_segments_repaired",
        "[node.fec]: LTP segments restored by decoding",
    ),
    (
        "fec_repair_symbols_sent",
        "[node.fec], sim: repair symbols sent, all nodes (the redundancy's cost; includes what redundancy feedback added)",
    ),
    (
        "fec_feedback_raises",
        "[node.fec], sim: failure signals (HSLTP cancels, ECLSA retransmission requests) that raised a sender's redundancy (0 with feedback off)",
    ),
    (
        "fec_matrix_tx_ms",
        "[node.fec], sim: longest transmission time of one matrix (first symbol out -> last symbol serialized), ms",
    ),
];

/// The `cfdp_*` metrics of a run: means over its `[[cfdp]]` transfers (nothing when it has none).
pub fn cfdp_metrics(m: &mut Metrics, transfers: &[sim::CfdpTransferResult]) {
    if transfers.is_empty() {
        return;
    }
    fn mean(v: impl Iterator<Item = f64>) -> f64 {
        let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        if n == 0 {
            f64::NAN
        } else {
            s / n as f64
        }
    }
    // A class-2 transfer that did not complete has no meaningful transfer time or throughput.
    let valid = |t: &&sim::CfdpTransferResult| t.class == 1 || t.completed;
    // Class 1: the simulator's transfer time ends at the last PDU received, which comes early when the last
    // PDUs (EOF included) were all lost; the transaction lasts at least until the sender's EOF left.
    let time = |t: &sim::CfdpTransferResult| match (t.class, t.transfer_s, t.sender_finished_s) {
        (1, Some(a), Some(b)) => Some(a.max(b)),
        (_, a, _) => a,
    };
    let nthr = |t: &sim::CfdpTransferResult| match (time(t), t.link_rate_bps) {
        (Some(s), Some(r)) if s > 0.0 && r > 0.0 => Some(t.file_size as f64 * 8.0 / (s * r)),
        _ => None,
    };
    let n = transfers.len() as f64;
    let completed = transfers.iter().filter(|t| t.completed).count() as f64;
    for (k, v) in [
        ("cfdp_completed", completed / n),
        (
            "cfdp_transfer_s",
            mean(transfers.iter().filter(valid).filter_map(time)),
        ),
        (
            "cfdp_delivery_s",
            mean(transfers.iter().filter_map(|t| t.delivery_s)),
        ),
        (
            "cfdp_nthr",
            mean(transfers.iter().filter(valid).filter_map(nthr)),
        ),
        (
            "cfdp_nthr0",
            mean(transfers.iter().map(|t| {
                if valid(&t) {
                    nthr(t).unwrap_or(0.0)
                } else {
                    0.0
                }
            })),
        ),
        (
            "cfdp_s_ratio",
            mean(transfers.iter().filter_map(|t| t.received_ratio)),
        ),
        (
            "cfdp_weighted_nthr",
            mean(
                transfers
                    .iter()
                    .filter_map(|t| nthr(t).zip(t.received_ratio).map(|(n, r)| n * r)),
            ),
        ),
        (
            "cfdp_retransmitted",
            mean(
                transfers
                    .iter()
                    .map(|t| t.file_data_pdus_retransmitted as f64),
            ),
        ),
        ("cfdp_naks", mean(transfers.iter().map(|t| t.naks as f64))),
        (
            "units_erased",
            mean(transfers.iter().map(|t| t.file_data_pdus_erased as f64)),
        ),
        (
            "units_resent",
            mean(
                transfers
                    .iter()
                    .map(|t| t.file_data_pdus_retransmitted as f64),
            ),
        ),
        (
            "resent_per_erased",
            ratio(
                transfers
                    .iter()
                    .map(|t| t.file_data_pdus_retransmitted)
                    .sum(),
                transfers.iter().map(|t| t.file_data_pdus_erased).sum(),
            ),
        ),
        (
            "bound_s",
            mean(
                transfers
                    .iter()
                    .filter(|t| t.completed)
                    .filter_map(|t| t.bound_s),
            ),
        ),
        (
            "time_over_bound",
            mean(
                transfers
                    .iter()
                    .filter(|t| t.completed)
                    .filter_map(|t| time(t).zip(t.bound_s).map(|(a, b)| a / b)),
            ),
        ),
        (
            "cfdp_pdus_sent",
            mean(transfers.iter().map(|t| t.file_data_pdus_sent as f64)),
        ),
    ] {
        m.insert(k.to_string(), v);
    }
    // CFDP store-and-forward chains (`relay_of`): end-to-end figures of each chain's last transfer, and each
    // hop's own times.
    if transfers.iter().any(|t| t.relay_of.is_some()) {
        let ends: Vec<_> = transfers
            .iter()
            .filter(|t| !transfers.iter().any(|r| r.relay_of == Some(t.index)))
            .collect();
        let done = ends.iter().filter(|t| t.completed).count() as f64;
        m.insert("cfdp_e2e_completed".into(), done / ends.len().max(1) as f64);
        m.insert(
            "cfdp_e2e_s".into(),
            mean(ends.iter().filter_map(|t| t.end_to_end_delivery_s)),
        );
        for t in transfers {
            let k = t.index;
            m.insert(format!("cfdp{k}_transfer_s"), time(t).unwrap_or(f64::NAN));
            m.insert(
                format!("cfdp{k}_delivery_s"),
                t.delivery_s.unwrap_or(f64::NAN),
            );
            m.insert(
                format!("cfdp{k}_completed"),
                f64::from(u8::from(t.completed)),
            );
        }
    }
}

/// `resent / erased`, NaN when nothing was erased.
fn ratio(resent: u64, erased: u64) -> f64 {
    if erased == 0 {
        f64::NAN
    } else {
        resent as f64 / erased as f64
    }
}

/// The `units_*` metrics of an LTP run from the simulator's totals: datagrams the channel erased on the forward
/// direction of the first link (where the data segments go), and data segments retransmitted. Nothing for a run
/// without LTP traffic (CFDP runs have their own).
pub(crate) fn ltp_unit_metrics(m: &mut Metrics, s: &sim::Summary) {
    if s.segments_sent == 0 || !s.cfdp.is_empty() {
        return;
    }
    m.insert("units_erased".into(), s.forward_erased as f64);
    m.insert("units_resent".into(), s.data_segments_retransmitted as f64);
    m.insert(
        "resent_per_erased".into(),
        ratio(s.data_segments_retransmitted, s.forward_erased),
    );
}

/// The forward direction's nominal rate and the fraction of the run's span its channel was good (a trace
/// preset: the trace the simulator generates for this seed; an IID loss: 1 − PER; otherwise 1).
pub(crate) fn channel_of(scn: &sim::Scenario, span: Duration) -> (Option<f64>, f64) {
    let Some(link) = scn.links.first() else {
        return (None, 1.0);
    };
    let rate = link.forward.rate_bps.filter(|r| *r > 0.0);
    if let Some(p) = link
        .forward_trace_preset
        .as_deref()
        .and_then(channel::gen::Preset::from_name)
    {
        let params = p.params(lab::config::mix(scn.sim.seed, 0, 100));
        if let Ok(t) = channel::gen::generate(&params) {
            let per = t.period().as_nanos().max(1);
            let n = ((span.as_nanos() / per) as usize).clamp(1, usize::MAX / 2);
            let len = t.len().max(1);
            let erased = (0..n).filter(|&i| t.sample(i % len)).count();
            return (rate, 1.0 - erased as f64 / n as f64);
        }
        return (rate, 1.0 - p.table_i().bad_percent / 100.0);
    }
    if let channel::config::LossConfig::Iid { per } = &link.forward.loss {
        return (rate, 1.0 - per);
    }
    (rate, 1.0)
}

/// The metrics taken from the `analyze` summary of a run's segment logs.
pub(crate) fn analysis_metrics(m: &mut Metrics, s: &analyze::RunSummary) {
    let d = &s.decomposition;
    let lossy = if s.red_completed > 0 {
        100.0 * s.sessions_with_losses as f64 / s.red_completed as f64
    } else {
        f64::NAN
    };
    for (k, v) in [
        ("ltp_goodput_mbps", s.goodput_bps / 1e6),
        ("tx_session_ms", s.tx_duration_ms.mean),
        ("rx_session_ms", s.rx_duration_ms.mean),
        ("ideal_ms", d.ideal_ms),
        ("retx_penalty_ms", d.retx_penalty_ms),
        ("cp_penalty_ms", d.cp_penalty_ms),
        ("delta_id_ms", d.delta_id_ms),
        ("delta_pen_ms", d.delta_pen_ms),
        ("cycle_ms", s.measured_cycle_ms),
        ("retx_cycles", s.mean_retransmission_cycles),
        ("rto_cp", s.mean_rto_cp),
        ("lossy_sessions_pct", lossy),
        ("retx_ratio", s.retransmission_ratio),
        ("sessions", s.red_completed as f64),
        ("cancelled", s.red_cancelled as f64),
        ("rows", s.rows as f64),
    ] {
        m.insert(k.to_string(), v);
    }
}
