//! The node process's CPU time, resident memory, threads and age, read from `/proc/self` (Linux)
//! for the status reply's `process` object and the `process_*` metrics.

use client::status::ProcessStatus;

/// Reads the process's resource use.
pub(crate) struct ProcessStats;

impl ProcessStats {
    /// Reads `/proc/self`: the status reply's `process` object, `None` (`null`) where it is
    /// not available (not Linux, no procfs).
    pub(crate) fn read() -> Option<ProcessStatus> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
        // SAFETY: sysconf only reads a configuration value.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let ticks = if ticks > 0 { ticks as f64 } else { 100.0 };
        Self::parse(&stat, &status, &uptime, ticks)
    }

    /// Parses the three files (`ticks`: clock ticks per second).
    fn parse(stat: &str, status: &str, uptime: &str, ticks: f64) -> Option<ProcessStatus> {
        // The command name (field 2) is in parentheses and may contain spaces: fields are
        // counted from the last ')'. After it come field 3 (state), 4, ...
        let rest = stat.get(stat.rfind(')')? + 1..)?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
        let (utime, stime, threads, start) = (field(14)?, field(15)?, field(20)?, field(22)?);
        let rss_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())?;
        let since_boot: f64 = uptime.split_whitespace().next()?.parse().ok()?;
        Some(ProcessStatus {
            cpu_seconds: (utime + stime) / ticks,
            rss_bytes: rss_kb * 1024,
            threads: threads as u64,
            uptime_seconds: (since_boot - start / ticks).max(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (dtnkit (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 \
                    17 0 1000 123456789 2000 18446744073709551615";
        let status = "Name:\tdtnkit\nVmPeak:\t  9000 kB\nVmRSS:\t    2048 kB\nThreads:\t17\n";
        let p = ProcessStats::parse(stat, status, "110.00 200.00", 100.0).unwrap();
        assert_eq!(p.cpu_seconds, 3.0);
        assert_eq!(p.rss_bytes, 2048 * 1024);
        assert_eq!(p.threads, 17);
        assert_eq!(p.uptime_seconds, 100.0);
    }

    #[test]
    fn this_process_has_cpu_time_and_memory() {
        let p = ProcessStats::read().expect("procfs");
        assert!(p.rss_bytes > 0 && p.threads >= 1, "{p:?}");
    }

    #[test]
    fn truncated_files_give_none() {
        assert_eq!(
            ProcessStats::parse("1 (x) S 1", "VmRSS: 1 kB", "1", 100.0),
            None
        );
    }
}
