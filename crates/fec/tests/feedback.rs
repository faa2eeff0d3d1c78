//! Redundancy feedback and the minimum-repair threshold in virtual time with exact timings (the
//! world of `virtual_time.rs`: 8 Mb/s pacing, 1 s one-way delay, 1024-byte segments, blocks of
//! 10 000 bytes = 10 segments, K = 10 and N = 12 at Rc 8/9 with at least 2 repair symbols).
//!
//! A failure signal from the receiver (HSLTP: its cancel; ECLSA: a report asking for a
//! retransmission) raises the extra redundancy of the sender's next matrices at the instant the
//! sender's FEC layer hands the signal up, by `feedback_step_pct` repair symbols per 100
//! information symbols, up to `feedback_max_pct`; it drops one step after `feedback_decay`
//! matrices carrying data.

mod common;

use std::time::Duration;

use common::{block, Seen, Sent, World};
use fec::{FecConfig, Mode};

const DELAY: Duration = Duration::from_secs(1);
const RTO: Duration = Duration::from_millis(2500);

/// The matrices node `from` sent, in order: (first symbol's departure, K, N, carries data).
fn matrices(w: &World, from: u64) -> Vec<(Duration, u16, u16, bool)> {
    let mut out: Vec<(Duration, u16, u16, bool)> = Vec::new();
    let mut last = None;
    for s in w.fec_sent(from) {
        let h = s.fec.unwrap();
        // Data segments are the information symbols longer than any signal (a 10 000-byte
        // block is cut into 1024-byte segments, signals are a few dozen bytes).
        let data = !h.is_repair() && s.len > 500;
        if last != Some(h.matrix) {
            last = Some(h.matrix);
            out.push((s.at, h.k, h.n, data));
        } else if let Some(m) = out.last_mut() {
            m.3 |= data;
        }
    }
    out
}

/// Repair symbols beyond the rate and the minimum of each matrix.
fn extra(cfg: &FecConfig, m: &[(Duration, u16, u16, bool)]) -> Vec<usize> {
    m.iter()
        .map(|&(_, k, n, _)| usize::from(n - k) - cfg.repair_for(usize::from(k)))
        .collect()
}

fn on(step: u16, max: u16, decay: u16) -> impl Fn(&mut FecConfig) {
    move |f: &mut FecConfig| {
        f.feedback_step_pct = step;
        f.feedback_max_pct = max;
        f.feedback_decay = decay;
    }
}

fn cancelled_at(w: &World, token: u64) -> Vec<Duration> {
    w.seen
        .iter()
        .filter(|(_, s)| *s == Seen::Cancelled(token))
        .map(|(t, _)| *t)
        .collect()
}

fn data_matrices(m: &[(Duration, u16, u16, bool)]) -> Vec<(Duration, u16, u16, bool)> {
    m.iter().copied().filter(|m| m.3).collect()
}

#[test]
fn hsltp_a_failed_matrix_raises_the_next_data_matrices_and_the_raise_decays() {
    // Step 20 %, max 40 %, one step down after 2 data matrices.
    let mut w = World::with_fec(Mode::Hsltp, 64, DELAY, RTO, 15, on(20, 40, 2));
    w.loss = Box::new(|from, i, _| from == 1 && i < 12 && [2, 4, 6].contains(&i));
    let data = block(10_000, 3);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    // The first matrix failed; B cancelled with 3 copies of its CR, which raise A's redundancy
    // once, when they are handed up (the third copy's arrival completes B's signal matrix).
    let back: Vec<&Sent> = w.fec_sent(2);
    let cancelled = cancelled_at(&w, 7);
    assert_eq!(cancelled, vec![back[2].arrives]);
    let st = *w.a.fec_stats(2).unwrap();
    assert_eq!(st.feedback_raises, 1, "3 copies of one cancel raise once");
    let m = matrices(&w, 1);
    let cfg = w.a.fec().config(2).unwrap().clone();
    // The re-sent block's matrix (9 cancel-acks + 10 data segments, K = 19) leaves at that
    // instant with ceil(19 × 20 / 100) = 4 repair symbols more than the rate's 3: N = 26, not 22.
    assert_eq!((m[0].1, m[0].2), (10, 12));
    assert_eq!((m[1].0, m[1].1, m[1].2), (cancelled[0], 19, 26));
    assert_eq!(extra(&cfg, &m)[..2], [0, 4]);
    assert_eq!(w.blocks(), vec![(w.fec_sent(1)[12 + 18].arrives, data)]);
    // One data matrix sent at 20 %: still raised for one more.
    assert_eq!(w.a.fec().feedback_level(2), Some(20));
    // Three more blocks, one at a time: the first gets the raise (the second data matrix at
    // 20 %, which ends the level), the next two none.
    let mut t = w.now;
    for i in 0..3u8 {
        w.send(block(10_000, 40 + i), 100 + u64::from(i));
        w.run(t + Duration::from_secs(10));
        t = w.now;
    }
    assert_eq!(w.blocks().len(), 4);
    let dm = data_matrices(&matrices(&w, 1));
    assert_eq!(dm.len(), 5);
    let ex = extra(&cfg, &dm);
    assert_eq!(
        ex[1..],
        [4, FecConfig::feedback_extra(usize::from(dm[2].1), 20), 0, 0]
    );
    assert!(ex[2] >= 2, "K >= 10: at least 2 extra at 20 %");
    assert_eq!(w.a.fec().feedback_level(2), Some(0));
    let st = w.a.fec_stats(2).unwrap();
    assert_eq!(st.feedback_raises, 1);
    // Signal-only matrices (report-acks) closed while raised got their extra symbols too.
    let all: usize = extra(&cfg, &matrices(&w, 1)).iter().sum();
    assert!(all > ex[1] + ex[2]);
    assert_eq!(st.feedback_repair_symbols, all as u64);
}

