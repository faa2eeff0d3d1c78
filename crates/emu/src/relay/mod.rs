//! The real-time link emulator: a UDP relay between endpoints A and B.
//!
//! Endpoint A sends to the relay's `listen_a` socket; the forward model of a [`channel::Link`] decides each
//! datagram's fate at its arrival time and delivered datagrams leave from `listen_b` towards B at their release time.
//! B's datagrams to `listen_b` take the return model back to A (from `listen_a`). Each direction runs on two threads
//! ([`pump`]): one receives (batched `recvmmsg`, UDP GRO, kernel timestamps) and asks the model, the other holds
//! delivered datagrams in preallocated slots until their release time and sends them (GSO/`sendmmsg`). Because the
//! decisions come from the same sans-IO models as the simulator, in arrival order on one thread, a run here and a
//! simulated run with the same seed and arrival times make the same decisions.
//!
//! Counters per direction ([`DirectionStats`]) separate model decisions (channel loss, unavailability, queue tail
//! drop) from everything else: relay limits (slots exhausted, oversize datagrams) and the kernel's drops at the
//! relay's input socket, which should all stay zero in a sound experiment ([`DirectionStats::unmodelled_drops`]).

pub mod config;
pub mod log;
mod pump;
mod tcp;

use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use channel::Link;

pub use config::{EmuConfig, RelaySettings};
pub use pump::{BATCH, COALESCE, SPIN_MARGIN};

use udpio::BufferSizes;

/// Counters of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Datagrams received from the sending endpoint.
    pub received: u64,
    /// Their bytes.
    pub received_bytes: u64,
    /// Datagrams sent to the receiving endpoint.
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Lost by the channel loss process (model decision).
    pub lost_channel: u64,
    /// Lost because the direction was unavailable (model decision).
    pub lost_unavailable: u64,
    /// Tail-dropped at the model's transmit queue (model decision).
    pub queue_full: u64,
    /// Dropped because every relay slot was in use (relay limit: raise `slots`).
    pub overflow: u64,
    /// Dropped because longer than a slot (relay limit: raise `max_datagram`).
    pub truncated: u64,
    /// Return datagrams dropped before endpoint A was known.
    pub no_destination: u64,
    /// Datagrams the kernel refused to send.
    pub send_errors: u64,
    /// Delivered datagrams still waiting for their release time when the relay stopped.
    pub pending_at_exit: u64,
    /// Log records dropped because the log writer fell behind.
    pub log_dropped: u64,
    /// Datagrams the kernel discarded at the relay's input socket (receive buffer full: the relay fell behind),
    /// from `SO_RXQ_OVFL` and the kernel's per-socket counter. Not a model decision; zero in a sound experiment.
    pub kernel_drops: u64,
    /// CPU time the direction's thread used (user + system, including the kernel's loopback delivery work done
    /// on its behalf), for judging how close the relay is to saturating a core.
    pub cpu_ns: u64,
}

impl DirectionStats {
    /// Datagrams dropped by the relay itself rather than by a model decision.
    pub fn relay_drops(&self) -> u64 {
        self.overflow + self.truncated + self.no_destination + self.send_errors
    }

    /// Every datagram lost in this direction for a reason other than a model decision: the relay's own drops plus
    /// the kernel's drops at the relay's input socket. "Zero drops other than the models'" means this is zero.
    pub fn unmodelled_drops(&self) -> u64 {
        self.relay_drops() + self.kernel_drops
    }
}

/// Final report of a relay run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// A → B counters.
    pub forward: DirectionStats,
    /// B → A counters.
    pub ret: DirectionStats,
    /// Log records written (0 without a log).
    pub log_records: u64,
    /// Seconds the relay ran.
    pub elapsed_ns: u64,
}

/// A running relay. Dropping it without [`RelayHandle::stop`] stops the threads too, without a summary.
pub struct RelayHandle {
    local_a: SocketAddr,
    local_b: SocketAddr,
    buffers: BufferSizes,
    stop: Arc<AtomicBool>,
    start: Instant,
    threads: Option<(pump::PumpThreads, pump::PumpThreads)>,
    log: Option<JoinHandle<io::Result<u64>>>,
    tcp: Option<tcp::TcpForwarder>,
}

