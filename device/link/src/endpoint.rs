//! Where a link's socket is: `listen:PATH` or `connect:PATH`.

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
}

/// Why a string is not a [`LinkEndpoint`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Neither `listen:` nor `connect:` starts the string.
    #[error("link endpoint `{0}` must be `listen:PATH` or `connect:PATH`")]
    MissingPrefix(String),
    /// Nothing follows the prefix.
    #[error("link endpoint `{0}` has an empty socket path")]
    EmptyPath(String),
}

impl LinkEndpoint {
    /// The socket path.
    pub fn path(&self) -> &Path {
        match self {
            LinkEndpoint::Listen(p) | LinkEndpoint::Connect(p) => p,
        }
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
    fn rejects_empty_path() {
        for text in ["listen:", "connect:"] {
            let err = text.parse::<LinkEndpoint>().unwrap_err();
            assert_eq!(err, EndpointError::EmptyPath(text.into()));
            assert!(err.to_string().contains("empty socket path"), "{err}");
        }
    }
}
