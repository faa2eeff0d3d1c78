//! Construction of segment-log records (only when a sink is installed).

use super::*;

impl Engine {
    pub(super) fn log(&mut self, rec: SegmentRecord) {
        if let Some(sink) = self.sink.as_mut() {
            sink.record(&rec);
        }
    }

    pub(super) fn log_event(
        &mut self,
        now: Duration,
        remote: u64,
        id: SessionId,
        ev: LogEvent,
        value: u64,
        outcome: Outcome,
    ) {
        if self.sink.is_none() {
            return;
        }
        let (length, cps) = match ev {
            LogEvent::CheckpointTimeout => (0, value),
            LogEvent::ReportTimeout => (0, 0),
            _ => (value, 0),
        };
        let rps = if ev == LogEvent::ReportTimeout {
            value
        } else {
            0
        };
        self.log(SegmentRecord {
            time: now,
            dir: Direction::Ev,
            local_engine: self.cfg.local_engine_id,
            remote_engine: remote,
            session_originator: id.originator,
            session_number: id.number,
            kind: RecordKind::Event(ev),
            offset: 0,
            length,
            checkpoint_serial: cps,
            report_serial: rps,
            claims: 0,
            retransmission: false,
            datagram_len: 0,
            outcome,
        });
    }
}