#[test]
fn hsltp_consecutive_failures_stack_the_raise_up_to_its_maximum() {
    // Step 10 %, max 15 %, one step down after 2 data matrices. The first block matrix and the
    // first re-sent one both fail (6 of their information symbols lost: K = 10 and K = 19
    // with 2 + 2 repair symbols at 10 %), so the second re-sending gets 15 %, not 20 %.
    let mut w = World::with_fec(Mode::Hsltp, 64, DELAY, RTO, 15, on(10, 15, 2));
    let mut data_m: Vec<u32> = Vec::new();
    w.loss = Box::new(move |from, _, h| {
        let Some(h) = h.filter(|h| from == 1 && h.k >= 10) else {
            return false;
        };
        if !data_m.contains(&h.matrix) {
            data_m.push(h.matrix);
        }
        let nth = data_m.iter().position(|&m| m == h.matrix).unwrap_or(0);
        nth < 2 && !h.is_repair() && [2, 4, 6, 8, 10, 12].contains(&h.index)
    });
    w.send(block(10_000, 5), 9);
    w.run(Duration::from_secs(60));
    assert_eq!(w.b.fec_stats(1).unwrap().matrices_failed, 2);
    assert_eq!(w.a.fec_stats(2).unwrap().feedback_raises, 2);
    assert_eq!(cancelled_at(&w, 9).len(), 2);
    assert_eq!(w.blocks().len(), 1);
    let cfg = w.a.fec().config(2).unwrap().clone();
    let dm = data_matrices(&matrices(&w, 1));
    assert_eq!(dm.len(), 3);
    let want = |k: u16, pct| FecConfig::feedback_extra(usize::from(k), pct);
    assert_eq!(
        extra(&cfg, &dm),
        vec![0, want(dm[1].1, 10), want(dm[2].1, 15)]
    );
    // The 15 % level has served one data matrix of its 2.
    assert_eq!(w.a.fec().feedback_level(2), Some(15));
}

#[test]
fn eclsa_a_retransmission_request_raises_the_retransmission_matrix() {
    let mut w = World::with_fec(Mode::Eclsa, 64, DELAY, RTO, 1, on(25, 25, 1));
    w.loss = Box::new(|from, i, _| from == 1 && i < 12 && [2, 4, 6].contains(&i));
    let data = block(10_000, 6);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    assert_eq!(w.blocks().len(), 1);
    let a = w.a.engine().span_stats(2).unwrap();
    assert_eq!(
        (a.data_segments_retransmitted, a.retransmission_cycles),
        (3, 1)
    );
    // The report claiming 7 of 10 segments (3 copies) raised once; the final one did not.
    let st = *w.a.fec_stats(2).unwrap();
    assert_eq!(st.feedback_raises, 1);
    let cfg = w.a.fec().config(2).unwrap().clone();
    let m = matrices(&w, 1);
    let dm = data_matrices(&m);
    assert_eq!(dm.len(), 2);
    let ex = extra(&cfg, &dm);
    assert_eq!(
        ex,
        vec![0, FecConfig::feedback_extra(usize::from(dm[1].1), 25)]
    );
    assert!(ex[1] >= 1);
    // The retransmission matrix opened when the report arrived (the matrix timer is the 5 ms
    // aggregation timer): its first symbol leaves 5 ms after the first report copy arrives.
    let back = w.fec_sent(2);
    assert_eq!(dm[1].0, back[0].arrives + Duration::from_millis(5));
    assert_eq!(w.a.fec().feedback_level(2), Some(0));
}

#[test]
fn with_feedback_off_a_failure_changes_no_matrix() {
    for mode in [Mode::Hsltp, Mode::Eclsa] {
        let mut w = World::new(mode, 64, DELAY, RTO, 15);
        w.loss = Box::new(|from, i, _| from == 1 && i < 12 && [2, 4, 6].contains(&i));
        w.send(block(10_000, 3), 7);
        w.run(Duration::from_secs(30));
        assert_eq!(w.blocks().len(), 1);
        let cfg = w.a.fec().config(2).unwrap().clone();
        assert!(!cfg.feedback_on());
        let m = matrices(&w, 1);
        assert!(m.len() >= 2);
        assert!(extra(&cfg, &m).iter().all(|&e| e == 0), "{mode:?}: {m:?}");
        let st = w.a.fec_stats(2).unwrap();
        assert_eq!((st.feedback_raises, st.feedback_repair_symbols), (0, 0));
        assert_eq!(w.a.fec().feedback_level(2), Some(0));
    }
}

#[test]
fn a_minimum_repair_threshold_above_the_rate_sets_the_redundancy_of_short_blocks() {
    // 21 repair symbols at least: a 10-segment block gets N = 31 instead of 12 and survives the
    // loss of 21 of its symbols.
    let mut w = World::with_fec(Mode::Hsltp, 64, DELAY, RTO, 15, |f| f.min_repair = 21);
    w.loss = Box::new(|from, i, _| from == 1 && i < 31 && i % 3 != 0);
    let data = block(10_000, 8);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let m = matrices(&w, 1);
    assert_eq!((m[0].1, m[0].2), (10, 31));
    assert_eq!(w.blocks().len(), 1);
    let st = w.b.fec_stats(1).unwrap();
    assert_eq!((st.matrices_failed, st.matrices_decoded), (0, 1));
    // Received: i = 0, 3, ..., 30 (11 symbols); the 10th (i = 27) decodes it.
    assert_eq!(w.rows(2, "FEC_DECODED")[0].time, w.fec_sent(1)[27].arrives);
}
