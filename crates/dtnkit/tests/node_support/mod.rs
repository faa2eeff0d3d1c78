//! Shared harness of the multi-process node tests: nodes are real `dtnkit node` processes on
//! 127.0.0.1 with free ports and temporary directories; every wait is bounded and children are
//! killed on drop.

#![allow(dead_code)]

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub mod lossy;
pub mod monitor;

pub const BIN: &str = env!("CARGO_BIN_EXE_dtnkit");

/// A fresh temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "dtnkit-{tag}-{}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos() ^ rand_suffix()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("DTNKIT_KEEP_TEST_DIRS").is_some() {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free UDP port on loopback (bound then released).
/// A TCP port on 127.0.0.1 that was free a moment ago (for TCPCL listeners).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Settings of one node in a test topology.
pub struct NodeSpec {
    pub node: u64,
    pub port: u16,
    /// (peer node, peer port)
    pub spans: Vec<(u64, u16)>,
    /// (dest, via)
    pub routes: Vec<(u64, u64)>,
    pub plan: Option<String>,
    pub quota: u64,
    pub rto_ms: f64,
    pub extra: String,
    /// More `[store]` keys (one per line).
    pub store_extra: String,
}

impl NodeSpec {
    pub fn new(node: u64, port: u16) -> Self {
        Self {
            node,
            port,
            spans: Vec::new(),
            routes: Vec::new(),
            plan: None,
            quota: 1 << 30,
            rto_ms: 200.0,
            extra: String::new(),
            store_extra: String::new(),
        }
    }
}

/// A node process.
pub struct NodeProc {
    pub spec_dir: PathBuf,
    pub config: PathBuf,
    pub socket: PathBuf,
    child: Option<Child>,
    /// The network namespace the process runs in (`None`: this process's).
    netns: Option<PathBuf>,
}

impl NodeProc {
    /// Writes the configuration under `dir/nN` and starts the node; waits for its socket.
    pub fn start(dir: &Path, s: &NodeSpec) -> Self {
        Self::start_in(dir, s, None)
    }

    /// As [`NodeProc::start`], the process running inside the network namespace `netns` (its application socket
    /// is a file, reachable from any namespace).
    pub fn start_in(dir: &Path, s: &NodeSpec, netns: Option<&Path>) -> Self {
        let nd = dir.join(format!("n{}", s.node));
        std::fs::create_dir_all(&nd).unwrap();
        let mut cfg = format!(
            "node = {}\nbind = \"127.0.0.1:{}\"\n{}\n[store]\npath = \"store\"\nquota_bytes = {}\n{}\n[log]\nbundles = \"bundles.csv\"\nroutes = \"routes.csv\"\n",
            s.node, s.port, if s.plan.is_some() { "contact_plan = \"plan.txt\"" } else { "" }, s.quota, s.store_extra
        );
        for (peer, port) in &s.spans {
            cfg.push_str(&format!(
                "\n[[span]]\npeer = {peer}\naddress = \"127.0.0.1:{port}\"\nrto_ms = {}\nmax_sessions = 32\n",
                s.rto_ms
            ));
        }
        for (dest, via) in &s.routes {
            cfg.push_str(&format!("\n[[route]]\ndest = {dest}\nvia = {via}\n"));
        }
        cfg.push_str(&s.extra);
        if let Some(p) = &s.plan {
            std::fs::write(nd.join("plan.txt"), p).unwrap();
        }
        let config = nd.join("node.toml");
        std::fs::write(&config, cfg).unwrap();
        let socket = nd.join("store").join("app.sock");
        let mut n = NodeProc {
            spec_dir: nd,
            config,
            socket,
            child: None,
            netns: netns.map(Path::to_path_buf),
        };
        n.restart();
        n
    }

