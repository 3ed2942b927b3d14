//! The run directory's state file: which processes `ibtca-fabric up`
//! started, so that `down` stops exactly those.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Name of the state file in the run directory.
pub const STATE_FILE: &str = "fabric-state.json";

/// Name of `up`'s copy of the topology in the run directory: what the
/// run-time commands (`link`, `restart`, `stats`, ...) read, so that they
/// act on what was brought up, from any directory, whatever became of the
/// file given to `up`.
pub const TOPOLOGY_FILE: &str = "fabric-topology.json";

/// One started process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// Node or switch name.
    pub name: String,
    /// The binary's file name (checked against `/proc/PID/exe` before a
    /// signal is sent, so a recycled PID is left alone).
    pub exe: String,
    /// Process ID.
    pub pid: u32,
    /// Its log file.
    pub log: PathBuf,
    /// A guest (`run-vm.sh` and the QEMU under it): stopped before every
    /// device and switch, together with its descendants.
    #[serde(default)]
    pub guest: bool,
    /// A guest's command (`bash` and these arguments: run-vm.sh and its
    /// own), for `ibtca-fabric restart`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// A guest's console file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<PathBuf>,
}

/// The state file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The topology file brought up, as given to `up` (its checked text is
    /// [`TOPOLOGY_FILE`] in the run directory).
    pub topology: PathBuf,
    /// Processes in start order.
    pub processes: Vec<Started>,
    /// Bind mounts made for the guests (`--share`), undone by `down`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<PathBuf>,
}

impl State {
    /// Reads the state file of `run_dir`; `None` if there is none.
    pub fn load(run_dir: &Path) -> io::Result<Option<State>> {
        let path = run_dir.join(STATE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes the state file (atomically: a temporary file renamed).
    pub fn save(&self, run_dir: &Path) -> io::Result<()> {
        let path = run_dir.join(STATE_FILE);
        let tmp = run_dir.join(format!("{STATE_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(tmp, path)
    }

    /// Removes the state file.
    pub fn remove(run_dir: &Path) -> io::Result<()> {
        match std::fs::remove_file(run_dir.join(STATE_FILE)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
