//! TCP socket set-up shared by the TCP-based convergence layers (TCPCL, STCP): no Nagle delay
//! and large kernel buffers, set before the SYN so that the window scale can use them (seed
//! 002, 4.2: buffer sizes decide TCP convergence-layer throughput).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Bound on one connection attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Applies the session socket options: no Nagle delay, large buffers.
pub(crate) fn tune(sock: &socket2::Socket, buffer: usize) {
    let _ = sock.set_nodelay(true);
    let _ = sock.set_send_buffer_size(buffer);
    let _ = sock.set_recv_buffer_size(buffer);
}

/// Connects with the buffers set before the SYN (so the window scale can use them).
pub(crate) fn connect(addr: SocketAddr, buffer: usize) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    tune(&sock, buffer);
    sock.connect_timeout(&addr.into(), CONNECT_TIMEOUT)?;
    Ok(sock.into())
}

/// Binds the listener with large buffers (inherited by accepted sockets).
pub(crate) fn listen(addr: SocketAddr, buffer: usize) -> std::io::Result<TcpListener> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    let _ = sock.set_reuse_address(true);
    tune(&sock, buffer);
    sock.bind(&addr.into())?;
    sock.listen(128)?;
    Ok(sock.into())
}
