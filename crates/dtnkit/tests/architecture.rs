//! Rules of `docs/architecture.md` that the compiler does not check, checked on the source:
//!
//! - the protocol engines and the agent are sans-IO: no clock read, thread, sleep or socket in
//!   their crates (time comes from the driver as `now`);
//! - a type that wraps an engine forwards what is safe instead of `Deref`-ing to it (`fec::Stack`,
//!   `cla::LtpCla`), so no engine input can bypass the layer around it;
//! - the node's threads talk through `messages` and `counters` only: no thread module imports
//!   another thread's module.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, with its text stripped of comments (line comments only: doc
/// comments may name what the rule forbids).
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("readable source");
                let code: String = text
                    .lines()
                    .map(|l| l.split("//").next().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push((p, code));
            }
        }
    }
    assert!(!out.is_empty(), "no sources under {}", dir.display());
    out
}

#[test]
fn engines_and_the_agent_read_no_clock_and_open_no_socket_or_thread() {
    let sans_io = [
        "bpv7", "bpsec", "ltp", "fec", "tcpcl", "stcp", "cfdp", "channel", "traffic", "bp", "cla",
        "orbit", "bibe",
    ];
    let forbidden = [
        "Instant::now",
        "SystemTime::now",
        "thread::spawn",
        "thread::sleep",
        "UdpSocket",
        "TcpStream",
        "TcpListener",
    ];
    let mut found = Vec::new();
    for c in sans_io {
        for (path, code) in sources(&root().join("crates").join(c).join("src")) {
            for f in forbidden {
                if code.contains(f) {
                    found.push(format!("{}: {f}", path.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "sans-IO crates doing I/O: {found:#?}");
}

#[test]
fn layers_around_an_engine_do_not_deref_to_it() {
    let mut found = Vec::new();
    for c in ["fec", "cla"] {
        for (path, code) in sources(&root().join("crates").join(c).join("src")) {
            for f in [
                "impl Deref",
                "impl DerefMut",
                "ops::Deref for",
                "ops::DerefMut for",
            ] {
                if code.contains(f) {
                    found.push(format!("{}: {f}", path.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The module names a file refers to through `crate::NAME` or `super::NAME`.
fn referenced_modules(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for prefix in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            rest = &rest[i + prefix.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                // `use crate::{a, b::c}`: every name at the start of a group entry.
                if let Some(group) = rest.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    for part in group[..end].split(',') {
                        let n: String = part
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !n.is_empty() {
                            names.push(n);
                        }
                    }
                }
            } else {
                names.push(name);
            }
        }
    }
    names
}

#[test]
fn no_thread_module_of_the_node_imports_another() {
    let src = root().join("crates/node/src");
    // Each thread and the files that make it up (a parent may start its own child's thread).
    let threads: [(&str, &[&str]); 7] = [
        ("agent_thread", &["agent_thread.rs"]),
        ("ltp_thread", &["ltp_thread.rs"]),
        ("ltp_blocks", &["ltp_blocks.rs"]),
        ("udpcl", &["udpcl.rs"]),
        ("app", &["app/mod.rs", "app/writer.rs"]),
        ("tcpcl", &["tcpcl/mod.rs", "tcpcl/session.rs"]),
        ("stcp", &["stcp/mod.rs", "stcp/recv.rs", "stcp/send.rs"]),
    ];
    let names: Vec<&str> = threads.iter().map(|t| t.0).collect();
    let mut found = Vec::new();
    for (thread, files) in threads {
        for f in files {
            let code = std::fs::read_to_string(src.join(f)).expect("thread module");
            let code: String = code
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            for m in referenced_modules(&code) {
                if names.contains(&m.as_str()) && m != thread {
                    found.push(format!("{f} ({thread}) imports {m}"));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
    // The check itself sees imports: the wiring module refers to every thread.
    let start = std::fs::read_to_string(src.join("start.rs")).expect("start.rs");
    let seen = referenced_modules(&start);
    assert!(
        ["agent_thread", "ltp_thread"]
            .iter()
            .all(|t| seen.iter().any(|m| m == t)),
        "{seen:?}"
    );
}
