//! The systemd readiness protocol (`sd_notify(3)`) without libsystemd: a service started with
//! `Type=notify` finds a datagram socket in `NOTIFY_SOCKET` (a path, or an abstract name
//! written with a leading `@`) and sends newline-separated `KEY=VALUE` states to it, e.g.
//! `READY=1` once it serves and `STOPPING=1` when it begins to stop.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;

/// Sends `state` to the service manager. `Ok(false)`: not started by a service manager that
/// listens (`NOTIFY_SOCKET` unset), nothing sent.
pub fn notify(state: &str) -> io::Result<bool> {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(path) if !path.is_empty() => notify_to(&path, state).map(|()| true),
        _ => Ok(false),
    }
}

/// Sends `state` to the notification socket `path` (`@name`: an abstract socket).
pub fn notify_to(path: &OsStr, state: &str) -> io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        sock.send_to(state.as_bytes(), path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_one_datagram_to_a_path() {
        let dir = std::env::temp_dir().join(format!("dtnkit-sdnotify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        notify_to(path.as_os_str(), "READY=1\nSTATUS=serving").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("dtnkit-sdnotify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        notify_to(OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn a_missing_socket_is_an_error() {
        let e = notify_to(OsStr::new("/nonexistent/dtnkit/notify"), "READY=1").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
