//! Named network namespaces owned by one emulator process, and the clean-up of those a killed process left.
//!
//! Ownership: before creating anything, an emulator takes an exclusive `flock` on `/run/dtnkit-ipemu/<id>.lock`
//! (`<id>` = the process id, then `_2`, `_3`, … for further emulators in the same process) and keeps it until it
//! stops; its namespaces are named `dtnk<id>-<node>` (visible to `ip netns exec`). The kernel releases the lock when
//! the process dies, even by SIGKILL, so a later run recognises stale namespaces exactly: a `dtnk<id>-*` namespace
//! whose lock file can be locked (or is missing) belongs to a dead run. Clean-up
//! kills the processes still inside such a namespace (a killed run's background servers) and deletes it; TUN
//! devices need nothing, they vanish with the descriptors of the process that created them.
//!
//! Setup uses iproute2's `ip` for namespaces, addresses and routes; TUN creation and sysctls run on a short-lived
//! thread that entered the namespace with `setns`, so the emulator process itself never leaves the host namespace.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Where `ip netns` keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";
/// Where the owners' lock files live.
pub const LOCK_DIR: &str = "/run/dtnkit-ipemu";
/// Prefix of every namespace the emulator creates.
pub const PREFIX: &str = "dtnk";

/// Why the IP mode cannot run here, or a setup step failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// Not root (namespaces, TUN devices and routes need CAP_SYS_ADMIN and CAP_NET_ADMIN).
    #[error("the IP mode needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN to create network namespaces and TUN devices); run it as root")]
    NotRoot,
    /// No TUN driver.
    #[error("/dev/net/tun is missing: the IP mode needs the kernel's TUN driver (modprobe tun)")]
    NoTun,
    /// iproute2 missing.
    #[error("iproute2's `ip` command was not found in PATH (Debian: apt-get install iproute2)")]
    NoIp,
    /// A command or system call failed.
    #[error("{what}: {reason}")]
    Failed {
        /// The step.
        what: String,
        /// What went wrong.
        reason: String,
    },
}

fn failed(what: impl Into<String>, reason: impl std::fmt::Display) -> NetnsError {
    NetnsError::Failed {
        what: what.into(),
        reason: reason.to_string(),
    }
}

/// Checks the three preconditions, in the order a user would fix them.
pub fn check_environment() -> Result<(), NetnsError> {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        return Err(NetnsError::NotRoot);
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err(NetnsError::NoTun);
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err(NetnsError::NoIp),
    }
}

