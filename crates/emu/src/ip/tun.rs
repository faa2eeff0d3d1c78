//! TUN devices: created inside a namespace (the calling thread must be in it), with a `virtio_net_hdr` in front of
//! every packet and TCP segmentation offload, so one read carries up to 64 KiB of a TCP flow.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;

/// A TUN device's file descriptor (the device disappears when it is closed).
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    /// Interface name inside its namespace.
    pub name: String,
    /// Whether packets carry a virtio header (offloads on).
    pub vnet_hdr: bool,
}

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl Tun {
    /// Creates `name` in the calling thread's network namespace, non-blocking. With `offload`, packets carry a
    /// `virtio_net_hdr` and the kernel may hand over TSO packets (TCPv4/v6) and partial checksums.
    pub fn create(name: &str, offload: bool) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name {name:?}: expected 1 to 15 bytes"),
            ));
        }
        let f = File::options()
            .read(true)
            .write(true)
            .open("/dev/net/tun")?;
        let fd: OwnedFd = f.into();
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags: IFF_TUN | IFF_NO_PI | if offload { IFF_VNET_HDR } else { 0 },
            _pad: [0; 22],
        };
        for (d, s) in req.name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `IfReq` lays out (name, flags, padding to
        // the 40-byte size of the union); the fd is a valid open /dev/net/tun.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if offload {
            let flags = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
            // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned int of TUN_F_* flags).
            if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, flags as libc::c_ulong) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: fcntl on our own valid fd.
        unsafe {
            let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            if fl < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Tun {
            fd,
            name: name.to_string(),
            vnet_hdr: offload,
        })
    }

    /// Another handle on the same device (one thread reads, another writes).
    pub fn try_clone(&self) -> io::Result<Tun> {
        Ok(Tun {
            fd: self.fd.try_clone()?,
            name: self.name.clone(),
            vnet_hdr: self.vnet_hdr,
        })
    }

    /// Reads one packet; `Ok(None)` when none is waiting.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: read(2) into a valid writable buffer of the given length.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// Writes one packet (the kernel receives it as if it arrived on the device).
    pub fn write(&self, pkt: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: write(2) from a valid buffer of the given length.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}
