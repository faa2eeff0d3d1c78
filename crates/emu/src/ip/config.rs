//! The IP mode's TOML file: the namespaces (a chain of nodes), their addressing and kernel settings, and one
//! channel link per pair of neighbours.
//!
//! ```toml
//! seed = 1
//! [ip]
//! nodes = ["a", "b"]             # the chain, 2 to 8 nodes; link i joins nodes[i] and nodes[i + 1]
//! subnet = "10.201"              # link i is 10.201.i.0/24: the left node is .1, the right node .2
//! mtu = 1500
//! offload = true                 # TSO between the kernel and the emulator (segments are still decided one by one)
//! txqueuelen = 10000             # packets the kernel may queue on a TUN device for the emulator
//! max_held_bytes = 536870912     # bytes the emulator may hold in flight per direction
//! sysctl = { "net.ipv4.tcp_no_metrics_save" = "1" }   # set in every namespace
//! [ip.node.a]                    # per node: route metrics on every route the emulator installs there
//! initcwnd = 10
//! initrwnd = 10
//! cwnd_lock = 86                 # route `cwnd lock 86` (Linux applies it only via its TCP metrics cache)
//! congctl = "cubic"              # congestion control of the node's connections; also "hybla", "stp" (BPF)
//! sysctl = { "net.ipv4.tcp_slow_start_after_idle" = "0" }
//!
//! [forward]                      # a single link, as in `dtnkit emu`'s files (towards the last node)
//! rate_bps = 10e6
//! delay_ms = 250
//! [return]
//! rate_bps = 1e6
//! delay_ms = 250
//!
//! # or, for chains, one [[link]] per pair (link i: forward = nodes[i] -> nodes[i + 1]):
//! # [[link]]
//! # forward = { delay_ms = 0 }
//! # return = { delay_ms = 0 }
//! ```

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use channel::config::{ConfigError, DirectionConfig};
use channel::Link;
use serde::Deserialize;

/// Most nodes in a chain.
pub const MAX_NODES: usize = 8;

/// `[ip.node.NAME]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// `initcwnd` route metric (initial congestion window, segments).
    #[serde(default)]
    pub initcwnd: Option<u32>,
    /// `initrwnd` route metric (initial receive window, segments).
    #[serde(default)]
    pub initrwnd: Option<u32>,
    /// `cwnd lock N` route metric. Linux applies it only through its TCP metrics cache (no entry before a connection
    /// to the destination has closed, none with `tcp_no_metrics_save`), so on fresh namespaces it bounds nothing.
    #[serde(default)]
    pub cwnd_lock: Option<u32>,
    /// `congctl NAME` route metric: the congestion control of every TCP connection over the node's routes (any the
    /// kernel has, or `hybla` / `stp`, which the emulator loads as BPF programs; unlike the namespace's default
    /// sysctl, which outside the host namespace only accepts those in `net.ipv4.tcp_allowed_congestion_control`).
    /// The kernel applies it when a connection is set up, replacing a `TCP_CONGESTION` set before `connect`; a
    /// socket can still change it afterwards.
    #[serde(default)]
    pub congctl: Option<String>,
    /// Sysctls of this namespace (after the `[ip]` ones).
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
}

/// `[ip]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IpSection {
    /// Chain of node names.
    #[serde(default = "default_nodes")]
    pub nodes: Vec<String>,
    /// First two octets of the link subnets.
    #[serde(default = "default_subnet")]
    pub subnet: String,
    /// MTU of every TUN device.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// TSO + checksum offload between the kernel and the emulator.
    #[serde(default = "yes")]
    pub offload: bool,
    /// Queue length of every TUN device.
    #[serde(default = "default_txqueuelen")]
    pub txqueuelen: u32,
    /// Bytes held per direction.
    #[serde(default = "default_held")]
    pub max_held_bytes: u64,
    /// SCHED_FIFO priority of the emulator threads.
    #[serde(default)]
    pub rt_priority: Option<u32>,
    /// Sysctls of every namespace.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Per-node settings.
    #[serde(default)]
    pub node: BTreeMap<String, NodeSection>,
}

fn default_nodes() -> Vec<String> {
    vec!["a".into(), "b".into()]
}
fn default_subnet() -> String {
    "10.201".into()
}
fn default_mtu() -> u32 {
    1500
}
fn yes() -> bool {
    true
}
fn default_txqueuelen() -> u32 {
    10_000
}
fn default_held() -> u64 {
    512 << 20
}

impl Default for IpSection {
    fn default() -> Self {
        IpSection {
            nodes: default_nodes(),
            subnet: default_subnet(),
            mtu: default_mtu(),
            offload: true,
            txqueuelen: default_txqueuelen(),
            max_held_bytes: default_held(),
            rt_priority: None,
            sysctl: BTreeMap::new(),
            node: BTreeMap::new(),
        }
    }
}

