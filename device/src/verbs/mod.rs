//! Verbs objects and their guest-memory ABI: protection domains, memory
//! regions and windows, completion queues, RC queue pairs.
pub mod abi;
