use super::*;

const GOOD: &str = r#"{"vcs": [
  {"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
   "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2, "remote_qpn": 16}},
  {"vpi": 1, "vci": 100, "aal": 1, "blocks": 4, "service": "cbr",
   "ib": {"qp": "rc", "local_qpn": 17, "remote_lid": 2}},
  {"vpi": 255, "vci": 65535, "aal": 0, "service": "rt-vbr",
   "ib": {"qp": "rc", "local_qpn": 18, "remote_lid": 3, "remote_qpn": 40}}
]}"#;

#[test]
fn the_issue_shape_parses() {
    let m = VcMap::from_json(GOOD).unwrap();
    assert_eq!(m.vcs.len(), 3);
    assert_eq!(
        m.vcs[0],
        VcEntry {
            vc: Vc { vpi: 0, vci: 32 },
            last: Vc { vpi: 0, vci: 32 },
            aal: Aal::Aal5 { max_sdu: 65_535 },
            service: Service::Ubr,
            local_qpn: 16,
            remote_lid: 2,
            remote_qpn: Some(16),
            sq_psn: 0,
            rq_psn: 0,
        }
    );
    assert_eq!(m.vcs[1].aal, Aal::Aal1 { blocks: 4 });
    assert_eq!(m.vcs[1].remote_qpn, None);
    assert_eq!(m.vcs[2].aal, Aal::Aal0);
    assert_eq!(
        m.get(Vc {
            vpi: 255,
            vci: 65535
        })
        .unwrap()
        .local_qpn,
        18
    );
    let v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
    assert_eq!(VcMap::from_value(v).unwrap(), m);
}

fn errors(vcs: &str) -> Vec<String> {
    VcMap::from_json(&format!(r#"{{"vcs": [{vcs}]}}"#))
        .unwrap_err()
        .0
}

fn vc(vpi: u64, vci: u64, aal: u64, service: &str, qpn: u64) -> String {
    format!(
        r#"{{"vpi": {vpi}, "vci": {vci}, "aal": {aal}, "service": "{service}",
            "ib": {{"qp": "rc", "local_qpn": {qpn}, "remote_lid": 2}}}}"#
    )
}

#[test]
fn bad_maps_are_refused_with_every_reason() {
    assert_eq!(
        errors(&[vc(0, 32, 5, "ubr", 16), vc(0, 32, 5, "ubr", 17)].join(",")),
        ["vcs[1] (VPI/VCI 0/32): mapped twice (also vcs[0])"]
    );
    assert_eq!(
        errors(&[vc(0, 32, 5, "ubr", 16), vc(0, 33, 5, "ubr", 16)].join(",")),
        ["vcs[1] (VPI/VCI 0/33): local_qpn 16 is also vcs[0]'s: one QP per VC"]
    );
    let e = errors(&vc(0, 5, 5, "ubr", 16));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("vcs[0] (VPI/VCI 0/5): VCI 5 is reserved"),
        "{e:?}"
    );
    assert!(errors(&vc(0, 0, 5, "ubr", 16))[0].contains("VCI 0 is reserved"));
    assert!(errors(&vc(256, 32, 5, "ubr", 16))[0].contains("vpi 256 is out of range"));
    assert!(errors(&vc(0, 65536, 5, "ubr", 16))[0].contains("vci 65536 is out of range"));
    assert_eq!(
        errors(&vc(0, 32, 2, "ubr", 16)),
        ["vcs[0] (VPI/VCI 0/32): AAL 2 is not supported: aal is 5, 1 or 0 (raw cells)"]
    );
    assert_eq!(
        errors(&vc(0, 32, 5, "abr", 16)),
        ["vcs[0] (VPI/VCI 0/32): unknown service `abr`: cbr, rt-vbr, nrt-vbr or ubr"]
    );
    assert!(errors(&vc(0, 32, 5, "ubr", 1))[0].contains("ib.local_qpn 1 is out of range"));
    assert!(errors(&vc(0, 32, 5, "ubr", 0x100_0000))[0].contains("out of range"));
    // Several problems at once: all reported.
    let e = errors(&[vc(0, 3, 7, "abr", 16), vc(0, 3, 5, "ubr", 16)].join(","));
    assert_eq!(e.len(), 6, "{e:?}");
}

