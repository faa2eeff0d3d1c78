//! The emulator's IP mode: network namespaces joined through the channel models by TUN devices, so any program
//! (kernel TCP, iperf3, `dtnkit node` over LTP, TCPCL or UDPCL) runs unmodified across an emulated link.
//!
//! ```text
//!  namespace dtnk<pid>-a          emulator process (host namespace)          namespace dtnk<pid>-b
//!  10.201.0.1 ── dtk0 (TUN) ──► read ─► link 0 forward model ─► write ──► dtk0 (TUN) ── 10.201.0.2
//!                          ◄── write ◄─ link 0 return model  ◄─ read  ◄──
//! ```
//!
//! A chain of nodes `[n0, n1, ..., nk]` gets one namespace per node and one link per pair of neighbours: link `i`
//! joins `n(i)` (address `S.i.1`) and `n(i+1)` (address `S.i.2`) with a TUN device `dtk<i>` in each, and its own
//! [`channel::Link`] (forward = towards the later node). Middle nodes forward IP (`ip_forward = 1`); every node has
//! a route to every link subnet through the device on that side, carrying the node's route metrics (`initcwnd`,
//! `initrwnd`, `cwnd lock …`, `congctl …`; TCP Hybla and STP are loaded as BPF programs when named, [`congctl`]). Each direction of each link is one thread ([`pump`]); TCP segmentation offload lets
//! the kernel hand over 64 KiB per read while the model still decides wire packet by wire packet ([`packet`]).
//!
//! Namespaces are owned through a lock file and cleaned up on stop, on drop, and — after a SIGKILL — by the next
//! run ([`netns`]).

pub mod config;
pub mod congctl;
pub mod netns;
pub mod packet;
mod pump;
pub mod tun;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

pub use config::{IpEmuConfig, IpPlan};
pub use netns::NetnsError;

use tun::Tun;

/// Counters of one direction of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IpDirectionStats {
    /// Reads from the input TUN device (a TSO packet is one read).
    pub reads: u64,
    /// Wire packets offered to the model.
    pub received: u64,
    /// Their IP bytes.
    pub received_bytes: u64,
    /// Wire packets the model delivered (and the emulator wrote).
    pub sent: u64,
    /// Their IP bytes.
    pub sent_bytes: u64,
    /// Writes into the output TUN device.
    pub writes: u64,
    /// Model: lost by the loss process.
    pub lost_channel: u64,
    /// Model: lost while the direction was unavailable.
    pub lost_unavailable: u64,
    /// Model: tail-dropped at the modelled queue.
    pub queue_full: u64,
    /// Not a model decision: more than `max_held_bytes` in flight.
    pub overflow: u64,
    /// Not a model decision: packets the emulator could not parse.
    pub malformed: u64,
    /// Not a model decision: writes the kernel refused.
    pub write_errors: u64,
    /// Not a model decision: packets the kernel dropped at the input TUN device's queue (the emulator fell
    /// behind), read from the device's `tx_dropped` counter at stop.
    pub tun_drops: u64,
    /// Delivered packets still held when the emulator stopped.
    pub pending_at_exit: u64,
    /// CPU time of the direction's thread.
    pub cpu_ns: u64,
}

impl IpDirectionStats {
    /// Drops that are not the model's decisions (zero in a sound experiment).
    pub fn unmodelled_drops(&self) -> u64 {
        self.overflow + self.malformed + self.write_errors + self.tun_drops
    }
}

/// Counters of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IpLinkStats {
    /// Towards the later node.
    pub forward: IpDirectionStats,
    /// Towards the earlier node.
    #[serde(rename = "return")]
    pub ret: IpDirectionStats,
}

/// A node as the user sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeInfo {
    /// Name from the configuration.
    pub name: String,
    /// Its namespace's name (`ip netns exec NAME ...`).
    pub netns: String,
    /// Its addresses, left link first.
    pub addrs: Vec<Ipv4Addr>,
}

impl NodeInfo {
    /// The namespace file (for `setns`).
    pub fn netns_path(&self) -> PathBuf {
        netns::netns_path(&self.netns)
    }
}

/// Final report of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IpSummary {
    /// Wall time the emulator ran, ns.
    pub elapsed_ns: u64,
    /// One per link.
    pub links: Vec<IpLinkStats>,
    /// Sum of every direction's [`IpDirectionStats::unmodelled_drops`].
    pub unmodelled_drops: u64,
}

