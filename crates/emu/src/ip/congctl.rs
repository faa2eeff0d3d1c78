//! Congestion controls the kernel lacks, loaded as BPF programs: TCP Hybla and STP (`crates/emu/bpf/*.bpf.c`).
//!
//! Linux lets a BPF `struct_ops` map implement `tcp_congestion_ops`; once registered, the algorithm is listed in
//! `/proc/sys/net/ipv4/tcp_available_congestion_control` and chosen like any other: `TCP_CONGESTION` on a socket,
//! the `congctl` route metric, the namespace's default. [`ensure`] makes one of [`LOADABLE`] available:
//!
//! 1. if the kernel already lists the name and it is not an older dtnkit build of it, nothing is done (a kernel
//!    with its own `tcp_hybla` module keeps it);
//! 2. otherwise the C source embedded in this crate is compiled with `clang -target bpf` (CO-RE: field offsets are
//!    relocated against the running kernel's BTF, so no kernel headers are needed) and registered with
//!    `bpftool struct_ops register`.
//!
//! Why these tools rather than a loader linked into dtnkit: the program is compiled on the machine that loads it, so
//! a build machine without clang still produces a complete dtnkit, and no C library (libbpf, libelf, zlib) enters
//! the Rust build; `clang` and `bpftool` are Debian packages the IP mode needs only when a run names Hybla or STP,
//! as it needs iproute2's `ip` for every run.
//!
//! Lifetime: a registered `struct_ops` map stays registered after the process that registered it exits, like a
//! kernel module loaded on demand, so concurrent emulators share it and none can remove it under another. Its map
//! name carries a hash of the source (`hybla_1a2b3c4d`): a later dtnkit with a different program replaces it (an
//! unchanged one is reused). `bpftool struct_ops unregister name <map>` removes it; connections still using it
//! keep it until they close. Registration is serialised between dtnkit processes by a lock file.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The congestion controls dtnkit can load, with their sources.
pub const LOADABLE: &[(&str, &str)] = &[
    ("hybla", include_str!("../../bpf/hybla.bpf.c")),
    ("stp", include_str!("../../bpf/stp.bpf.c")),
];

const HEADER: &str = include_str!("../../bpf/dtk_bpf.h");
const LOCK_FILE: &str = "/run/dtnkit-ipemu/congctl.lock";
const BTF: &str = "/sys/kernel/btf/vmlinux";
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Whether dtnkit can load `name` itself.
pub fn is_loadable(name: &str) -> bool {
    LOADABLE.iter().any(|(n, _)| *n == name)
}

/// The congestion controls the kernel offers now.
pub fn available() -> Vec<String> {
    std::fs::read_to_string(AVAILABLE)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Whether `name` is available now or can be loaded (what a configuration check accepts before a run).
pub fn known(name: &str) -> bool {
    is_loadable(name) || available().iter().any(|a| a == name)
}

/// What [`ensure`] found or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provided {
    /// The kernel offers it and it is not a dtnkit program (a built-in algorithm or a kernel module).
    Kernel,
    /// This dtnkit's program was registered already.
    AlreadyLoaded,
    /// Compiled and registered now (under this map name).
    Loaded(String),
}

/// Why a congestion control could not be made available. Each says what to do; nothing was changed in the kernel.
#[derive(Debug, thiserror::Error)]
pub enum CongctlError {
    /// Neither the kernel's nor loadable.
    #[error("congestion control {name:?}: not available in this kernel (available: {available}) and not one dtnkit can load (hybla, stp)")]
    Unknown {
        /// The name asked for.
        name: String,
        /// What the kernel lists.
        available: String,
    },
    /// Loading BPF programs needs root.
    #[error("congestion control {name:?}: loading it as a BPF program needs root (CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON); run as root or load it once as root")]
    NoPrivilege {
        /// The name.
        name: String,
    },
    /// The kernel has no BTF.
    #[error("congestion control {name:?}: the kernel exposes no BTF ({BTF} is missing), which BPF congestion controls need (a kernel built with CONFIG_DEBUG_INFO_BTF=y and CONFIG_BPF_JIT)")]
    NoBtf {
        /// The name.
        name: String,
    },
    /// clang or bpftool missing.
    #[error("congestion control {name:?}: `{tool}` was not found in PATH; it is needed to load the BPF program (Debian: apt-get install {package})")]
    MissingTool {
        /// The name.
        name: String,
        /// The command.
        tool: &'static str,
        /// Its Debian package.
        package: &'static str,
    },
    /// clang refused the source.
    #[error("congestion control {name:?}: clang could not compile the BPF program: {message}")]
    Compile {
        /// The name.
        name: String,
        /// clang's output.
        message: String,
    },
    /// The kernel refused the program (the verifier's log is in the message).
    #[error("congestion control {name:?}: the kernel refused the BPF program: {message}")]
    Load {
        /// The name.
        name: String,
        /// bpftool's/libbpf's output, with the verifier log.
        message: String,
    },
    /// A file or command failed.
    #[error("congestion control {name:?}: {what}: {reason}")]
    Io {
        /// The name.
        name: String,
        /// The step.
        what: String,
        /// The error.
        reason: String,
    },
}

