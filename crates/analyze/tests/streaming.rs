//! A generated log larger than the analyzer may hold: 100 000 sessions (≈ 1.7 M rows, ≈ 120 MB of CSV) produced
//! on the fly by a reader, never materialised. The generator writes each session's rows one after another, so
//! at most one session is open at a time: the analyzer's state must stay at that size (it emits each session at
//! its TX_END) while it still counts every session exactly.

use std::io::{BufRead, BufReader, Read};

use analyze::{Analyzer, Options};

/// Generates the log of `sessions` sessions, each: TX_START, 12 data segments (the 12th a
/// checkpoint; every 10th session also loses and retransmits one segment in one cycle), RS, RA, TX_END.
struct Gen {
    sessions: u64,
    next: u64,
    buf: Vec<u8>,
    pos: usize,
    header: bool,
}

impl Gen {
    fn fill(&mut self) {
        self.buf.clear();
        self.pos = 0;
        if !self.header {
            self.header = true;
            self.buf.extend_from_slice(b"time_ns,dir,local_engine,remote_engine,session_originator,session_number,seg_type,offset,length,checkpoint_serial,report_serial,claims,retransmission,datagram_len,outcome\n");
        }
        if self.next >= self.sessions {
            return;
        }
        let n = self.next;
        self.next += 1;
        // Session n starts at n ms and lasts 7 ms: 7 sessions overlap.
        let t0 = n * 1_000_000;
        let mut w = |t: u64, s: &str| {
            self.buf
                .extend_from_slice(format!("{},{s}\n", t0 + t).as_bytes());
        };
        w(0, &format!("ev,1,2,1,{n},TX_START,0,12000,0,0,0,0,0,"));
        for k in 0..12u64 {
            let ty = if k == 11 { "RD_CP_EORP_EOB" } else { "RD" };
            let cp = u64::from(k == 11);
            w(
                10_000 * k,
                &format!("tx,1,2,1,{n},{ty},{},1000,{cp},0,0,0,1024,", k * 1000),
            );
        }
        if n.is_multiple_of(10) {
            w(3_000_000, &format!("rx,1,2,1,{n},RS,0,12000,1,1,2,0,40,"));
            w(
                3_100_000,
                &format!("tx,1,2,1,{n},RD_CP,5000,1000,2,1,0,1,1024,"),
            );
            w(6_000_000, &format!("rx,1,2,1,{n},RS,5000,1000,2,2,1,0,30,"));
        } else {
            w(3_000_000, &format!("rx,1,2,1,{n},RS,0,12000,1,1,1,0,30,"));
        }
        w(
            7_000_000,
            &format!("ev,1,2,1,{n},TX_END,0,12000,0,0,0,0,0,OK"),
        );
    }
}

impl Read for Gen {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.buf.len() {
            self.fill();
        }
        let n = (self.buf.len() - self.pos).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn large_generated_log_in_bounded_state() {
    let sessions = 100_000u64;
    let input: Box<dyn BufRead> = Box::new(BufReader::new(Gen {
        sessions,
        next: 0,
        buf: Vec::new(),
        pos: 0,
        header: false,
    }));
    let mut a = Analyzer::new(Options::default());
    a.add_segment_log("generated", input);
    let mut emitted = 0u64;
    let r = a
        .run(&mut |_| {
            emitted += 1;
            Ok(())
        })
        .unwrap();
    let m = &r.summary;
    assert_eq!(emitted, sessions);
    assert_eq!(m.red_completed, sessions);
    assert_eq!(m.rows, sessions * 15 + sessions / 10 * 2);
    assert!(m.peak_open_sessions <= 2, "peak {}", m.peak_open_sessions);
    assert_eq!(m.sessions_with_losses, sessions / 10);
    assert!((m.mean_retransmission_cycles - 0.1).abs() < 1e-12);
    assert!((m.measured_cycle_ms - 3.0).abs() < 1e-9);
    // Every session lasts 7 ms from its first segment to TX_END.
    assert!((m.tx_duration_ms.mean - 7.0).abs() < 1e-9);
}
