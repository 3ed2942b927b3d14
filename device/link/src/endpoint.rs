//! Where a link's socket is: `listen:PATH` or `connect:PATH` (a Unix
//! socket), or `listen:tcp:HOST:PORT` or `connect:tcp:HOST:PORT` (TCP,
//! for a link between hosts).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// One end of a link, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LinkEndpoint {
    /// Bind `PATH` and accept one peer at a time.
    Listen(PathBuf),
    /// Connect to `PATH`, retrying until a listener is there.
    Connect(PathBuf),
    /// Listen on a TCP address and accept one peer at a time.
    ListenTcp(TcpAddress),
    /// Connect to a TCP address, retrying until a listener is there.
    ConnectTcp(TcpAddress),
}

/// A TCP address as written after `tcp:`: `HOST:PORT`, HOST a name, an
/// IPv4 address or a bracketed IPv6 address (`[::1]:7000`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TcpAddress {
    /// Host name or address (IPv6 without its brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl TcpAddress {
    /// The address of `host` and `port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        TcpAddress {
            host: host.into(),
            port,
        }
    }
}

impl TcpAddress {
    /// The socket addresses it names: an IP address as it is, a host name
    /// looked up (once, by the caller: a link resolves its peer's name when
    /// it starts, so that its sandboxed threads never read the resolver's
    /// files).
    pub fn resolve(&self) -> std::io::Result<Vec<std::net::SocketAddr>> {
        use std::net::ToSocketAddrs;
        let addrs: Vec<_> = (self.host.as_str(), self.port).to_socket_addrs()?.collect();
        if addrs.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} resolves to no address", self.host),
            ));
        }
        Ok(addrs)
    }
}

impl FromStr for TcpAddress {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("`{s}` is not HOST:PORT"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("`{port}` in `{s}` is not a TCP port (1..=65535)"))?;
        let host = match host.strip_prefix('[') {
            Some(v6) => v6
                .strip_suffix(']')
                .ok_or_else(|| format!("`{s}`: an unclosed `[`"))?,
            None if host.contains(':') => {
                return Err(format!("`{s}`: write an IPv6 address in brackets"))
            }
            None => host,
        };
        if host.is_empty() {
            return Err(format!("`{s}` has an empty host"));
        }
        Ok(TcpAddress::new(host, port))
    }
}

impl fmt::Display for TcpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Why a string is not a [`LinkEndpoint`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Neither `listen:` nor `connect:` starts the string.
    #[error("link endpoint `{0}` must be `listen:PATH`, `connect:PATH`, `listen:tcp:HOST:PORT` or `connect:tcp:HOST:PORT`")]
    MissingPrefix(String),
    /// Nothing follows the prefix.
    #[error("link endpoint `{0}` has an empty socket path")]
    EmptyPath(String),
    /// `tcp:` is followed by no good `HOST:PORT`.
    #[error("link endpoint `{endpoint}`: {reason}")]
    BadTcp {
        /// The whole endpoint.
        endpoint: String,
        /// What is wrong with its address.
        reason: String,
    },
}

impl LinkEndpoint {
    /// The Unix socket path (`None` for a TCP endpoint).
    pub fn path(&self) -> Option<&Path> {
        match self {
            LinkEndpoint::Listen(p) | LinkEndpoint::Connect(p) => Some(p),
            LinkEndpoint::ListenTcp(_) | LinkEndpoint::ConnectTcp(_) => None,
        }
    }

    /// True for the side that listens.
    pub fn listens(&self) -> bool {
        matches!(self, LinkEndpoint::Listen(_) | LinkEndpoint::ListenTcp(_))
    }
}

