//! The topology's `"sm"` option: OpenSM in one node's guest brings the
//! fabric up. Every device and switch then starts `--sm-managed` (no LID,
//! ports Init until the SM makes them Active, no routes but the SM's), and
//! the LIDs the file gives become OpenSM's fixed assignments.
//!
//! ```json
//! { "sm": "n1", "sm_options": ["--sweep", "10"], "nodes": [...], ... }
//! ```
//!
//! OpenSM keeps its LID assignments in `guid2lid` in its cache directory
//! (`/var/cache/opensm`, `OSM_CACHE_DIR`): one `0xPORTGUID MINLID MAXLID`
//! record per port (`osm_db_pack.c`: the GUID as `0x%016x`, its lookup
//! key; the LIDs as `0x%04x`), each followed by a blank line (`osm_db_files.c`), read
//! at start-up and honoured when `--honor_guid2lid` is given. The SM
//! node's first guest command (`up --guests`) writes that file from the
//! file's LIDs, loads `ib_umad` (`ibtca-load-modules umad`) and starts
//! `opensm` in the background, its log in `/ibtca/opensm.log` (the node's
//! configuration directory, `NODE.guest/` in the run directory), and the
//! console says `IBTCA-SM SUBNET UP` once OpenSM's log does; if the node
//! has no `--run` commands of its own, a second command keeps the guest up
//! while OpenSM runs. Only the SM's node needs a guest: `up --guests`
//! boots it and the nodes `--run` gives commands, every node's with
//! `--all-guests`.
//!
//! `"sm_partitions": ["LINE", ...]` is OpenSM's partition configuration
//! (`partitions.conf`, opensm(8) "PARTITION CONFIGURATION"), one line
//! each: the SM node's first command writes it to
//! `/etc/opensm/partitions.conf` in the guest and OpenSM starts with
//! `-P` that file. Without it OpenSM makes only the default partition.
//!
//! Gateway nodes are managed too (`ibtca-gateway --sm-managed`: the
//! gateway's agent is the device's), their node GUID in guid2lid; an SM
//! node must be a device node (a gateway has no guest).

/// Where OpenSM reads its LID assignments in the guest.
pub const GUEST_GUID2LID: &str = "/var/cache/opensm/guid2lid";
/// OpenSM's log in the guest: the node's configuration directory, so the
/// host reads it as `NODE.guest/opensm.log`.
pub const GUEST_LOG: &str = "/ibtca/opensm.log";
/// Where OpenSM reads its partition configuration in the guest.
pub const GUEST_PARTITIONS: &str = "/etc/opensm/partitions.conf";
/// The here-document delimiter the partitions file is written with; no
/// line of the file may be it.
const PARTITIONS_END: &str = "IBTCA_PARTITIONS";
/// Where the guest records OpenSM's PID.
const GUEST_PID: &str = "/run/opensm.pid";

/// The SM of a fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmPlan {
    /// The node whose guest runs OpenSM.
    pub node: String,
    /// Extra OpenSM arguments, in order.
    pub options: Vec<String>,
    /// (port GUID, LID) of every managed node, in file order.
    pub guid2lid: Vec<(u64, u16)>,
    /// OpenSM's partition configuration, one line each (`sm_partitions`).
    pub partitions: Option<Vec<String>>,
}

/// A node of the file, as the SM's plan needs it.
#[derive(Debug, Clone, Copy)]
pub struct SmNode<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its port GUID.
    pub port_guid: u64,
    /// Its LID.
    pub lid: u16,
    /// True for a gateway node (no guest).
    pub gateway: bool,
}

