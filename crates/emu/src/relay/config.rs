//! The emulator's TOML file: `[relay]` addresses and resources, the link seed, `[forward]` and `[return]`.
//!
//! ```toml
//! seed = 1
//! [relay]
//! listen_a = "127.0.0.1:7000"   # endpoint A sends here; A's traffic goes forward to B
//! listen_b = "127.0.0.1:7001"   # endpoint B sends here; B's traffic goes back to A
//! b = "127.0.0.1:5201"          # endpoint B
//! # a = "127.0.0.1:6000"        # endpoint A; absent = the last source seen on listen_a
//! tcp_forward = false           # also relay TCP connections from listen_a to b, unmodelled (iperf3 control)
//! slots = 16384                 # datagrams held per direction (delay x rate / size must fit)
//! max_datagram = 9216           # bytes per slot; longer datagrams are dropped and counted as truncated
//! socket_buffer_bytes = 8388608
//! # rt_priority = 10           # run the relay threads SCHED_FIFO at this priority (root or CAP_SYS_NICE)
//! gro = true                    # kernel-coalesced receives of GSO senders' runs (decisions stay per datagram)
//! [forward]
//! delay_ms = 10
//! loss = { model = "iid", per = 0.01 }
//! [return]
//! delay_ms = 10
//! ```

use std::net::SocketAddr;
use std::path::Path;

use channel::config::{ConfigError, DirectionConfig};
use channel::Link;
use serde::Deserialize;

/// `[relay]` as written.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RelaySection {
    /// Address endpoint A sends to.
    pub listen_a: SocketAddr,
    /// Address endpoint B sends to.
    pub listen_b: SocketAddr,
    /// Endpoint A (absent: learned from the traffic on `listen_a`).
    #[serde(default)]
    pub a: Option<SocketAddr>,
    /// Endpoint B.
    pub b: SocketAddr,
    /// Relay TCP connections from `listen_a` to `b` without modelling (for tools with a TCP control channel).
    #[serde(default)]
    pub tcp_forward: bool,
    /// Datagram slots per direction.
    #[serde(default)]
    pub slots: Option<usize>,
    /// Bytes per slot.
    #[serde(default)]
    pub max_datagram: Option<usize>,
    /// Requested kernel socket buffer per socket.
    #[serde(default)]
    pub socket_buffer_bytes: Option<usize>,
    /// Real-time (SCHED_FIFO) priority of the relay threads, 1..=99; absent = normal scheduling.
    #[serde(default)]
    pub rt_priority: Option<u32>,
    /// Let the kernel coalesce runs of equal-size datagrams (UDP GRO) on the relay's input sockets; absent = on.
    #[serde(default)]
    pub gro: Option<bool>,
}

/// The whole file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EmuConfig {
    /// Link seed.
    #[serde(default)]
    pub seed: u64,
    /// Relay addresses and resources.
    pub relay: RelaySection,
    /// A → B.
    #[serde(default)]
    pub forward: DirectionConfig,
    /// B → A.
    #[serde(default, rename = "return")]
    pub ret: DirectionConfig,
}

/// Validated relay settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelaySettings {
    /// See [`RelaySection::listen_a`].
    pub listen_a: SocketAddr,
    /// See [`RelaySection::listen_b`].
    pub listen_b: SocketAddr,
    /// See [`RelaySection::a`].
    pub a: Option<SocketAddr>,
    /// See [`RelaySection::b`].
    pub b: SocketAddr,
    /// See [`RelaySection::tcp_forward`].
    pub tcp_forward: bool,
    /// See [`RelaySection::slots`].
    pub slots: usize,
    /// See [`RelaySection::max_datagram`].
    pub max_datagram: usize,
    /// See [`RelaySection::socket_buffer_bytes`].
    pub socket_buffer_bytes: usize,
    /// See [`RelaySection::rt_priority`].
    pub rt_priority: Option<u32>,
    /// See [`RelaySection::gro`].
    pub gro: bool,
}

