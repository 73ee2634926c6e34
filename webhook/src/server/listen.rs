//! Sockets and signals: dual-stack listeners, and SIGTERM/SIGINT.

use std::net::SocketAddr;

use tokio::net::TcpListener;

use super::ServeError;

/// A listener on `addr`; an IPv6 wildcard also takes IPv4, whatever the host's
/// `net.ipv6.bindv6only`, so that `[::]` is dual-stack. On a host without IPv6
/// (`ipv6.disable=1`), `[::]` falls back to `0.0.0.0` with a warning.
pub(super) fn listen(flag: &'static str, addr: SocketAddr) -> Result<TcpListener, ServeError> {
    match bind(addr) {
        Err(error) if addr.ip() == std::net::Ipv6Addr::UNSPECIFIED && no_ipv6(&error) => {
            let v4 = SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, addr.port()));
            tracing::warn!("{flag} {addr}: no IPv6 on this host ({error}); listening on {v4}");
            bind(v4).map_err(|source| ServeError::Bind { flag, addr: v4, source })
        }
        result => result.map_err(|source| ServeError::Bind { flag, addr, source }),
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    // A restarted process can bind while old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// EAFNOSUPPORT (no IPv6 in the kernel) or EADDRNOTAVAIL (IPv6 disabled by sysctl).
fn no_ipv6(error: &std::io::Error) -> bool {
    const EAFNOSUPPORT: i32 = 97;
    const EADDRNOTAVAIL: i32 = 99;
    matches!(error.raw_os_error(), Some(EAFNOSUPPORT | EADDRNOTAVAIL))
}

/// SIGTERM and SIGINT, installed at once so that a signal during start-up is not fatal.
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> Result<Self, ServeError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(ServeError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(ServeError::Signals)?,
        })
    }

    /// The name of the next signal received.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
