//! The one place a binary of ibtca removes a file: a Unix socket file that
//! no process listens on. Every listening socket (link sockets, vfio-user
//! sockets, control sockets, the management hub) is bound through
//! [`bind_listener`], and removed on shutdown through [`remove_own`].
//!
//! - A path that does not exist is bound.
//! - A path that is not a socket (a regular file, a directory, a symlink)
//!   is never touched: an error naming it ([`io::ErrorKind::AlreadyExists`]).
//! - A socket some process accepts connections on is never touched: an
//!   error "in use by another process" ([`io::ErrorKind::AddrInUse`]).
//! - A socket whose connect is refused (`ECONNREFUSED`: nobody listens) is
//!   stale: it is removed and the path bound afresh.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// A bound socket file's identity: (device, inode) of the file.
pub type SocketId = (u64, u64);

/// Removes `path` if it is a stale socket (nobody listening); does nothing
/// if it does not exist; refuses anything else with an error naming it.
pub fn remove_stale(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            ),
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(in_use(path)),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => match fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io::Error::new(
                e.kind(),
                format!("remove stale socket {}: {e}", path.display()),
            )),
            _ => Ok(()),
        },
        // A full backlog (EAGAIN) is a listener; anything else (EACCES,
        // ...) leaves us unsure, so the file stays.
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Err(in_use(path)),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "{}: cannot tell whether the socket is in use ({e}); not replacing it",
                path.display()
            ),
        )),
    }
}

fn in_use(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("{} is in use by another process", path.display()),
    )
}

/// Binds a listening socket at `path`, replacing a stale socket file
/// ([`remove_stale`]); returns it with the identity of its file, for
/// [`remove_own`].
pub fn bind_listener(path: &Path) -> io::Result<(UnixListener, SocketId)> {
    remove_stale(path)?;
    let listener = UnixListener::bind(path)
        .map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", path.display())))?;
    let meta = fs::symlink_metadata(path)?;
    Ok((listener, (meta.dev(), meta.ino())))
}

/// Removes `path` if it still is the socket file `id` that this process
/// bound (another process may have replaced it since).
pub fn remove_own(path: &Path, id: SocketId) {
    let ours = fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == id);
    if ours {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ibtca-sf-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_survives() {
        let d = dir("regular");
        let p = d.join("x.sock");
        fs::write(&p, b"precious").unwrap();
        let e = bind_listener(&p).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            e.to_string(),
            format!(
                "{} exists and is not a socket; refusing to replace it",
                p.display()
            )
        );
        assert_eq!(fs::read(&p).unwrap(), b"precious");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_directory_and_a_symlink_survive() {
        let d = dir("dirlink");
        let sub = d.join("sub");
        fs::create_dir(&sub).unwrap();
        assert_eq!(
            bind_listener(&sub).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(sub.is_dir());
        // A symlink to a stale socket is a symlink, not a socket.
        let (l, _) = bind_listener(&d.join("real.sock")).unwrap();
        drop(l);
        let link = d.join("link.sock");
        std::os::unix::fs::symlink(d.join("real.sock"), &link).unwrap();
        assert_eq!(
            bind_listener(&link).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_refused() {
        let d = dir("stale");
        let p = d.join("x.sock");
        let (first, _) = bind_listener(&p).unwrap();
        // Live: the listener accepts (into its backlog).
        let e = bind_listener(&p).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(
            e.to_string(),
            format!("{} is in use by another process", p.display())
        );
        drop(first);
        // Stale: the file stays after its listener closed.
        assert!(p.exists());
        let (second, id2) = bind_listener(&p).unwrap();
        UnixStream::connect(&p).unwrap();
        // A file put in its place since is not ours to remove.
        let moved = d.join("moved.sock");
        fs::rename(&p, &moved).unwrap();
        fs::write(&p, b"someone else's").unwrap();
        remove_own(&p, id2);
        assert_eq!(fs::read(&p).unwrap(), b"someone else's");
        fs::remove_file(&p).unwrap();
        fs::rename(&moved, &p).unwrap();
        remove_own(&p, id2);
        assert!(!p.exists());
        drop(second);
        let _ = fs::remove_dir_all(&d);
    }
}
