//! Why a topology file cannot be brought up: each problem
//! ([`TopologyError`]) and all of a file's ([`TopologyErrors`]), which
//! [`crate::plan::plan`] reports together.

use ibtca_transport::config::MAX_MIN_ACK_TIMEOUT_MS;

/// Longest Unix socket path (`sun_path` holds 108 bytes with the NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Bytes of a NodeDescription.
pub const NODE_DESCRIPTION_BYTES: usize = 64;

/// Why a topology cannot be brought up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// The file is not valid JSON for a topology.
    #[error("topology file: {0}")]
    Syntax(String),
    /// Two nodes or switches share a name.
    #[error("the name `{0}` is used twice")]
    DuplicateName(String),
    /// A CPU list (`cpus`) that does not parse.
    #[error("`{name}`: {reason}")]
    BadCpus {
        /// The node (or `NODE guest`).
        name: String,
        /// Why.
        reason: String,
    },
    /// A gateway node's entry is wrong.
    #[error("node `{node}`: gateway: {error}")]
    Gateway {
        /// The node.
        node: String,
        /// What.
        error: String,
    },
    /// A real-time priority outside 1..=99.
    #[error("node `{node}`: realtime priority {priority} is outside 1-99")]
    BadRealtime {
        /// The node.
        node: String,
        /// The priority given.
        priority: u8,
    },
    /// A guest niceness outside -20..=19.
    #[error("node `{node}`: guest nice {nice} is outside -20..19")]
    BadNice {
        /// The node.
        node: String,
        /// The niceness given.
        nice: i8,
    },
    /// A local ACK timeout floor above the device's maximum.
    #[error("node `{node}`: min_ack_timeout_ms {ms} is above {MAX_MIN_ACK_TIMEOUT_MS}")]
    #[allow(missing_docs)]
    BadMinAckTimeout { node: String, ms: u64 },
    /// A node asks for both `realtime` and `sched_batch`.
    #[error("node `{node}`: realtime and sched_batch exclude each other")]
    RealtimeAndBatch {
        /// The node.
        node: String,
    },
    /// A node's LID is 0 or multicast.
    #[error("node `{node}`: LID {lid} is not a unicast LID (1..=0xbfff)")]
    BadLid {
        /// The node.
        node: String,
        /// Its LID.
        lid: u16,
    },
    /// Two nodes share a LID.
    #[error("LID {lid} is given to both `{first}` and `{second}`")]
    DuplicateLid {
        /// The LID.
        lid: u16,
        /// The first node with it.
        first: String,
        /// The second.
        second: String,
    },
    /// A GUID that is not hex, or zero.
    #[error("`{name}`: bad GUID `{text}`")]
    BadGuid {
        /// The node or switch.
        name: String,
        /// The text.
        text: String,
    },
    /// Two nodes or switches share a GUID.
    #[error("GUID {guid:#018x} is given to both `{first}` and `{second}`")]
    DuplicateGuid {
        /// The GUID.
        guid: u64,
        /// The first owner.
        first: String,
        /// The second.
        second: String,
    },
    /// A switch with no ports or too many.
    #[error("switch `{switch}`: {ports} ports; a switch has 1..=254")]
    SwitchPorts {
        /// The switch.
        switch: String,
        /// Ports asked for.
        ports: u16,
    },
    /// A description longer than a NodeDescription holds.
    #[error(
        "`{name}`: description is {bytes} bytes; a NodeDescription holds {NODE_DESCRIPTION_BYTES}"
    )]
    LongDescription {
        /// The node or switch.
        name: String,
        /// Its length.
        bytes: usize,
    },
    /// A link end names no node or switch.
    #[error("link {link}: `{end}` names no node or switch")]
    UnknownNode {
        /// Index of the link in the file (from 0).
        link: usize,
        /// The end.
        end: String,
    },
    /// A link end that is empty, a switch without a port, or a port
    /// number that does not parse.
    #[error("link {link}: end `{end}` goes nowhere (a node name or SWITCH:PORT)")]
    LinkToNowhere {
        /// Index of the link.
        link: usize,
        /// The end.
        end: String,
    },
    /// A switch port outside 1..=ports.
    #[error("link {link}: switch `{switch}` has ports 1..={ports}, not {port}")]
    PortOutOfRange {
        /// Index of the link.
        link: usize,
        /// The switch.
        switch: String,
        /// The port named.
        port: u16,
        /// Ports the switch has.
        ports: u16,
    },
    /// The file names no node.
    #[error("the topology has no nodes: a fabric needs at least one (\"nodes\": [...])")]
    NoNodes,
    /// Both ends of a link are the same port.
    #[error("link {link} connects {port} to itself")]
    LinkToItself {
        /// Index of the link.
        link: usize,
        /// The port, as `NAME port N`.
        port: String,
    },
    /// A port is an end of two links.
    #[error("port `{port}` is used by link {first} and link {second}")]
    PortUsedTwice {
        /// The port.
        port: String,
        /// The first link using it.
        first: usize,
        /// The second.
        second: usize,
    },
    /// A rate over 1000 per mille.
    #[error("link {link}: fault rates are per mille, 0..=1000")]
    BadRate {
        /// Index of the link.
        link: usize,
    },
    /// A port's VL settings are wrong.
    #[error("{port}: {error}")]
    Vl {
        /// The node or SWITCH:PORT.
        port: String,
        /// What is wrong.
        error: String,
    },
    /// The `sm` option is wrong.
    #[error("{0}")]
    Sm(String),
    /// The `hosts`, a node's or switch's `host`, or `--host` is wrong
    /// (`hosts.rs`).
    #[error("{0}")]
    Hosts(String),
    /// A socket path too long for a Unix socket.
    #[error("socket path {0} is longer than {MAX_SOCKET_PATH} bytes; use a shorter run directory")]
    PathTooLong(String),
}

/// Every problem of a topology file, in file order (at least one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyErrors(pub Vec<TopologyError>);

impl std::fmt::Display for TopologyErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            all => {
                write!(f, "{} problems:", all.len())?;
                for e in all {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for TopologyErrors {}
