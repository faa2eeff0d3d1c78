//! Child processes that cannot outlive the lab.
//!
//! Every child runs in its own process group and gets `PR_SET_PDEATHSIG = SIGKILL` (Linux), so it dies with the
//! thread that started it even if the lab process is killed; a [`Child`] that is dropped without [`Child::stop`] is killed and reaped. Output goes to
//! files, never to pipes nobody reads (a chatty child would block on a full pipe).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::LabError;

/// One child process with its output files.
#[derive(Debug)]
pub struct Child {
    name: String,
    child: Option<std::process::Child>,
    /// File holding the child's standard output.
    pub stdout: PathBuf,
    /// File holding the child's standard error.
    pub stderr: PathBuf,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> LabError {
    move |source| LabError::Io { what, source }
}

impl Child {
    /// Starts `program args`, output to `<dir>/<name>.out` and `<dir>/<name>.err`.
    pub fn spawn(name: &str, program: &Path, args: &[&str], dir: &Path) -> Result<Child, LabError> {
        Child::spawn_in(name, program, args, dir, None)
    }

    /// [`Child::spawn`] inside the network namespace at `netns` (a file such as `/run/netns/NAME`), entered with
    /// `setns` between fork and exec: the child's sockets live in that namespace, its files are the host's.
    pub fn spawn_in(
        name: &str,
        program: &Path,
        args: &[&str],
        dir: &Path,
        netns: Option<&Path>,
    ) -> Result<Child, LabError> {
        Child::spawn_with(name, program, args, dir, netns, None)
    }

    /// [`Child::spawn`] with the child (and every thread it starts) restricted to CPU `cpu` by
    /// `sched_setaffinity` between fork and exec, as `taskset -c CPU` would.
    pub fn spawn_pinned(
        name: &str,
        program: &Path,
        args: &[&str],
        dir: &Path,
        cpu: usize,
    ) -> Result<Child, LabError> {
        Child::spawn_with(name, program, args, dir, None, Some(cpu))
    }