impl FromStr for LinkEndpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (make, path): (fn(PathBuf) -> LinkEndpoint, &str) =
            if let Some(path) = s.strip_prefix("listen:") {
                (LinkEndpoint::Listen, path)
            } else if let Some(path) = s.strip_prefix("connect:") {
                (LinkEndpoint::Connect, path)
            } else {
                return Err(EndpointError::MissingPrefix(s.to_owned()));
            };
        if let Some(address) = path.strip_prefix("tcp:") {
            let address = address.parse().map_err(|reason| EndpointError::BadTcp {
                endpoint: s.to_owned(),
                reason,
            })?;
            return Ok(if s.starts_with("listen:") {
                LinkEndpoint::ListenTcp(address)
            } else {
                LinkEndpoint::ConnectTcp(address)
            });
        }
        if path.is_empty() {
            return Err(EndpointError::EmptyPath(s.to_owned()));
        }
        Ok(make(PathBuf::from(path)))
    }
}

impl fmt::Display for LinkEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkEndpoint::Listen(p) => write!(f, "listen:{}", p.display()),
            LinkEndpoint::Connect(p) => write!(f, "connect:{}", p.display()),
            LinkEndpoint::ListenTcp(a) => write!(f, "listen:tcp:{a}"),
            LinkEndpoint::ConnectTcp(a) => write!(f, "connect:tcp:{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_kinds_and_round_trips() {
        for (text, want) in [
            (
                "listen:/tmp/a.sock",
                LinkEndpoint::Listen("/tmp/a.sock".into()),
            ),
            (
                "connect:rel/b.sock",
                LinkEndpoint::Connect("rel/b.sock".into()),
            ),
            // Only the first colon separates; the path may contain more.
            ("connect:/x:y", LinkEndpoint::Connect("/x:y".into())),
            (
                "listen:tcp:10.1.0.1:7000",
                LinkEndpoint::ListenTcp(TcpAddress::new("10.1.0.1", 7000)),
            ),
            (
                "connect:tcp:host-b.example:65535",
                LinkEndpoint::ConnectTcp(TcpAddress::new("host-b.example", 65535)),
            ),
            (
                "connect:tcp:[fd00::2]:7001",
                LinkEndpoint::ConnectTcp(TcpAddress::new("fd00::2", 7001)),
            ),
            // A relative path that starts with `tcp:` stays a path this way.
            ("listen:./tcp:x", LinkEndpoint::Listen("./tcp:x".into())),
        ] {
            let got: LinkEndpoint = text.parse().unwrap();
            assert_eq!(got, want);
            assert_eq!(got.to_string(), text);
        }
    }

    #[test]
    fn rejects_missing_prefix() {
        for text in ["/tmp/a.sock", "", "Listen:/a", "bind:/a", "listen"] {
            let err = text.parse::<LinkEndpoint>().unwrap_err();
            assert_eq!(err, EndpointError::MissingPrefix(text.into()));
            assert!(err.to_string().contains("listen:PATH"), "{err}");
        }
    }

    #[test]
    fn rejects_bad_tcp_addresses() {
        for (text, why) in [
            ("listen:tcp:", "is not HOST:PORT"),
            ("connect:tcp:host", "is not HOST:PORT"),
            ("connect:tcp::7000", "empty host"),
            ("connect:tcp:h:0", "not a TCP port"),
            ("connect:tcp:h:70000", "not a TCP port"),
            ("connect:tcp:h:x", "not a TCP port"),
            ("connect:tcp:fd00::2:7000", "in brackets"),
            ("connect:tcp:[fd00::2:7000", "unclosed"),
        ] {
            let err = text.parse::<LinkEndpoint>().unwrap_err();
            assert!(
                matches!(&err, EndpointError::BadTcp { endpoint, .. } if endpoint == text),
                "{text}: {err:?}"
            );
            assert!(err.to_string().contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn rejects_empty_path() {
        for text in ["listen:", "connect:"] {
            let err = text.parse::<LinkEndpoint>().unwrap_err();
            assert_eq!(err, EndpointError::EmptyPath(text.into()));
            assert!(err.to_string().contains("empty socket path"), "{err}");
        }
    }
}