/// `[[link]]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    /// Seed of this link (default: the file's seed + the link index).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Towards the later node of the chain.
    #[serde(default)]
    pub forward: DirectionConfig,
    /// Towards the earlier node.
    #[serde(default, rename = "return")]
    pub ret: DirectionConfig,
}

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IpEmuConfig {
    /// Seed of the links.
    #[serde(default)]
    pub seed: u64,
    /// Namespaces and addressing.
    #[serde(default)]
    pub ip: IpSection,
    /// The single link's forward direction (when there is no `[[link]]`).
    #[serde(default)]
    pub forward: Option<DirectionConfig>,
    /// The single link's return direction.
    #[serde(default, rename = "return")]
    pub ret: Option<DirectionConfig>,
    /// One per pair of neighbours.
    #[serde(default)]
    pub link: Vec<LinkSection>,
}

/// A node of the validated chain.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePlan {
    /// Name.
    pub name: String,
    /// Route metrics and sysctls.
    pub settings: NodeSection,
}

/// The validated setup: nodes, links and resources.
#[derive(Clone, Debug)]
pub struct IpPlan {
    /// The chain.
    pub nodes: Vec<NodePlan>,
    /// Link `i` joins `nodes[i]` and `nodes[i + 1]`.
    pub links: Vec<Link>,
    /// First two octets of the link subnets.
    pub subnet: [u8; 2],
    /// MTU.
    pub mtu: u32,
    /// Offloads on.
    pub offload: bool,
    /// TUN queue length.
    pub txqueuelen: u32,
    /// Bytes held per direction.
    pub max_held_bytes: u64,
    /// SCHED_FIFO priority.
    pub rt_priority: Option<u32>,
    /// Sysctls of every namespace.
    pub sysctl: BTreeMap<String, String>,
}

impl IpPlan {
    /// Address of `node` on link `link` (`.1` for the left end, `.2` for the right end).
    pub fn address(&self, link: usize, right: bool) -> Ipv4Addr {
        Ipv4Addr::new(
            self.subnet[0],
            self.subnet[1],
            link as u8,
            if right { 2 } else { 1 },
        )
    }

    /// Addresses of node `i` (one per link it touches, left link first).
    pub fn addresses(&self, i: usize) -> Vec<Ipv4Addr> {
        let mut v = Vec::new();
        if i > 0 {
            v.push(self.address(i - 1, true));
        }
        if i + 1 < self.nodes.len() {
            v.push(self.address(i, false));
        }
        v
    }
}

fn invalid(field: &str, value: impl std::fmt::Display, expected: &str) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

