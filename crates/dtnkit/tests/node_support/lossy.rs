//! A lossy IP link for the interoperability tests of TCP-based convergence layers: TCP hides loss from the layers
//! above it, so it has to happen under TCP, at the IP level. The emulator's IP mode (`docs/ipemu.md`) puts two
//! network namespaces on either side of an emulated link; a peer runs in each and every IP packet between them is
//! subject to the link's loss model.
//!
//! It needs root (namespaces, TUN devices) and iproute2's `ip`, as the IP-mode tests (`tests/ipemu.rs`) do: without
//! them a test fails with what is missing, or is skipped with that message when `DTNKIT_SKIP_ROOT_TESTS` is set.

use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use emu::ip::{netns, IpEmu, IpEmuConfig, IpSummary, NodeInfo};

/// Whether the namespaces can be made here; panics with what is missing unless `DTNKIT_SKIP_ROOT_TESTS` is set.
pub fn netns_or_skip(test: &str) -> bool {
    match netns::check_environment() {
        Ok(()) => true,
        Err(e) if std::env::var_os("DTNKIT_SKIP_ROOT_TESTS").is_some() => {
            eprintln!("SKIPPED {test}: {e} (a lossy IP link needs network namespaces; DTNKIT_SKIP_ROOT_TESTS is set)");
            false
        }
        Err(e) => panic!(
            "{test} needs network namespaces for its lossy IP link: {e} (CI does), or set DTNKIT_SKIP_ROOT_TESTS=1 \
             to skip it"
        ),
    }
}

/// Two namespaces `a` and `b` joined by an emulated link with IID loss each way; deleted on drop.
pub struct LossyLink {
    emu: Option<IpEmu>,
    pub a: NodeInfo,
    pub b: NodeInfo,
}

impl LossyLink {
    /// Each IP packet is lost with probability `per` in each direction, after `delay_ms` one way.
    pub fn start(per: f64, delay_ms: u64, seed: u64) -> Self {
        let text = format!(
            "seed = {seed}\n[forward]\ndelay_ms = {delay_ms}\nloss = {{ model = \"iid\", per = {per} }}\n\
             [return]\ndelay_ms = {delay_ms}\nloss = {{ model = \"iid\", per = {per} }}\n"
        );
        let plan = IpEmuConfig::from_toml(&text)
            .expect("link configuration")
            .build(Path::new("."))
            .expect("link plan");
        let emu = IpEmu::start(plan).expect("the IP-mode emulator starts");
        let (a, b) = (emu.nodes()[0].clone(), emu.nodes()[1].clone());
        LossyLink {
            emu: Some(emu),
            a,
            b,
        }
    }

    pub fn addr_a(&self) -> Ipv4Addr {
        self.a.addrs[0]
    }

    pub fn addr_b(&self) -> Ipv4Addr {
        self.b.addrs[0]
    }

    pub fn ns_a(&self) -> PathBuf {
        self.a.netns_path()
    }

    pub fn ns_b(&self) -> PathBuf {
        self.b.netns_path()
    }

    /// Stops the emulator (ending what still runs in the namespaces) and returns its counters, checking that the
    /// link lost packets each way and dropped nothing its model did not decide.
    pub fn stop_and_check(mut self) -> IpSummary {
        let s = self
            .emu
            .take()
            .expect("running")
            .stop()
            .expect("emulator stops");
        let l = &s.links[0];
        eprintln!(
            "lossy link: a→b {} of {} packets lost, b→a {} of {} lost, unmodelled drops {}",
            l.forward.lost_channel,
            l.forward.received,
            l.ret.lost_channel,
            l.ret.received,
            s.unmodelled_drops
        );
        assert!(
            l.forward.lost_channel > 0 && l.ret.lost_channel > 0,
            "the link lost nothing in one direction, so the loss was not exercised: {s:?}"
        );
        assert_eq!(
            s.unmodelled_drops, 0,
            "drops the model did not decide: {s:?}"
        );
        s
    }
}

impl Drop for LossyLink {
    fn drop(&mut self) {
        if let Some(e) = self.emu.take() {
            let _ = e.stop();
        }
    }
}

/// Runs `f` on a thread inside the namespace `ns` (here when `None`): sockets it opens, and threads it starts,
/// belong to that namespace.
pub fn in_ns<T: Send + 'static>(
    ns: Option<&Path>,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    match ns {
        Some(ns) => netns::in_netns(ns, f),
        None => f(),
    }
}

/// A TCP connection to 127.0.0.1:`port` made from inside the namespace `ns` (or here when `None`); the socket
/// stays in that namespace whichever thread then uses it.
pub fn tcp_connect(ns: Option<&Path>, port: u16) -> std::io::Result<TcpStream> {
    in_ns(ns, move || {
        TcpStream::connect_timeout(&(Ipv4Addr::LOCALHOST, port).into(), Duration::from_secs(10))
    })
}

/// Makes `cmd` start inside the namespace `ns`; the returned file must stay open until the command is spawned.
pub fn enter(cmd: &mut std::process::Command, ns: &Path) -> std::fs::File {
    let f = std::fs::File::open(ns).unwrap_or_else(|e| panic!("namespace {}: {e}", ns.display()));
    netns::enter_on_exec(cmd, &f);
    f
}
