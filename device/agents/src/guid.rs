//! GUIDs of nodes, ports and switches: EUI-64s. The defaults are locally
//! administered (the U/L bit, 0x02 of the first byte, set), so they collide
//! with no vendor's OUI, and none is derived from a LID: under a subnet
//! manager a port has its GUID before it has a LID. Their first byte is
//! 0x12, not 0x02: the Linux IB CM refuses to listen on a service ID whose
//! top byte is 0x02, and ib_srpt listens on its node GUID
//! ([`cm_listens_on`], docs/storage.md).
//!
//! | default | value |
//! |---|---|
//! | `ibtca-device` without `--node-guid` | random, locally administered, logged at start |
//! | a port without `--port-guid` | its node's GUID (one port) |
//! | topology node `i` (from 0) without `node_guid` | [`FABRIC_NODE_BASE`] + i + 1 |
//! | topology switch `i` without `guid` | [`FABRIC_SWITCH_BASE`] + i + 1 |
//! | relay switch of link `l` | [`FABRIC_RELAY_BASE`] + l |
//! | `ibtca-switch` without `--guid` | [`FABRIC_SWITCH_BASE`] |

/// The universal/local bit of an EUI-64 (first byte, bit 1): set in a
/// locally administered GUID.
pub const LOCAL_BIT: u64 = 0x02 << 56;

/// The individual/group bit of an EUI-64 (first byte, bit 0): clear in a
/// node's or port's GUID.
pub const GROUP_BIT: u64 = 0x01 << 56;

/// Base of the GUIDs `ibtca-fabric` gives nodes that name none.
pub const FABRIC_NODE_BASE: u64 = 0x1200_0000_0001_0000;

/// Base of the GUIDs `ibtca-fabric` gives switches that name none.
pub const FABRIC_SWITCH_BASE: u64 = 0x1200_0000_00ff_0000;

/// Base of the GUIDs of the relay switches `ibtca-fabric` puts in links
/// with options.
pub const FABRIC_RELAY_BASE: u64 = 0x1200_0000_00fe_0000;

/// The top byte of the service IDs the Linux IB CM assigns itself: it
/// refuses to listen on any other ID with this top byte (`ib_cm_listen`:
/// `-EINVAL`). ib_srpt listens on its node GUID, so an SRP target needs a
/// node GUID whose top byte is not this one; the fabric's defaults have it
/// (docs/storage.md).
pub const CM_ASSIGNED_TOP_BYTE: u8 = 0x02;

/// True when the Linux IB CM listens on `guid` as a service ID, as
/// ib_srpt asks it to with its node GUID. `cm_init_listen` refuses an ID
/// whose top byte is [`CM_ASSIGNED_TOP_BYTE`] (`-EINVAL`), except
/// 0x0200000000000000 itself, which asks the CM to assign one: then the
/// target listens on an ID its initiators do not know, so that GUID is
/// refused here too.
pub const fn cm_listens_on(guid: u64) -> bool {
    (guid >> 56) as u8 != CM_ASSIGNED_TOP_BYTE
}

/// True when `guid` is locally administered (U/L bit set).
pub const fn is_local(guid: u64) -> bool {
    guid & LOCAL_BIT != 0
}

/// Parses a GUID: hex with `0x`, decimal, or colon-separated hex groups
/// (`0x1200000000010001`, `1200:0000:0001:0001`); zero is no GUID
/// ([`ibtca_cli::ids::guid`]).
pub fn parse(text: &str) -> Result<u64, String> {
    ibtca_cli::ids::guid(text)
}

/// A random locally administered, individual GUID (the first byte is
/// 0x06, 0x0a, 0x12, ... : U/L set, I/G clear, never
/// [`CM_ASSIGNED_TOP_BYTE`], so an SRP target's IB CM accepts it:
/// [`cm_listens_on`]).
pub fn random_local() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom(2) writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let r = if n == b.len() as isize {
        u64::from_ne_bytes(b)
    } else {
        // No entropy source: time and pid still differ between devices.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t.rotate_left(17) ^ u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    };
    local_individual(r)
}

/// `r` made a locally administered, individual GUID whose top byte is not
/// [`CM_ASSIGNED_TOP_BYTE`] (that one becomes 0x12).
fn local_individual(r: u64) -> u64 {
    let g = (r | LOCAL_BIT) & !GROUP_BIT;
    if cm_listens_on(g) {
        g
    } else {
        g | 0x10 << 56
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms_and_errors() {
        assert_eq!(parse("0x1200000000010001"), Ok(0x1200_0000_0001_0001));
        assert_eq!(parse("1200:0000:0001:0001"), Ok(0x1200_0000_0001_0001));
        // Without 0x or colons, a GUID is decimal (as LIDs and QPNs are).
        assert_eq!(parse("10"), Ok(10));
        assert!(parse("0").unwrap_err().contains("zero"));
        assert!(parse("").is_err());
        assert!(parse("xyz").is_err());
        assert!(parse("0x1_0000_0000_0000_0000").is_err());
        assert!(parse("0x11112222333344445").is_err());
        assert!(parse("18446744073709551616").is_err());
    }

    #[test]
    fn defaults_are_locally_administered_individual_guids() {
        for g in [FABRIC_NODE_BASE, FABRIC_SWITCH_BASE, FABRIC_RELAY_BASE] {
            assert!(is_local(g) && g & GROUP_BIT == 0, "{g:#x}");
            assert!(cm_listens_on(g + 1) && cm_listens_on(g + 0xffff), "{g:#x}");
        }
        let (a, b) = (random_local(), random_local());
        assert!(is_local(a) && a & GROUP_BIT == 0, "{a:#x}");
        assert_ne!(a, b);
        assert!(!is_local(0x0002_c903_0000_0001));
    }

    #[test]
    fn the_cm_refuses_exactly_the_ids_with_its_own_top_byte() {
        assert!(!cm_listens_on(0x0200_0000_0001_0001));
        assert!(!cm_listens_on(0x02ff_ffff_ffff_ffff));
        assert!(!cm_listens_on(0x0200_0000_0000_0000));
        assert!(cm_listens_on(0x1200_0000_0001_0001));
        assert!(cm_listens_on(0x0300_0000_0000_0000));
        assert!(cm_listens_on(0x0002_c903_0000_0001));
    }

    #[test]
    fn random_guids_avoid_the_cms_own_service_id_byte() {
        for r in [0, 0x0100_0000_0000_0000, 0x0300_0000_0000_0001, u64::MAX] {
            let g = local_individual(r);
            assert!(is_local(g) && g & GROUP_BIT == 0, "{g:#x}");
            assert!(cm_listens_on(g), "{r:#x} -> {g:#x}");
        }
        assert_eq!(local_individual(0), 0x1200_0000_0000_0000);
        assert_eq!(
            local_individual(0x0400_0000_0000_0005),
            0x0600_0000_0000_0005
        );
    }
}