/// Default datagram slots per direction: 10 ms of 1024-byte datagrams at ~13 Gb/s.
pub const DEFAULT_SLOTS: usize = 16_384;
/// Default slot size: a jumbo frame.
pub const DEFAULT_MAX_DATAGRAM: usize = 9_216;
/// Default socket buffer request.
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;

impl RelaySettings {
    /// Settings for two endpoints with default resources.
    pub fn new(
        listen_a: SocketAddr,
        listen_b: SocketAddr,
        a: Option<SocketAddr>,
        b: SocketAddr,
    ) -> Self {
        RelaySettings {
            listen_a,
            listen_b,
            a,
            b,
            tcp_forward: false,
            slots: DEFAULT_SLOTS,
            max_datagram: DEFAULT_MAX_DATAGRAM,
            socket_buffer_bytes: DEFAULT_SOCKET_BUFFER,
            rt_priority: None,
            gro: true,
        }
    }

    /// Checks the resource limits (addresses are already typed).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, value: usize, expected: &str| ConfigError::Invalid {
            field: field.into(),
            value: value.to_string(),
            expected: expected.into(),
        };
        if !(64..=1 << 20).contains(&self.slots) {
            return Err(bad(
                "relay.slots",
                self.slots,
                "a number of datagram slots in [64, 1048576]",
            ));
        }
        if !(1..=65_535).contains(&self.max_datagram) {
            return Err(bad(
                "relay.max_datagram",
                self.max_datagram,
                "a datagram size in bytes in [1, 65535]",
            ));
        }
        if self.slots.saturating_mul(self.max_datagram) > 4 << 30 {
            return Err(bad(
                "relay.slots",
                self.slots,
                "slots x max_datagram <= 4 GiB per direction (lower one of them)",
            ));
        }
        if let Some(p) = self.rt_priority {
            if !(1..=99).contains(&p) {
                return Err(bad(
                    "relay.rt_priority",
                    p as usize,
                    "a SCHED_FIFO priority in [1, 99]",
                ));
            }
        }
        if !(4096..=1 << 30).contains(&self.socket_buffer_bytes) {
            return Err(bad(
                "relay.socket_buffer_bytes",
                self.socket_buffer_bytes,
                "a size in bytes in [4096, 1073741824]",
            ));
        }
        Ok(())
    }
}

impl EmuConfig {
    /// Parses a file's text (types and unknown fields checked; values are validated by [`EmuConfig::build`]).
    pub fn from_toml(text: &str) -> Result<EmuConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Parses and validates a file's text; `base_dir` resolves relative trace paths. Errors are human-readable and
    /// name the field.
    pub fn parse(text: &str, base_dir: &Path) -> Result<(RelaySettings, Link), String> {
        let cfg: EmuConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.build(base_dir).map_err(|e| e.to_string())
    }

    /// Validates every field and builds the relay settings and the link.
    pub fn build(&self, base_dir: &Path) -> Result<(RelaySettings, Link), ConfigError> {
        let r = &self.relay;
        let settings = RelaySettings {
            listen_a: r.listen_a,
            listen_b: r.listen_b,
            a: r.a,
            b: r.b,
            tcp_forward: r.tcp_forward,
            slots: r.slots.unwrap_or(DEFAULT_SLOTS),
            max_datagram: r.max_datagram.unwrap_or(DEFAULT_MAX_DATAGRAM),
            socket_buffer_bytes: r.socket_buffer_bytes.unwrap_or(DEFAULT_SOCKET_BUFFER),
            rt_priority: r.rt_priority,
            gro: r.gro.unwrap_or(true),
        };
        settings.validate()?;
        let f = self.forward.to_model("forward", base_dir)?;
        let b = self.ret.to_model("return", base_dir)?;
        Ok((settings, Link::new(f, b, self.seed)))
    }
}