fn valid_sysctl_key(k: &str) -> bool {
    !k.is_empty()
        && k.split('.').all(|s| {
            !s.is_empty()
                && s != ".."
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

impl IpEmuConfig {
    /// Parses a file's text (types and unknown fields; values are checked by [`IpEmuConfig::build`]).
    pub fn from_toml(text: &str) -> Result<IpEmuConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Validates every field and builds the plan; `base_dir` resolves trace files.
    pub fn build(&self, base_dir: &Path) -> Result<IpPlan, ConfigError> {
        let ip = &self.ip;
        let n = ip.nodes.len();
        if !(2..=MAX_NODES).contains(&n) {
            return Err(invalid(
                "ip.nodes",
                format!("{:?}", ip.nodes),
                &format!("2 to {MAX_NODES} node names"),
            ));
        }
        for (i, name) in ip.nodes.iter().enumerate() {
            let ok = (1..=8).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
            if !ok {
                return Err(invalid(
                    &format!("ip.nodes[{i}]"),
                    format!("{name:?}"),
                    "1 to 8 lower-case letters or digits",
                ));
            }
            if ip.nodes[..i].contains(name) {
                return Err(invalid(
                    &format!("ip.nodes[{i}]"),
                    format!("{name:?}"),
                    "a name not used twice",
                ));
            }
        }
        if let Some(k) = ip.node.keys().find(|k| !ip.nodes.contains(k)) {
            return Err(invalid(
                &format!("ip.node.{k}"),
                k,
                "the name of a node in ip.nodes",
            ));
        }
        let octets: Vec<Option<u8>> = ip.subnet.split('.').map(|s| s.parse().ok()).collect();
        let subnet = match octets.as_slice() {
            [Some(a), Some(b)] => [*a, *b],
            _ => {
                return Err(invalid(
                    "ip.subnet",
                    format!("{:?}", ip.subnet),
                    "two octets, e.g. \"10.201\"",
                ))
            }
        };
        if !(576..=65_535).contains(&ip.mtu) {
            return Err(invalid("ip.mtu", ip.mtu, "an MTU in [576, 65535]"));
        }
        if !(1..=1_000_000).contains(&ip.txqueuelen) {
            return Err(invalid(
                "ip.txqueuelen",
                ip.txqueuelen,
                "a queue length in [1, 1000000]",
            ));
        }
        if !((1 << 20)..=(1 << 36)).contains(&ip.max_held_bytes) {
            return Err(invalid(
                "ip.max_held_bytes",
                ip.max_held_bytes,
                "bytes in [1 MiB, 64 GiB]",
            ));
        }
        if let Some(p) = ip.rt_priority.filter(|p| !(1..=99).contains(p)) {
            return Err(invalid(
                "ip.rt_priority",
                p,
                "a SCHED_FIFO priority in [1, 99]",
            ));
        }
        let sysctls = ip
            .sysctl
            .keys()
            .map(|k| (format!("ip.sysctl.{k}"), k))
            .chain(ip.node.iter().flat_map(|(n, s)| {
                s.sysctl
                    .keys()
                    .map(move |k| (format!("ip.node.{n}.sysctl.{k}"), k))
            }));
        for (field, k) in sysctls {
            if !valid_sysctl_key(k) {
                return Err(invalid(
                    &field,
                    format!("{k:?}"),
                    "a dotted sysctl name such as net.ipv4.tcp_no_metrics_save",
                ));
            }
        }
        for (name, s) in &ip.node {
            if let Some(cc) = &s.congctl {
                let ok = !cc.is_empty()
                    && cc.len() < 16
                    && cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ok {
                    return Err(invalid(
                        &format!("ip.node.{name}.congctl"),
                        format!("{cc:?}"),
                        "a congestion control name such as cubic",
                    ));
                }
            }
            for (field, v) in [
                ("initcwnd", s.initcwnd),
                ("initrwnd", s.initrwnd),
                ("cwnd_lock", s.cwnd_lock),
            ] {
                if let Some(v) = v.filter(|v| !(1..=100_000).contains(v)) {
                    return Err(invalid(
                        &format!("ip.node.{name}.{field}"),
                        v,
                        "a number of segments in [1, 100000]",
                    ));
                }
            }
        }
        let sections: Vec<LinkSection> = if self.link.is_empty() {
            vec![LinkSection {
                seed: None,
                forward: self.forward.clone().unwrap_or_default(),
                ret: self.ret.clone().unwrap_or_default(),
            }]
        } else {
            if self.forward.is_some() || self.ret.is_some() {
                return Err(invalid(
                    "forward/return",
                    "set",
                    "either [forward]/[return] (one link) or [[link]] entries, not both",
                ));
            }
            self.link.clone()
        };
        if sections.len() != n - 1 {
            return Err(invalid(
                "link",
                format!("{} entries", sections.len()),
                &format!("{} (one per pair of neighbours in ip.nodes)", n - 1),
            ));
        }
        let mut links = Vec::new();
        for (i, l) in sections.iter().enumerate() {
            let prefix = if self.link.is_empty() {
                String::new()
            } else {
                format!("link[{i}].")
            };
            let f = l.forward.to_model(&format!("{prefix}forward"), base_dir)?;
            let r = l.ret.to_model(&format!("{prefix}return"), base_dir)?;
            let seed = l.seed.unwrap_or(self.seed.wrapping_add(i as u64));
            links.push(Link::new(f, r, seed));
        }
        Ok(IpPlan {
            nodes: ip
                .nodes
                .iter()
                .map(|name| NodePlan {
                    name: name.clone(),
                    settings: ip.node.get(name).cloned().unwrap_or_default(),
                })
                .collect(),
            links,
            subnet,
            mtu: ip.mtu,
            offload: ip.offload,
            txqueuelen: ip.txqueuelen,
            max_held_bytes: ip.max_held_bytes,
            rt_priority: ip.rt_priority,
            sysctl: ip.sysctl.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_a_chain() {
        let c = IpEmuConfig::from_toml("").unwrap();
        let p = c.build(Path::new(".")).unwrap();
        assert_eq!(p.nodes.len(), 2);
        assert_eq!(p.addresses(0), vec![Ipv4Addr::new(10, 201, 0, 1)]);
        assert_eq!(p.addresses(1), vec![Ipv4Addr::new(10, 201, 0, 2)]);
        let c = IpEmuConfig::from_toml(
            "[ip]\nnodes = ['a','g','b']\n[[link]]\n[[link]]\nforward = { delay_ms = 5 }\n",
        )
        .unwrap();
        let p = c.build(Path::new(".")).unwrap();
        assert_eq!(
            p.addresses(1),
            vec![Ipv4Addr::new(10, 201, 0, 2), Ipv4Addr::new(10, 201, 1, 1)]
        );
        assert_eq!(p.links.len(), 2);
    }

    #[test]
    fn errors_name_the_field() {
        let e = |t: &str| {
            IpEmuConfig::from_toml(t)
                .unwrap()
                .build(Path::new("."))
                .unwrap_err()
                .to_string()
        };
        assert!(e("[ip]\nnodes = ['a']").starts_with("ip.nodes"));
        assert!(e("[ip]\nnodes = ['a','B']").starts_with("ip.nodes[1]"));
        assert!(e("[ip]\nsubnet = '10'").starts_with("ip.subnet"));
        assert!(e("[ip.node.x]\ninitcwnd = 2").starts_with("ip.node.x"));
        assert!(e("[ip.node.a]\ninitcwnd = 0").starts_with("ip.node.a.initcwnd"));
        assert!(e("[ip]\nsysctl = { '../x' = '1' }").starts_with("ip.sysctl"));
        assert!(e("[ip]\nnodes = ['a','g','b']").starts_with("link = 1 entries"));
        assert!(e("[forward]\nloss = { model = 'iid', per = 2.0 }").starts_with("forward.loss.per"));
    }
}