/// 32-bit FNV-1a of the header and the source: the map name's suffix, so a changed program is recognised.
fn tag(source: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in HEADER.bytes().chain(source.bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// The map name this build registers `name` under.
pub fn map_name(name: &str) -> Option<String> {
    LOADABLE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, src)| format!("{n}_{}", tag(src)))
}

fn find_tool(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .collect();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

fn clang() -> Option<PathBuf> {
    // Debian's `clang` package is a link to the versioned one; accept a versioned one alone too.
    find_tool(&[
        "clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14",
    ])
}

fn bpftool() -> Option<PathBuf> {
    find_tool(&["bpftool"])
}

/// Registered `struct_ops` maps: (id, map name).
fn struct_ops_maps(bpftool: &Path) -> Vec<(u32, String)> {
    let Ok(out) = Command::new(bpftool).args(["struct_ops", "show"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (id, rest) = l.split_once(':')?;
            let mut w = rest.split_whitespace();
            let name = w.next()?;
            (w.next()? == "tcp_congestion_ops").then(|| (id.trim().parse().ok(), name.to_string()))
        })
        .filter_map(|(id, n)| Some((id?, n)))
        .collect()
}

/// Whether a map name is one of dtnkit's for `name` (`<name>_` and 8 hex digits).
fn is_dtnkit_map(map: &str, name: &str) -> bool {
    map.strip_prefix(name)
        .and_then(|r| r.strip_prefix('_'))
        .is_some_and(|h| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An exclusive lock on [`LOCK_FILE`], waited for at most [`LOCK_WAIT`]; released when dropped.
struct RegistrationLock {
    _file: File,
}

impl RegistrationLock {
    fn take(name: &str) -> Result<RegistrationLock, CongctlError> {
        let io = |what: &str, e: std::io::Error| CongctlError::Io {
            name: name.into(),
            what: what.into(),
            reason: e.to_string(),
        };
        if let Some(dir) = Path::new(LOCK_FILE).parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("creating /run/dtnkit-ipemu", e))?;
        }
        let f = File::create(LOCK_FILE).map_err(|e| io("creating its lock file", e))?;
        let until = Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: flock(2) on a valid descriptor.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(RegistrationLock { _file: f });
            }
            if Instant::now() >= until {
                return Err(CongctlError::Io {
                    name: name.into(),
                    what: format!("waiting for {LOCK_FILE}"),
                    reason: format!("another dtnkit process held it for {LOCK_WAIT:?}"),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Makes `name` available in the kernel, loading dtnkit's BPF program if it is one of [`LOADABLE`] and the kernel
/// does not already offer it (see the module documentation).
pub fn ensure(name: &str) -> Result<Provided, CongctlError> {
    let Some((_, source)) = LOADABLE.iter().find(|(n, _)| *n == name) else {
        let avail = available();
        if avail.iter().any(|a| a == name) {
            return Ok(Provided::Kernel);
        }
        return Err(CongctlError::Unknown {
            name: name.into(),
            available: avail.join(" "),
        });
    };
    let map = format!("{name}_{}", tag(source));
    let listed = || available().iter().any(|a| a == name);
    // Quick path without privilege: nothing to do when this build's program is registered.
    let tool = bpftool();
    let maps = tool.as_deref().map(struct_ops_maps).unwrap_or_default();
    if listed() && maps.iter().any(|(_, m)| *m == map) {
        return Ok(Provided::AlreadyLoaded);
    }
    if listed() && tool.is_some() && !maps.iter().any(|(_, m)| is_dtnkit_map(m, name)) {
        return Ok(Provided::Kernel);
    }
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        return Err(CongctlError::NoPrivilege { name: name.into() });
    }
    if !Path::new(BTF).exists() {
        return Err(CongctlError::NoBtf { name: name.into() });
    }
    let missing = |tool, package| CongctlError::MissingTool {
        name: name.into(),
        tool,
        package,
    };
    let bpftool = tool.ok_or_else(|| missing("bpftool", "bpftool"))?;
    let clang = clang().ok_or_else(|| missing("clang", "clang"))?;
    let _lock = RegistrationLock::take(name)?;
    // Under the lock: another process may have finished the same work meanwhile.
    let maps = struct_ops_maps(&bpftool);
    if listed() && maps.iter().any(|(_, m)| *m == map) {
        return Ok(Provided::AlreadyLoaded);
    }
    for (id, old) in maps.iter().filter(|(_, m)| is_dtnkit_map(m, name)) {
        eprintln!(
            "congestion control {name}: replacing the program of another dtnkit build ({old})"
        );
        let _ = Command::new(&bpftool)
            .args(["struct_ops", "unregister", "id", &id.to_string()])
            .output();
    }
    if listed() {
        // Still listed after removing dtnkit's: the kernel's own.
        return Ok(Provided::Kernel);
    }
    let dir = std::env::temp_dir().join(format!("dtnkit-congctl-{}-{name}", std::process::id()));
    let result = compile_and_register(name, source, &map, &dir, &clang, &bpftool);
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    if !listed() {
        return Err(CongctlError::Load {
            name: name.into(),
            message: format!("bpftool registered {map}, but {AVAILABLE} does not list {name}"),
        });
    }
    Ok(Provided::Loaded(map))
}

fn compile_and_register(
    name: &str,
    source: &str,
    map: &str,
    dir: &Path,
    clang: &Path,
    bpftool: &Path,
) -> Result<(), CongctlError> {
    let io = |what: String, e: std::io::Error| CongctlError::Io {
        name: name.into(),
        what,
        reason: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
    let src = dir.join(format!("{name}.bpf.c"));
    let obj = dir.join(format!("{name}.bpf.o"));
    std::fs::write(dir.join("dtk_bpf.h"), HEADER)
        .and_then(|()| std::fs::write(&src, source))
        .map_err(|e| io(format!("writing {}", src.display()), e))?;
    let tag = &map[name.len() + 1..];
    let out = Command::new(clang)
        .args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall"])
        .arg(format!("-DDTK_TAG={tag}"))
        .arg("-I")
        .arg(dir)
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .map_err(|e| io(format!("running {}", clang.display()), e))?;
    if !out.status.success() {
        return Err(CongctlError::Compile {
            name: name.into(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let out = Command::new(bpftool)
        .args(["struct_ops", "register"])
        .arg(&obj)
        .output()
        .map_err(|e| io(format!("running {}", bpftool.display()), e))?;
    if !out.status.success() {
        let mut message = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if message.contains("Operation not permitted") {
            message.push_str(" (the process lacks CAP_BPF/CAP_PERFMON/CAP_NET_ADMIN, or a lockdown/LSM forbids BPF)");
        }
        return Err(CongctlError::Load {
            name: name.into(),
            message,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_names_fit_the_kernel_and_are_recognised() {
        for (n, _) in LOADABLE {
            let m = map_name(n).unwrap();
            // BPF object names are at most 15 characters.
            assert!(m.len() <= 15, "{m}");
            assert!(is_dtnkit_map(&m, n));
        }
        assert!(!is_dtnkit_map("hybla", "hybla"));
        assert!(!is_dtnkit_map("hybla_xyz", "hybla"));
        assert!(!is_dtnkit_map("stp_1234567", "stp"));
        assert!(map_name("cubic").is_none());
    }

    #[test]
    fn unknown_names_are_refused_with_what_exists() {
        let e = ensure("no_such_cc").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("\"no_such_cc\""), "{text}");
        assert!(text.contains("hybla, stp"), "{text}");
        assert!(known("hybla") && known("stp") && !known("no_such_cc"));
    }
}