/// Why the emulator did not start.
#[derive(Debug, thiserror::Error)]
pub enum IpEmuError {
    /// Environment or setup.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// A node's `congctl` is not available and could not be loaded.
    #[error(transparent)]
    Congctl(#[from] congctl::CongctlError),
    /// A thread or device failed.
    #[error("{0}")]
    Io(String),
}

/// A running emulator. [`IpEmu::stop`] tears everything down and returns the counters; dropping it tears down too.
pub struct IpEmu {
    nodes: Vec<NodeInfo>,
    stop: Arc<AtomicBool>,
    start: Instant,
    threads: Vec<JoinHandle<std::io::Result<IpDirectionStats>>>,
    /// (namespace, device) of each direction's input, for its drop counter.
    inputs: Vec<(String, String)>,
    owner: Option<netns::Owner>,
    torn_down: bool,
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> IpEmuError + '_ {
    move |e| IpEmuError::Io(format!("{what}: {e}"))
}

/// The kernel's `tx_dropped` counter of a device in a namespace (`ip -s -j link show`), if readable.
fn tun_tx_dropped(ns: &str, dev: &str) -> Option<u64> {
    let out = netns::ip(&["-n", ns, "-s", "-j", "link", "show", "dev", dev]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    let s = v.get(0)?.get("stats64")?.get("tx")?;
    s.get("dropped")?.as_u64()
}

impl IpEmu {
    /// Checks the environment, removes namespaces left by killed runs, creates the namespaces, devices, addresses
    /// and routes of `plan`, and starts one thread per link direction.
    pub fn start(plan: IpPlan) -> Result<IpEmu, IpEmuError> {
        netns::check_environment()?;
        // Congestion controls the routes name must exist before the routes are added (the kernel refuses an
        // unknown `congctl`); Hybla and STP are loaded here when the kernel lacks them.
        let mut names: Vec<&str> = plan
            .nodes
            .iter()
            .filter_map(|n| n.settings.congctl.as_deref())
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            if let congctl::Provided::Loaded(map) = congctl::ensure(name)? {
                eprintln!("congestion control {name}: loaded dtnkit's BPF program ({map})");
            }
        }
        netns::cleanup_stale()?;
        let owner = netns::Owner::claim()?;
        let mut emu = IpEmu {
            nodes: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            start: Instant::now(),
            threads: Vec::new(),
            inputs: Vec::new(),
            owner: Some(owner),
            torn_down: false,
        };
        // On any error below, dropping `emu` deletes what was created.
        let owner = emu
            .owner
            .as_ref()
            .map(|o| o.prefix.clone())
            .unwrap_or_default();
        let n = plan.nodes.len();
        for (i, node) in plan.nodes.iter().enumerate() {
            let name = format!("{owner}{}", node.name);
            netns::ip(&["netns", "add", &name])?;
            emu.nodes.push(NodeInfo {
                name: node.name.clone(),
                netns: name.clone(),
                addrs: plan.addresses(i),
            });
            netns::ip(&["-n", &name, "link", "set", "lo", "up"])?;
            let path = netns::netns_path(&name);
            let forward = if i > 0 && i + 1 < n { "1" } else { "0" };
            netns::sysctl(&path, "net.ipv4.ip_forward", forward)?;
            // The links carry IPv4 only; IPv6 on the devices would add router solicitations and MLD reports to
            // the traffic the models decide on (best effort: a kernel without IPv6 has no such setting).
            for k in [
                "net.ipv6.conf.all.disable_ipv6",
                "net.ipv6.conf.default.disable_ipv6",
            ] {
                let _ = netns::sysctl(&path, k, "1");
            }
            for (k, v) in plan.sysctl.iter().chain(node.settings.sysctl.iter()) {
                netns::sysctl(&path, k, v)?;
            }
        }
        // Devices: link i has dtk<i> in nodes i and i + 1.
        let mut tuns: Vec<(Tun, Tun)> = Vec::new();
        for i in 0..plan.links.len() {
            let dev = format!("dtk{i}");
            let mut ends = Vec::new();
            for (k, right) in [(i, false), (i + 1, true)] {
                let ns = emu.nodes[k].netns.clone();
                let d2 = dev.clone();
                let offload = plan.offload;
                let t = netns::in_netns(&netns::netns_path(&ns), move || Tun::create(&d2, offload))
                    .map_err(io_err(&format!("creating TUN device {dev} in {ns}")))?;
                netns::ip(&[
                    "-n",
                    &ns,
                    "link",
                    "set",
                    "dev",
                    &dev,
                    "mtu",
                    &plan.mtu.to_string(),
                    "txqueuelen",
                    &plan.txqueuelen.to_string(),
                    "up",
                ])?;
                let addr = format!("{}/32", plan.address(i, right));
                netns::ip(&["-n", &ns, "addr", "add", &addr, "dev", &dev])?;
                ends.push(t);
            }
            let right = ends.pop();
            let left = ends.pop();
            if let (Some(l), Some(r)) = (left, right) {
                tuns.push((l, r));
            }
        }
        // Routes: every link subnet through the device on its side, with the node's metrics.
        for (k, node) in plan.nodes.iter().enumerate() {
            let ns = &emu.nodes[k].netns;
            let s = &node.settings;
            let mut metrics: Vec<String> = Vec::new();
            if let Some(v) = s.initcwnd {
                metrics.extend(["initcwnd".into(), v.to_string()]);
            }
            if let Some(v) = s.initrwnd {
                metrics.extend(["initrwnd".into(), v.to_string()]);
            }
            if let Some(v) = s.cwnd_lock {
                metrics.extend(["cwnd".into(), "lock".into(), v.to_string()]);
            }
            if let Some(cc) = &s.congctl {
                metrics.extend(["congctl".into(), cc.clone()]);
            }
            for j in 0..plan.links.len() {
                let dev = if j < k {
                    format!("dtk{}", k - 1)
                } else {
                    format!("dtk{k}")
                };
                let net = format!("{}.{}.{j}.0/24", plan.subnet[0], plan.subnet[1]);
                let mut args: Vec<&str> = vec!["-n", ns, "route", "add", &net, "dev", &dev];
                args.extend(metrics.iter().map(String::as_str));
                netns::ip(&args)?;
            }
        }
        // Threads.
        emu.start = Instant::now();
        for (i, ((left, right), link)) in tuns.into_iter().zip(plan.links).enumerate() {
            let (fwd, ret) = link.into_directions();
            let dev = format!("dtk{i}");
            for (model, rx, tx, in_node, dir) in [
                (fwd, left.try_clone(), right.try_clone(), i, "fwd"),
                (ret, right.try_clone(), left.try_clone(), i + 1, "ret"),
            ] {
                let pump = pump::DirectionPump {
                    model,
                    rx: rx.map_err(io_err("cloning a TUN descriptor"))?,
                    tx: tx.map_err(io_err("cloning a TUN descriptor"))?,
                    start: emu.start,
                    stop: emu.stop.clone(),
                    max_held_bytes: plan.max_held_bytes,
                    rt_priority: plan.rt_priority,
                    mtu: plan.mtu as usize,
                };
                emu.inputs
                    .push((emu.nodes[in_node].netns.clone(), dev.clone()));
                let h = std::thread::Builder::new()
                    .name(format!("ipemu-{i}-{dir}"))
                    .spawn(move || pump.run())
                    .map_err(io_err("starting a direction thread"))?;
                emu.threads.push(h);
            }
        }
        Ok(emu)
    }

    /// The nodes, in chain order.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Whether a direction thread ended (an I/O error stops it early).
    pub fn is_finished(&self) -> bool {
        self.threads.iter().any(JoinHandle::is_finished)
    }

    /// Stops the threads, reads the counters, ends the processes left in the namespaces and deletes them.
    pub fn stop(mut self) -> Result<IpSummary, IpEmuError> {
        self.stop.store(true, Ordering::Relaxed);
        let elapsed_ns = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut dirs = Vec::new();
        let mut first_err = None;
        for (h, (ns, dev)) in std::mem::take(&mut self.threads)
            .into_iter()
            .zip(&self.inputs)
        {
            let mut s = match h.join() {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    first_err.get_or_insert(IpEmuError::Io(format!("direction thread: {e}")));
                    IpDirectionStats::default()
                }
                Err(_) => {
                    first_err.get_or_insert(IpEmuError::Io("direction thread panicked".into()));
                    IpDirectionStats::default()
                }
            };
            s.tun_drops = tun_tx_dropped(ns, dev).unwrap_or(0);
            dirs.push(s);
        }
        self.teardown();
        if let Some(e) = first_err {
            return Err(e);
        }
        let links: Vec<IpLinkStats> = dirs
            .chunks(2)
            .map(|c| IpLinkStats {
                forward: c.first().copied().unwrap_or_default(),
                ret: c.get(1).copied().unwrap_or_default(),
            })
            .collect();
        let unmodelled_drops = dirs.iter().map(IpDirectionStats::unmodelled_drops).sum();
        Ok(IpSummary {
            elapsed_ns,
            links,
            unmodelled_drops,
        })
    }

    fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        self.stop.store(true, Ordering::Relaxed);
        // The threads own the TUN descriptors: once they end, the devices are gone.
        for h in std::mem::take(&mut self.threads) {
            let _ = h.join();
        }
        for n in &self.nodes {
            let _ = netns::delete(&n.netns);
        }
        self.owner.take();
    }
}

impl Drop for IpEmu {
    fn drop(&mut self) {
        self.teardown();
    }
}
