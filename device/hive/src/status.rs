//! The hive's status file: each hosted node's ports and whether each
//! port's link is up, rewritten whole (write, then rename) whenever a link
//! comes up or goes down. `ibtca-fabric up` waits on it as it waits on a
//! switch's status file.
//!
//! ```json
//! { "nodes": { "sw0": { "ports": [ { "up": true }, { "up": false } ] },
//!              "h1":  { "ports": [ { "up": true } ] } } }
//! ```

use std::fs;
use std::io;
use std::path::Path;

use serde_json::{json, Map, Value};

/// Writes the status of the nodes `names` (in hive order), whose ports'
/// link states are `up[node][port - 1]`, to `path`.
pub fn write(path: &Path, names: &[String], up: &[Vec<bool>]) -> io::Result<()> {
    let mut nodes = Map::new();
    for (name, ports) in names.iter().zip(up) {
        let ports: Vec<Value> = ports.iter().map(|u| json!({ "up": u })).collect();
        nodes.insert(name.clone(), json!({ "ports": ports }));
    }
    let text = json!({ "nodes": nodes }).to_string();
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text)?;
    fs::rename(&tmp, path)
}
