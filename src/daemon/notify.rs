//! `sd_notify(3)`: a foreground mount under systemd (`Type=notify`) sends `READY=1` once the
//! mount is in place and `STOPPING=1` when it starts unmounting.

use std::path::Path;

/// Sends `state` to the service manager's notification socket (`sd_notify(3)` protocol: one
/// datagram to the path in `$NOTIFY_SOCKET`; a leading `@` names a Linux abstract socket).
/// Does nothing when the variable is unset; a failure is logged, never fatal.
pub fn notify_systemd(state: &str) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send_notification(&socket, state) {
        tracing::warn!(socket = %socket.to_string_lossy(), error = %e, "cannot notify the service manager");
    }
}

fn send_notification(socket: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let sender = UnixDatagram::unbound()?;
    let name = socket.as_encoded_bytes();
    match name.strip_prefix(b"@") {
        Some(abstract_name) => {
            let address = SocketAddr::from_abstract_name(abstract_name)?;
            sender.send_to_addr(state.as_bytes(), &address)?;
        }
        None if name.starts_with(b"/") => {
            sender.send_to(state.as_bytes(), Path::new(socket))?;
        }
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "only path and abstract (@) sockets are supported",
            ))
        }
    }
    Ok(())
}