/// Runs `ip ARGS`, turning a failure into an error that quotes the command and its message.
pub fn ip(args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| failed(format!("ip {}", args.join(" ")), e))?;
    if !out.status.success() {
        return Err(failed(
            format!("ip {}", args.join(" ")),
            String::from_utf8_lossy(&out.stderr).trim(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Path of a named namespace.
pub fn netns_path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// Runs `f` on a new thread that entered the namespace at `path` (the caller's threads stay where they are).
pub fn in_netns<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let path = path.to_path_buf();
    std::thread::Builder::new()
        .name("ipemu-setns".into())
        .spawn(move || {
            let ns = File::open(&path)?;
            // SAFETY: setns(2) on a valid namespace descriptor; only this thread changes namespace, and it ends
            // after `f`.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            f()
        })?
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
}

/// Makes `cmd` enter the namespace `ns` (an open namespace file) between fork and exec. `ns` must stay open until
/// the command is spawned.
pub fn enter_on_exec(cmd: &mut Command, ns: &File) {
    use std::os::unix::process::CommandExt;
    let fd = ns.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and only calls setns(2), which is
    // async-signal-safe; `fd` is open in the parent, hence in the child, until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sets `key` (dotted, e.g. `net.ipv4.ip_forward`) to `value` inside the namespace at `path`.
pub fn sysctl(path: &Path, key: &str, value: &str) -> Result<(), NetnsError> {
    let file = Path::new("/proc/sys").join(key.replace('.', "/"));
    let value = value.to_string();
    let f2 = file.clone();
    in_netns(path, move || std::fs::write(&f2, value.as_bytes()))
        .map_err(|e| failed(format!("sysctl {key} in {}", path.display()), e))
}

/// Inode of a namespace file (the namespace's identity in `/proc/PID/ns/net`).
fn ns_inode(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// Processes whose network namespace is the one at `path` (never this process).
pub fn pids_in(path: &Path) -> Vec<i32> {
    let Some(ino) = ns_inode(path) else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| m.ino() == ino)
        })
        .collect()
}

/// Ends every process inside the namespace: SIGTERM, up to `grace` to exit, then SIGKILL. Returns how many.
pub fn kill_inside(path: &Path, grace: Duration) -> usize {
    let pids = pids_in(path);
    for &p in &pids {
        // SAFETY: kill(2) with a pid read from /proc; a pid that ended meanwhile only gives ESRCH.
        unsafe {
            libc::kill(p, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !pids_in(path).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in pids_in(path) {
        // SAFETY: as above.
        unsafe {
            libc::kill(p, libc::SIGKILL);
        }
    }
    pids.len()
}

/// Deletes a named namespace after ending the processes inside it.
pub fn delete(name: &str) -> Result<(), NetnsError> {
    let path = netns_path(name);
    if !path.exists() {
        return Ok(());
    }
    kill_inside(&path, Duration::from_millis(500));
    ip(&["netns", "del", name]).map(|_| ())
}

/// This process's claim on its namespaces (the lock is held until the value is dropped or the process dies).
#[derive(Debug)]
pub struct Owner {
    lock: Option<File>,
    lock_path: PathBuf,
    /// Namespace names are `<prefix><node>`.
    pub prefix: String,
}

fn try_lock(f: &File) -> bool {
    // SAFETY: flock(2) on a valid descriptor.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Emulators started by this process so far (the second one's id is `<pid>_2`).
static INSTANCES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Owner {
    /// Takes the lock of a new owner id of this process.
    pub fn claim() -> Result<Owner, NetnsError> {
        std::fs::create_dir_all(LOCK_DIR).map_err(|e| failed(format!("creating {LOCK_DIR}"), e))?;
        let pid = std::process::id();
        let k = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let id = if k == 1 {
            pid.to_string()
        } else {
            format!("{pid}_{k}")
        };
        let lock_path = Path::new(LOCK_DIR).join(format!("{id}.lock"));
        let f = File::create(&lock_path)
            .map_err(|e| failed(format!("creating {}", lock_path.display()), e))?;
        if !try_lock(&f) {
            return Err(failed(
                format!("locking {}", lock_path.display()),
                "held by another process",
            ));
        }
        Ok(Owner {
            lock: Some(f),
            lock_path,
            prefix: format!("{PREFIX}{id}-"),
        })
    }

    /// The namespace name of a node.
    pub fn name(&self, node: &str) -> String {
        format!("{}{node}", self.prefix)
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.lock_path);
        self.lock.take();
    }
}

/// Whether `id` is an owner id: a process id, optionally `_` and an instance number.
fn valid_id(id: &str) -> bool {
    let (pid, k) = id.split_once('_').unwrap_or((id, "1"));
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_digit())
}

/// The owner id encoded in a namespace name `dtnk<id>-<node>`.
fn owner_id(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PREFIX)?;
    let (id, node) = rest.split_once('-')?;
    (!node.is_empty() && valid_id(id)).then_some(id)
}

/// Whether the owner with this id is gone (its lock file is missing or can be locked). A live owner holds its
/// lock, also against another open of the file in its own process.
fn owner_dead(id: &str) -> bool {
    let path = Path::new(LOCK_DIR).join(format!("{id}.lock"));
    match File::open(&path) {
        Err(_) => true,
        Ok(f) => try_lock(&f),
    }
}

/// Deletes the namespaces (and lock files) of runs that died without cleaning up. Returns the names deleted.
pub fn cleanup_stale() -> Result<Vec<String>, NetnsError> {
    let mut removed = Vec::new();
    if let Ok(dir) = std::fs::read_dir(NETNS_DIR) {
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        for name in names {
            let Some(id) = owner_id(&name) else {
                continue;
            };
            if owner_dead(id) {
                delete(&name)?;
                removed.push(name);
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir(LOCK_DIR) {
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".lock"))
                .filter(|id| valid_id(id))
            else {
                continue;
            };
            if owner_dead(id) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(removed)
}

/// Names of the namespaces currently present with the emulator's prefix.
pub fn list_ours() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut v: Vec<String> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| owner_id(n).is_some())
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_encode_the_owner() {
        assert_eq!(owner_id("dtnk123-a"), Some("123"));
        assert_eq!(owner_id("dtnk123_4-ab"), Some("123_4"));
        assert_eq!(owner_id("dtnk123-"), None);
        assert_eq!(owner_id("other-a"), None);
        assert_eq!(owner_id("dtnkx-a"), None);
        assert_eq!(owner_id("dtnk1_-a"), None);
    }
}