/// Checks the file's `sm` (a node's name), `sm_options` and
/// `sm_partitions` against its nodes; the error says what is wrong.
pub fn plan(
    sm: Option<&str>,
    options: &[String],
    partitions: Option<&[String]>,
    nodes: &[SmNode<'_>],
) -> Result<Option<SmPlan>, String> {
    let Some(name) = sm else {
        if !options.is_empty() {
            return Err("`sm_options` given without `sm`".into());
        }
        if partitions.is_some() {
            return Err("`sm_partitions` given without `sm`".into());
        }
        return Ok(None);
    };
    let node = nodes
        .iter()
        .find(|n| n.name == name)
        .ok_or_else(|| format!("`sm` names `{name}`, which is no node"))?;
    if node.gateway {
        return Err(format!(
            "`sm` names `{name}`, a gateway: OpenSM runs in a device node's guest"
        ));
    }
    if let Some(bad) = options.iter().find(|o| o.contains('\0')) {
        return Err(format!("sm_options: `{bad:?}` holds a NUL byte"));
    }
    if let Some(lines) = partitions {
        check_partitions(lines, options)?;
    }
    Ok(Some(SmPlan {
        node: name.to_owned(),
        options: options.to_vec(),
        guid2lid: nodes.iter().map(|n| (n.port_guid, n.lid)).collect(),
        partitions: partitions.map(<[String]>::to_vec),
    }))
}

/// `sm_partitions` is some lines, each one line of text, none the file's
/// here-document delimiter, and OpenSM's partition file is not also given
/// in `sm_options`.
fn check_partitions(lines: &[String], options: &[String]) -> Result<(), String> {
    if lines.iter().all(|l| l.trim().is_empty()) {
        return Err("`sm_partitions` is empty: give partitions.conf lines or leave it out".into());
    }
    if let Some(bad) = lines.iter().find(|l| l.contains(['\n', '\r', '\0'])) {
        return Err(format!(
            "sm_partitions: `{bad:?}` is not one line (a newline, carriage return or NUL)"
        ));
    }
    if lines.iter().any(|l| l.trim() == PARTITIONS_END) {
        return Err(format!(
            "sm_partitions: a line may not be `{PARTITIONS_END}`"
        ));
    }
    if let Some(o) = options
        .iter()
        .find(|o| o.starts_with("-P") || o.starts_with("--Pconfig"))
    {
        return Err(format!(
            "`sm_options` gives `{o}` and `sm_partitions` a partition file: give one"
        ));
    }
    Ok(())
}

/// `s` as one shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl SmPlan {
    /// OpenSM's guid2lid records, as OpenSM writes them: the port GUID
    /// (its lookup key, `0x` and 16 lower-case digits), then the port's
    /// LID range, here the one LID (LMC 0).
    pub fn guid2lid_records(&self) -> Vec<String> {
        self.guid2lid
            .iter()
            .map(|(guid, lid)| format!("{guid:#018x} {lid:#06x} {lid:#06x}"))
            .collect()
    }

    /// OpenSM's guid2lid file: each record and a blank line.
    pub fn guid2lid_file(&self) -> String {
        self.guid2lid_records()
            .iter()
            .map(|r| format!("{r}\n\n"))
            .collect()
    }

    /// The `opensm` command line (shell words).
    pub fn opensm_command(&self) -> String {
        let mut words = vec![
            "opensm".to_owned(),
            "--honor_guid2lid".to_owned(),
            "--log_file".to_owned(),
            GUEST_LOG.to_owned(),
            // Flush the log after every line: "SUBNET UP" is an INFO line,
            // which OpenSM otherwise leaves in its stdio buffer until an
            // error flushes it, so nobody watching the log would see it.
            "--debug".to_owned(),
            "2".to_owned(),
        ];
        if self.partitions.is_some() {
            words.extend(["-P".to_owned(), GUEST_PARTITIONS.to_owned()]);
        }
        words.extend(self.options.iter().map(|o| shell_quote(o)));
        words.join(" ")
    }

    /// The here-document that writes the partitions file, if any.
    fn partitions_heredoc(&self) -> String {
        let Some(lines) = &self.partitions else {
            return String::new();
        };
        let dir = GUEST_PARTITIONS.rsplit_once('/').map_or("/", |(d, _)| d);
        let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
        format!(
            "mkdir -p {dir}\n\
             cat > {GUEST_PARTITIONS} <<'{PARTITIONS_END}'\n{body}{PARTITIONS_END}\n"
        )
    }

    /// The guest commands that start OpenSM, before the node's own: the
    /// guid2lid file, the partitions file if any, `ib_umad`, OpenSM in the
    /// background; and, when the
    /// node has no commands of its own, one that waits for OpenSM.
    pub fn guest_commands(&self, node_has_commands: bool) -> Vec<String> {
        let start = format!(
            "set -e\n\
             mkdir -p {dir} /run /var/log\n\
             cat > {GUEST_GUID2LID} <<'IBTCA_GUID2LID'\n{file}IBTCA_GUID2LID\n\
             {partitions}\
             ibtca-load-modules umad\n\
             {cmd} </dev/null >/dev/null 2>&1 &\n\
             echo $! > {GUEST_PID}\n\
             echo \"IBTCA-SM opensm started pid=$(cat {GUEST_PID})\"\n\
             (until grep -q 'SUBNET UP' {GUEST_LOG} 2>/dev/null; do sleep 1; done; \
             echo 'IBTCA-SM SUBNET UP') &",
            dir = GUEST_GUID2LID.rsplit_once('/').map_or("/", |(d, _)| d),
            file = self.guid2lid_file(),
            partitions = self.partitions_heredoc(),
            cmd = self.opensm_command(),
        );
        let mut commands = vec![start];
        if !node_has_commands {
            commands.push(format!(
                "while kill -0 \"$(cat {GUEST_PID})\" 2>/dev/null; do sleep 5; done\n\
                 echo 'IBTCA-SM opensm exited'; exit 1"
            ));
        }
        commands
    }

    /// Whether `up --guests` boots `node`'s guest: the SM's node always
    /// (the agents live in the devices, only OpenSM needs a guest), another
    /// node when `runs` (`--run NODE=COMMAND`) give it commands or `all`
    /// (`--all-guests`) asks for every guest.
    pub fn boots_guest(&self, node: &str, runs: &[String], all: bool) -> bool {
        let prefix = format!("{node}=");
        all || node == self.node || runs.iter().any(|r| r.starts_with(&prefix))
    }

    /// `--run` entries (`NODE=COMMAND`) for the SM node, ahead of `runs`.
    pub fn with_runs(&self, runs: &[String]) -> Vec<String> {
        let prefix = format!("{}=", self.node);
        let own = runs.iter().any(|r| r.starts_with(&prefix));
        self.guest_commands(own)
            .into_iter()
            .map(|c| format!("{prefix}{c}"))
            .chain(runs.iter().cloned())
            .collect()
    }
}