    fn spawn_with(
        name: &str,
        program: &Path,
        args: &[&str],
        dir: &Path,
        netns: Option<&Path>,
        cpu: Option<usize>,
    ) -> Result<Child, LabError> {
        #[cfg(not(target_os = "linux"))]
        let _ = cpu;
        let ns = match netns {
            Some(p) => {
                Some(std::fs::File::open(p).map_err(io(format!("opening {}", p.display())))?)
            }
            None => None,
        };
        #[cfg(target_os = "linux")]
        let ns_fd = {
            use std::os::fd::AsRawFd;
            ns.as_ref().map(|f| f.as_raw_fd())
        };
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let out =
            std::fs::File::create(&stdout).map_err(io(format!("creating {}", stdout.display())))?;
        let err =
            std::fs::File::create(&stderr).map_err(io(format!("creating {}", stderr.display())))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the forked child before exec and only calls setpgid(2), prctl(2),
            // setns(2) and sched_setaffinity(2), which are async-signal-safe, on a CPU set on its own stack; it
            // touches no memory of the parent.
            unsafe {
                cmd.pre_exec(move || {
                    // Own process group: a terminal Ctrl-C reaches only the lab, which then stops the children
                    // in order instead of having them vanish under a running experiment.
                    if libc::setpgid(0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if let Some(cpu) = cpu {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(cpu, &mut set);
                        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
                            != 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    // The namespace descriptor stays open in the parent until spawn returns.
                    if let Some(fd) = ns_fd {
                        if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().map_err(io(format!(
            "starting {name}: {} {}",
            program.display(),
            args.join(" ")
        )))?;
        drop(ns);
        Ok(Child {
            name: name.to_string(),
            child: Some(child),
            stdout,
            stderr,
        })
    }

    /// The process id while the child is not reaped (for a watchdog that must be able to kill it).
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's exit status if it already ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits up to `limit` for the child to end by itself (polled every 5 ms); its exit status, or `None` if it is
    /// still running (the caller decides whether to stop it).
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.exited() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Polls `ready` every `poll` until it gives a value, the child exits (an error with its standard error's
    /// tail) or `timeout` passes (an error saying `what` did not happen in time).
    pub fn wait_for<T>(
        &mut self,
        timeout: Duration,
        poll: Duration,
        what: &str,
        mut ready: impl FnMut(&Child) -> Option<T>,
    ) -> Result<T, LabError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = ready(self) {
                return Ok(v);
            }
            if let Some(st) = self.exited() {
                return Err(LabError::Startup {
                    name: self.name.clone(),
                    reason: format!("exited with {st}: {}", self.stderr_tail(2000)),
                });
            }
            if Instant::now() >= deadline {
                return Err(LabError::Startup {
                    name: self.name.clone(),
                    reason: format!("{what} within {timeout:?}: {}", self.stderr_tail(2000)),
                });
            }
            std::thread::sleep(poll);
        }
    }

    /// The last `n` bytes of the child's standard error (for error messages).
    pub fn stderr_tail(&self, n: usize) -> String {
        let text = std::fs::read(&self.stderr).unwrap_or_default();
        let start = text.len().saturating_sub(n);
        String::from_utf8_lossy(text.get(start..).unwrap_or_default())
            .trim()
            .to_string()
    }

    /// Asks the child to stop (SIGINT, which `dtnkit node` and `dtnkit emu` handle by shutting down cleanly),
    /// waits up to `grace`, then kills it. Returns the exit status and whether it stopped by itself.
    pub fn stop(&mut self, grace: Duration) -> Option<(ExitStatus, bool)> {
        let mut c = self.child.take()?;
        if let Ok(Some(st)) = c.try_wait() {
            return Some((st, true));
        }
        if let Ok(pid) = i32::try_from(c.id()) {
            // SAFETY: kill(2) on the pid of our own unreaped child: the pid cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            match c.try_wait() {
                Ok(Some(st)) => return Some((st, true)),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        let _ = c.kill();
        c.wait().ok().map(|st| (st, false))
    }
}

/// Kills the processes if `done` does not arrive within `limit` — a bound on waits that cannot be bounded
/// otherwise (a request to a node that stopped answering blocks on its socket; killing the node ends it).
/// Returns the watchdog thread; it yields true if it had to kill. The pids must belong to unreaped children
/// of this process until the thread is joined, so a recycled pid can never be hit.
pub fn watchdog(
    pids: Vec<u32>,
    limit: std::time::Duration,
    done: std::sync::mpsc::Receiver<()>,
) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        if !matches!(
            done.recv_timeout(limit),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        ) {
            return false;
        }
        for pid in pids {
            if let Ok(pid) = i32::try_from(pid) {
                // SAFETY: kill(2) on an unreaped child of this process (see the function's contract).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        true
    })
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(dir: &Path) -> Child {
        Child::spawn("sleep", Path::new("/bin/sleep"), &["30"], dir).unwrap()
    }

    #[test]
    fn watchdog_kills_when_done_never_comes_and_not_otherwise() {
        let dir = std::env::temp_dir().join(format!("lab-procs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut hung = sleeper(&dir);
        let (_tx, rx) = std::sync::mpsc::channel();
        let w = watchdog(
            hung.id().into_iter().collect(),
            Duration::from_millis(100),
            rx,
        );
        assert!(w.join().unwrap(), "the watchdog fired");
        let deadline = Instant::now() + Duration::from_secs(5);
        while hung.exited().is_none() {
            assert!(Instant::now() < deadline, "child still running");
            std::thread::sleep(Duration::from_millis(10));
        }

        let mut fine = sleeper(&dir);
        let (tx, rx) = std::sync::mpsc::channel();
        let w = watchdog(fine.id().into_iter().collect(), Duration::from_secs(30), rx);
        tx.send(()).unwrap();
        assert!(!w.join().unwrap());
        assert!(fine.exited().is_none(), "not killed");
        // SIGINT stops it within the grace time (sleep dies on SIGINT).
        let (_, clean) = fine.stop(Duration::from_secs(5)).unwrap();
        assert!(clean);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
