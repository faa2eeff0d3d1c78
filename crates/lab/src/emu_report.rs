//! The emulator's exit summary, read back from `dtnkit emu`'s standard output.
//!
//! The relay prints, per direction, a line `forward received N (..) sent N (..) cpu ..` followed by
//! `model: channel N unavailable N queue_full N | not model: kernel N overflow N truncated N no_destination N
//! send_errors N | pending_at_exit N log_dropped N`, and a machine-wide kernel drop line. This module turns that
//! text into counters by `key value` pairs (so added fields and reordering do not break it); a missing field
//! stays `None` rather than becoming a made-up zero.

/// Datagram counters of one relay direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionCounters {
    /// Datagrams the relay received on this direction's input.
    pub received: Option<u64>,
    /// Datagrams it sent on.
    pub sent: Option<u64>,
    /// Lost by the channel model's loss process.
    pub lost_channel: Option<u64>,
    /// Lost because the direction was unavailable.
    pub lost_unavailable: Option<u64>,
    /// Tail-dropped by the modelled transmit queue.
    pub queue_full: Option<u64>,
    /// Dropped by the kernel at the relay's input socket (buffer full).
    pub input_kernel_drops: Option<u64>,
    /// The relay's own drops: no free slot.
    pub overflow: Option<u64>,
    /// Datagrams longer than a slot.
    pub truncated: Option<u64>,
    /// Datagrams with nowhere to go.
    pub no_destination: Option<u64>,
    /// Failed sends.
    pub send_errors: Option<u64>,
    /// Datagrams still held when the relay stopped.
    pub pending_at_exit: Option<u64>,
}

/// The relay's counters for a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmuCounters {
    /// A → B (the scenario link's forward direction).
    pub forward: DirectionCounters,
    /// B → A.
    pub ret: DirectionCounters,
    /// Machine-wide kernel UDP receive-buffer drops during the relay's run, when readable.
    pub kernel_drops: Option<u64>,
}

impl DirectionCounters {
    fn set(&mut self, key: &str, v: u64) {
        let slot = match key {
            "received" => &mut self.received,
            "sent" => &mut self.sent,
            "channel" => &mut self.lost_channel,
            "unavailable" => &mut self.lost_unavailable,
            "queue_full" => &mut self.queue_full,
            "kernel" => &mut self.input_kernel_drops,
            "overflow" => &mut self.overflow,
            "truncated" => &mut self.truncated,
            "no_destination" => &mut self.no_destination,
            "send_errors" => &mut self.send_errors,
            "pending_at_exit" => &mut self.pending_at_exit,
            _ => return,
        };
        *slot = Some(v);
    }

    /// Drops that are not the channel model's decisions (relay input kernel drops, no slot, truncated, no
    /// destination, send errors): in a sound experiment zero.
    pub fn relay_drops(&self) -> u64 {
        [
            self.input_kernel_drops,
            self.overflow,
            self.truncated,
            self.no_destination,
            self.send_errors,
        ]
        .iter()
        .map(|v| v.unwrap_or(0))
        .sum()
    }
}

/// Parses `dtnkit emu`'s exit summary.
pub fn parse(text: &str) -> EmuCounters {
    let mut out = EmuCounters::default();
    let mut current: Option<bool> = None; // Some(true) = forward
    for line in text.lines() {
        if line.starts_with("forward") {
            current = Some(true);
        } else if line.starts_with("return") {
            current = Some(false);
        } else if let Some(rest) = line.strip_prefix("kernel UDP receive-buffer drops") {
            out.kernel_drops = rest.rsplit(':').next().and_then(|v| v.trim().parse().ok());
            continue;
        }
        let Some(fwd) = current else { continue };
        let d = if fwd { &mut out.forward } else { &mut out.ret };
        let tokens: Vec<&str> = line.split_whitespace().collect();
        for pair in tokens.windows(2) {
            if let [k, v] = pair {
                if let Ok(n) = v.parse::<u64>() {
                    d.set(k, n);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_relay_summary() {
        let text = "relay ran 3.001 s\n\
forward  received      12000 (    32.1 Mb/s)  sent      11900 (    31.9 Mb/s)  cpu 12.5 %\n\
         model: channel 100 unavailable 0 queue_full 2 | not model: kernel 4 overflow 0 truncated 0 no_destination 0 send_errors 0 | pending_at_exit 0 log_dropped 0\n\
return   received        300 (     0.1 Mb/s)  sent        300 (     0.1 Mb/s)  cpu 0.4 %\n\
         model: channel 0 unavailable 0 queue_full 0 | not model: kernel 0 overflow 1 truncated 0 no_destination 0 send_errors 0 | pending_at_exit 3 log_dropped 0\n\
drops other than the models' decisions: 5\n\
kernel UDP receive-buffer drops machine-wide during the run (relay and endpoints): 7\n";
        let c = parse(text);
        assert_eq!(c.forward.received, Some(12000));
        assert_eq!(c.forward.sent, Some(11900));
        assert_eq!(c.forward.lost_channel, Some(100));
        assert_eq!(c.forward.queue_full, Some(2));
        assert_eq!(c.forward.input_kernel_drops, Some(4));
        assert_eq!(c.forward.relay_drops(), 4);
        assert_eq!(c.ret.received, Some(300));
        assert_eq!(c.ret.pending_at_exit, Some(3));
        assert_eq!(c.ret.relay_drops(), 1);
        assert_eq!(c.kernel_drops, Some(7));
        assert_eq!(parse("").forward.received, None);
    }
}