/// Starts a relay.
pub struct Relay;

impl Relay {
    /// Binds the sockets and starts the direction threads (and the log writer and TCP forwarder when asked).
    pub fn start(
        settings: &RelaySettings,
        link: Link,
        log: Option<Box<dyn Write + Send>>,
    ) -> io::Result<RelayHandle> {
        settings
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let (sock_a, buffers) = udpio::bind(settings.listen_a, settings.socket_buffer_bytes)?;
        let (sock_b, _) = udpio::bind(settings.listen_b, settings.socket_buffer_bytes)?;
        let local_a = sock_a.local_addr()?;
        let local_b = sock_b.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let (log_sink, log_handle) = match log {
            Some(out) => {
                let (s, h) = log::start(out, 1 << 16)?;
                (Some(s), Some(h))
            }
            None => (None, None),
        };
        let learned = Arc::new(Mutex::new(settings.a));
        let (fwd_model, ret_model) = link.into_directions();
        let make =
            |forward: bool, model, rx: &UdpSocket, tx: &UdpSocket| -> io::Result<pump::Pump> {
                Ok(pump::Pump {
                    forward,
                    model,
                    rx: rx.try_clone()?,
                    tx: tx.try_clone()?,
                    dest: if forward {
                        pump::Destination::Fixed(settings.b)
                    } else {
                        match settings.a {
                            Some(a) => pump::Destination::Fixed(a),
                            None => pump::Destination::Learned(learned.clone()),
                        }
                    },
                    learn: if forward && settings.a.is_none() {
                        Some(learned.clone())
                    } else {
                        None
                    },
                    start,
                    stop: stop.clone(),
                    log: log_sink.clone(),
                    slots: settings.slots,
                    max_datagram: settings.max_datagram,
                    rt_priority: settings.rt_priority,
                    gro: settings.gro,
                })
            };
        let fwd = make(true, fwd_model, &sock_a, &sock_b)?;
        let ret = make(false, ret_model, &sock_b, &sock_a)?;
        drop(log_sink);
        let tcp = if settings.tcp_forward {
            Some(tcp::TcpForwarder::start(local_a, settings.b, stop.clone())?)
        } else {
            None
        };
        let t1 = fwd.spawn("emu-fwd")?;
        let t2 = ret.spawn("emu-ret")?;
        Ok(RelayHandle {
            local_a,
            local_b,
            buffers,
            stop,
            start,
            threads: Some((t1, t2)),
            log: log_handle,
            tcp,
        })
    }
}

impl RelayHandle {
    /// The bound address endpoint A sends to (useful with port 0).
    pub fn local_a(&self) -> SocketAddr {
        self.local_a
    }

    /// The bound address endpoint B sends to.
    pub fn local_b(&self) -> SocketAddr {
        self.local_b
    }

    /// The relay's time zero: model times are `Instant - start_instant()`.
    pub fn start_instant(&self) -> Instant {
        self.start
    }

    /// Socket buffer sizes granted by the kernel.
    pub fn buffers(&self) -> BufferSizes {
        self.buffers
    }

    /// Whether a direction thread has ended (an I/O error stops it early).
    pub fn is_finished(&self) -> bool {
        self.threads
            .as_ref()
            .is_none_or(|(a, b)| a.is_finished() || b.is_finished())
    }

    /// Stops the relay, waits for its threads and returns the counters.
    pub fn stop(mut self) -> io::Result<Summary> {
        self.stop.store(true, Ordering::Relaxed);
        let elapsed_ns = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let (forward, ret) = match self.threads.take() {
            Some((a, b)) => {
                let f = a.join();
                let r = b.join();
                (f?, r?)
            }
            None => (DirectionStats::default(), DirectionStats::default()),
        };
        if let Some(t) = self.tcp.take() {
            t.stop();
        }
        let log_records = match self.log.take() {
            Some(h) => h
                .join()
                .map_err(|_| io::Error::other("log thread panicked"))??,
            None => 0,
        };
        Ok(Summary {
            forward,
            ret,
            log_records,
            elapsed_ns,
        })
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
