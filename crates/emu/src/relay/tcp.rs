//! Unmodelled TCP forwarding from `listen_a` to endpoint B, for tools whose data travels over UDP but whose control
//! channel is TCP on the same port (iperf3). The bytes are copied as they are; no channel model applies.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The accept thread and the live connections (kept to shut them down at stop).
pub(crate) struct TcpForwarder {
    accept: JoinHandle<()>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

impl TcpForwarder {
    pub(crate) fn start(
        listen: SocketAddr,
        target: SocketAddr,
        stop: Arc<AtomicBool>,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let conns2 = conns.clone();
        let accept = std::thread::Builder::new()
            .name("emu-tcp".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let Ok(server) =
                                TcpStream::connect_timeout(&target, Duration::from_secs(5))
                            else {
                                let _ = client.shutdown(Shutdown::Both);
                                continue;
                            };
                            let _ = client.set_nonblocking(false);
                            let _ = client.set_nodelay(true);
                            let _ = server.set_nodelay(true);
                            let clones = (
                                client.try_clone(),
                                server.try_clone(),
                                client.try_clone(),
                                server.try_clone(),
                            );
                            if let (Ok(c1), Ok(s1), Ok(c2), Ok(s2)) = clones {
                                if let Ok(mut g) = conns2.lock() {
                                    g.push(c2);
                                    g.push(s2);
                                }
                                let _ = std::thread::Builder::new()
                                    .name("emu-tcp-up".into())
                                    .spawn(move || pipe(client, server));
                                let _ = std::thread::Builder::new()
                                    .name("emu-tcp-down".into())
                                    .spawn(move || pipe(s1, c1));
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10))
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })?;
        Ok(TcpForwarder { accept, conns })
    }

    pub(crate) fn stop(self) {
        let _ = self.accept.join();
        if let Ok(g) = self.conns.lock() {
            for c in g.iter() {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }
}