#[test]
fn ib_side_and_optional_fields_are_checked() {
    let one = |ib: &str, extra: &str| {
        errors(&format!(
            r#"{{"vpi": 0, "vci": 40, "aal": 5, "service": "cbr"{extra}, "ib": {ib}}}"#
        ))
    };
    assert!(one(
        r#"{"qp": "ud", "local_qpn": 16, "remote_lid": 2, "remote_qkey": 1}"#,
        ""
    )[0]
    .contains("needs a UD transport"));
    assert!(
        one(r#"{"qp": "uc", "local_qpn": 16, "remote_lid": 2}"#, "")[0]
            .contains("\"uc\" is unknown")
    );
    assert!(one(
        r#"{"qp": "rc", "local_qpn": 16, "remote_lid": 2, "remote_qkey": 1}"#,
        ""
    )[0]
    .contains("remote_qkey is for UD"));
    assert!(
        one(r#"{"qp": "rc", "local_qpn": 16, "remote_lid": 0}"#, "")[0]
            .contains("not a unicast LID")
    );
    assert!(one(
        r#"{"qp": "rc", "local_qpn": 16, "remote_lid": 2, "remote_qpn": 1}"#,
        ""
    )[0]
    .contains("ib.remote_qpn 1 is out of range"));
    assert!(one(
        r#"{"qp": "rc", "local_qpn": 16, "remote_lid": 2}"#,
        r#", "blocks": 3"#
    )[0]
    .contains("`blocks` is for AAL1 only"));
    assert!(one(
        r#"{"qp": "rc", "local_qpn": 16, "remote_lid": 2}"#,
        r#", "max_sdu": 0"#
    )[0]
    .contains("max_sdu 0"));
    // Typos are caught, not ignored.
    let e = VcMap::from_json(r#"{"vcs": [{"vpi": 0, "vci": 40, "aal": 5, "servce": "cbr"}]}"#)
        .unwrap_err();
    assert!(
        e.0[0].starts_with("not a VC map: unknown field `servce`"),
        "{e}"
    );
    assert!(VcMap::from_json(r#"{"vcs": []}"#).unwrap_err().0[0].contains("no VCs"));
}

fn ranged(vpi: &str, vci: &str, qpn: u64) -> String {
    format!(
        r#"{{"vpi": {vpi}, "vci": {vci}, "aal": 5, "service": "ubr",
            "ib": {{"qp": "rc", "local_qpn": {qpn}, "remote_lid": 2}}}}"#
    )
}

#[test]
fn vpi_vci_ranges_cover_their_vcs() {
    let m = VcMap::from_json(&format!(
        r#"{{"vcs": [{}, {}]}}"#,
        ranged("[1, 2]", "[32, 63]", 16),
        ranged("1", "[64, 64]", 17)
    ))
    .unwrap();
    let e = &m.vcs[0];
    assert_eq!(
        (e.vc, e.last),
        (Vc { vpi: 1, vci: 32 }, Vc { vpi: 2, vci: 63 })
    );
    assert_eq!(e.vcs().count(), 64);
    let qpn = |vpi, vci| m.get(Vc { vpi, vci }).map(|e| e.local_qpn);
    assert_eq!(qpn(1, 32), Some(16));
    assert_eq!(qpn(2, 63), Some(16));
    assert_eq!(qpn(1, 64), Some(17));
    assert_eq!(qpn(1, 31), None);
    assert_eq!(qpn(0, 40), None);
    assert_eq!(qpn(3, 40), None);
    assert_eq!(qpn(2, 64), None);
}

#[test]
fn bad_ranges_are_refused() {
    assert_eq!(
        errors(
            &[
                ranged("0", "[32, 63]", 16),
                ranged("[0, 3]", "[60, 70]", 17)
            ]
            .join(",")
        ),
        ["vcs[1] (VPI/VCI 0..=3/60..=70): overlaps vcs[0]: a VC is mapped once"]
    );
    // Touching ranges do not overlap.
    assert!(VcMap::from_json(&format!(
        r#"{{"vcs": [{}, {}]}}"#,
        ranged("0", "[32, 63]", 16),
        ranged("0", "[64, 70]", 17)
    ))
    .is_ok());
    assert_eq!(
        errors(&ranged("0", "[40, 39]", 16)),
        ["vcs[0] (VPI/VCI 0/40..=39): vci range [40, 39] is empty: [first, last], first <= last"]
    );
    assert!(errors(&ranged("[5, 4]", "32", 16))[0].contains("vpi range [5, 4] is empty"));
    assert!(errors(&ranged("0", "[16, 40]", 16))[0].contains("is reserved"));
    assert!(errors(&ranged("[0, 256]", "32", 16))[0].contains("out of range"));
    assert!(errors(&ranged("0", "[65530, 65536]", 16))[0].contains("out of range"));
    assert_eq!(
        errors(&ranged("[0, 1]", "[32, 4095]", 16)),
        ["vcs[0] (VPI/VCI 0..=1/32..=4095): covers 8128 VCs: an entry covers at most 4096"]
    );
    assert!(VcMap::from_json(&format!(
        r#"{{"vcs": [{}]}}"#,
        ranged("0", "[32, 4127]", 16)
    ))
    .is_ok());
    assert!(errors(&ranged("0", "[32]", 16))[0].starts_with("not a VC map"));
}

#[test]
fn qpns_lids_and_psns_may_be_written_in_hex_strings() {
    let m = VcMap::from_json(
        r#"{"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
            "ib": {"qp": "rc", "local_qpn": "0x10", "remote_lid": "0x2",
                   "remote_qpn": "0x20", "sq_psn": "0xabc", "rq_psn": "7"}}]}"#,
    )
    .unwrap();
    let v = &m.vcs[0];
    assert_eq!(
        (v.local_qpn, v.remote_lid, v.remote_qpn, v.sq_psn, v.rq_psn),
        (0x10, 2, Some(0x20), 0xabc, 7)
    );
    let e = VcMap::from_json(
        r#"{"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
            "ib": {"qp": "rc", "local_qpn": "0x1g", "remote_lid": 2}}]}"#,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("'0x1g' is not a number"), "{e}");
}
