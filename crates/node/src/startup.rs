//! Start-up failures caused by configuration values: named after the field, so `dtnkit node`
//! exits with code 2 (bad configuration) instead of 1 (runtime failure), with a message that
//! says which value to change. A value that is well-formed but unusable on this host (a store
//! path that is a file, a socket path longer than the kernel allows, an address this host does
//! not have or that another process holds) is found only when the node starts.

use std::net::SocketAddr;
use std::path::Path;

use super::NodeError;

/// Longest Unix socket path the kernel takes (`sun_path` is 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 107;

fn config_error(field: &str, value: impl std::fmt::Display, expected: &str) -> NodeError {
    NodeError::ConfigValue(format!("field `{field}` = {value}: expected {expected}"))
}

/// Creates the store directory; a path that exists as something else or cannot be created is a
/// configuration error naming `store.path`.
pub(super) fn store_dir(path: &Path) -> Result<(), NodeError> {
    let shown = format!("{:?}", path.display().to_string());
    if path.exists() && !path.is_dir() {
        return Err(config_error(
            "store.path",
            shown,
            "a directory (it exists and is not one)",
        ));
    }
    std::fs::create_dir_all(path).map_err(|e| {
        config_error(
            "store.path",
            shown,
            &format!("a directory this node can create and write ({e})"),
        )
    })
}

/// Checks the application socket path before binding: too long for the kernel is a
/// configuration error naming `app.socket` (or `store.path`, when the socket is the default
/// `<store.path>/app.sock`).
pub(super) fn socket_path(path: &Path, explicit: bool) -> Result<(), NodeError> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        let field = if explicit { "app.socket" } else { "store.path" };
        return Err(config_error(
            field,
            format!("{:?}", path.display().to_string()),
            &format!(
                "a Unix socket path of at most {MAX_SOCKET_PATH} bytes (this one is {len}; \
                 {})",
                if explicit {
                    "choose a shorter path"
                } else {
                    "set [app] socket to a shorter path"
                }
            ),
        ));
    }
    Ok(())
}

/// A socket that could not be bound to a configured address: the address is unusable here
/// (not an address of this host, held by another process, a privileged port), so it is a
/// configuration error naming the field.
pub(super) fn bind_error(field: &str, addr: SocketAddr, e: &std::io::Error) -> NodeError {
    config_error(
        field,
        format!("\"{addr}\""),
        &format!("an address this node can bind ({e})"),
    )
}

/// A log file that cannot be created: a configuration error naming its field.
pub(super) fn log_error(field: &str, path: &Path, e: &std::io::Error) -> NodeError {
    config_error(
        field,
        format!("{:?}", path.display().to_string()),
        &format!("a file this node can create ({e})"),
    )
}

/// The application socket could not be bound: a configuration error naming its field.
pub(super) fn socket_bind_error(path: &Path, explicit: bool, e: &std::io::Error) -> NodeError {
    config_error(
        if explicit { "app.socket" } else { "store.path" },
        format!("{:?}", path.display().to_string()),
        &format!("a Unix socket path this node can bind ({e})"),
    )
}
