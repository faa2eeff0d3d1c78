//! What the kernel says about a process or thread: CPU time and peak resident memory, and CPU affinity of the
//! calling thread. Linux only (`/proc`); elsewhere the readings are `None`/NaN.

/// User + system CPU seconds of process `pid`, all its threads (`/proc/PID/stat` fields 14 and 15).
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime field 15.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Peak resident set of process `pid`, MB (`VmHWM` in `/proc/PID/status`).
pub(crate) fn peak_rss_mb(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024.0 / 1e6)
}

/// User + system CPU seconds of the calling thread.
pub(crate) fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut u) != 0 {
            return f64::NAN;
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    }
}

/// Restricts the calling thread to CPU `cpu`.
pub(crate) fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: the CPU set is a local value; sched_setaffinity(0, ...) affects only the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time_and_memory() {
        let pid = std::process::id();
        // Burn a little CPU so the reading cannot be zero by accident of timing.
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert!(x != 1);
        assert!(cpu_seconds(pid).is_some_and(|c| c > 0.0));
        assert!(peak_rss_mb(pid).is_some_and(|m| m > 0.1));
        assert!(thread_cpu_seconds() > 0.0);
        assert!(cpu_seconds(u32::MAX).is_none());
    }
}