    /// (Re)starts the process and waits until its application socket answers.
    pub fn restart(&mut self) {
        // The node's stderr is kept (appended across restarts) for post-mortems.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.spec_dir.join("node.err"))
            .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["node", "--config"])
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log);
        let _ns = self.netns.as_deref().map(|ns| lossy::enter(&mut cmd, ns));
        let child = cmd.spawn().unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if client::Client::connect(&self.socket)
                .and_then(|mut c| c.status())
                .is_ok()
            {
                return;
            }
            // A node that exited (a port taken meanwhile, a bad setting) says why on stderr.
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            let why =
                || std::fs::read_to_string(self.spec_dir.join("node.err")).unwrap_or_default();
            assert!(exited.is_none(), "node exited ({exited:?}): {}", why());
            assert!(
                Instant::now() < deadline,
                "node did not come up in 30 s: {}",
                why()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The process id of the running node (None after `kill`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Takes the running process out of the handle (the caller waits for it).
    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// The node's status.
    pub fn status(&self) -> client::NodeStatus {
        let mut c = client::Client::connect(&self.socket).unwrap();
        c.node_status().unwrap()
    }

    /// The `tcpcl` section of the node's status (the node runs TCPCL).
    pub fn tcpcl(&self) -> client::status::TcpclStatus {
        self.status().tcpcl.expect("tcpcl section")
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A child process killed on drop. Its stdout and stderr go to files (a pipe nobody reads
/// during the run would stall a chatty child once the pipe buffer is full).
pub struct Proc(pub Option<Child>, PathBuf, PathBuf);

static PROC_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Proc {
    pub fn spawn(args: &[&str]) -> Self {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        Self::spawn_command(cmd)
    }

    /// Any program, its output going to files like `dtnkit`'s.
    pub fn spawn_command(mut cmd: Command) -> Self {
        let n = PROC_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("dtnkit-proc-{}-{n}", std::process::id()));
        let (out, err) = (base.with_extension("out"), base.with_extension("err"));
        let c = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {:?}: {e}", cmd.get_program()));
        Proc(Some(c), out, err)
    }

    fn output(&self, status: std::process::ExitStatus) -> Output {
        let o = Output {
            status,
            stdout: std::fs::read(&self.1).unwrap_or_default(),
            stderr: std::fs::read(&self.2).unwrap_or_default(),
        };
        let _ = std::fs::remove_file(&self.1);
        let _ = std::fs::remove_file(&self.2);
        o
    }

    /// Waits up to `limit` for the exit; panics (after killing) when it takes longer.
    pub fn wait(mut self, limit: Duration) -> Output {
        let deadline = Instant::now() + limit;
        let mut c = self.0.take().unwrap();
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return self.output(st);
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let st = c.wait().unwrap();
                let out = self.output(st);
                panic!(
                    "process did not finish in {limit:?}; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.1);
        let _ = std::fs::remove_file(&self.2);
    }
}

/// Runs `dtnkit ARGS` to completion within `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    Proc::spawn(args).wait(limit)
}

/// Nodes 1 and 2 joined by an LTP span each way (retransmission timeout `rto_ms`).
pub fn ltp_pair(dir: &TempDir, rto_ms: f64) -> (NodeProc, NodeProc) {
    let (p1, p2) = (free_port(), free_port());
    let mut s1 = NodeSpec::new(1, p1);
    s1.spans.push((2, p2));
    s1.rto_ms = rto_ms;
    let mut s2 = NodeSpec::new(2, p2);
    s2.spans.push((1, p1));
    s2.rto_ms = rto_ms;
    (NodeProc::start(&dir.0, &s1), NodeProc::start(&dir.0, &s2))
}

/// Starts `dtnkit recv` waiting (up to 40 s) for `count` bundles on `endpoint`.
pub fn spawn_recv(socket: &Path, endpoint: &str, count: u64) -> Proc {
    Proc::spawn(&[
        "recv",
        "--socket",
        socket.to_str().unwrap(),
        "--endpoint",
        endpoint,
        "--count",
        &count.to_string(),
        "--timeout",
        "40",
    ])
}

/// Runs `dtnkit send` of `count` generated bundles of `size` bytes to `dst` (plus `extra`
/// options) within 60 s and asserts it succeeded.
pub fn send_ok(socket: &Path, dst: &str, size: usize, count: u64, extra: &[&str]) {
    let (size, count) = (size.to_string(), count.to_string());
    let mut args = vec![
        "send",
        "--socket",
        socket.to_str().unwrap(),
        "--dst",
        dst,
        "--size",
        &size,
        "--count",
        &count,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `dtnkit bundle make` of a bundle from ipn:1.1 to ipn:2.1 carrying `payload`, with `extra`
/// options, written to `out` within 30 s; its bytes.
pub fn make_bundle(out: &Path, payload: &str, extra: &[&str]) -> Vec<u8> {
    let mut args = vec![
        "bundle",
        "make",
        "--src",
        "ipn:1.1",
        "--dst",
        "ipn:2.1",
        "--payload",
        payload,
        "--output",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let made = run(&args, Duration::from_secs(30));
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    std::fs::read(out).unwrap()
}

/// Hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Deterministic test data.
pub fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The crash scenario shared by the LTP and TCPCL crash tests: `count` 200-byte bundles flow from
/// `sender` to the application on `receiver` (endpoint ipn:2.1) while `receiver` is killed with
/// SIGKILL and restarted four times; afterwards every bundle was delivered exactly once and the
/// sender's store drained (everything was acknowledged only after the receiver's commit).
pub fn kill_receiver_during_transfer(sender: &NodeProc, receiver: &mut NodeProc, count: u64) {
    let s1 = sender.socket.to_str().unwrap().to_string();
    let s2 = receiver.socket.to_str().unwrap().to_string();
    let n = count.to_string();
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        &s2,
        "--endpoint",
        "ipn:2.1",
        "--count",
        &n,
        "--timeout",
        "60",
    ]);
    let send = Proc::spawn(&[
        "send", "--socket", &s1, "--dst", "ipn:2.1", "--size", "200", "--count", &n, "--quiet",
    ]);
    let t0 = Instant::now();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(700));
        receiver.kill();
        std::thread::sleep(Duration::from_millis(100));
        receiver.restart();
    }
    let sent = send.wait(Duration::from_secs(120));
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let out = recv.wait(Duration::from_secs(150));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "recv: {err}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut ids = std::collections::HashSet::new();
    for line in text.lines() {
        assert!(line.starts_with("recv "), "{line}");
        assert!(
            ids.insert(line.split(" len=").next().unwrap().to_string()),
            "duplicate: {line}"
        );
    }
    assert_eq!(ids.len() as u64, count, "every bundle exactly once");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sender.status().store.bundles != 0 {
        assert!(
            Instant::now() < deadline,
            "sender store never emptied: {}",
            sender.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("crash test took {:?}", t0.elapsed());
}

/// The node's status reply survives the typed structs: the JSON text it sends over its socket,
/// and the one `dtnkit status --json` prints, parse into `client::NodeStatus`, which
/// serialises back to the same JSON (the same value and the same text: nothing dropped, added
/// or changed). Returns the parsed reply.
pub fn assert_status_round_trips(node: &NodeProc) -> client::NodeStatus {
    let wire = client::Client::connect(&node.socket)
        .unwrap()
        .status()
        .unwrap();
    let cli = run(
        &[
            "status",
            "--socket",
            node.socket.to_str().unwrap(),
            "--json",
        ],
        Duration::from_secs(30),
    );
    assert!(cli.status.success(), "{cli:?}");
    let printed = String::from_utf8(cli.stdout).unwrap();
    let mut parsed = Vec::new();
    for text in [wire.as_str(), printed.trim_end()] {
        let st = client::NodeStatus::from_json(text).unwrap();
        let again = st.to_json();
        let value = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
        assert_eq!(value(&again), value(text), "lossless round trip");
        assert_eq!(again, text, "the node serialises the same structs");
        assert_eq!(client::NodeStatus::from_json(&again).unwrap(), st);
        parsed.push(st);
    }
    parsed.swap_remove(0)
}

/// CPU time (user + system) a process has used so far, from /proc/PID/stat.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// Resident set size of a process in bytes, from /proc/PID/status.
pub fn rss_bytes(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}
