//! Property tests of the command queue: any entries, any parameters,
//! the device answers each with a status and never panics.

use super::*;
use proptest::prelude::*;

fn opcode() -> impl Strategy<Value = u8> {
    // Mostly real commands (queries among them), sometimes anything.
    prop_oneof![
        4 => prop::sample::select(
            super::super::super::commands::COMMANDS
                .iter()
                .map(|c| c.opcode)
                .collect::<Vec<_>>()
        ),
        1 => any::<u8>(),
    ]
}

fn params() -> impl Strategy<Value = [u8; 48]> {
    prop_oneof![
        1 => Just([0u8; 48]),
        3 => prop::collection::vec(any::<u8>(), 48)
            .prop_map(|v| <[u8; 48]>::try_from(v).unwrap()),
    ]
}

proptest! {
    /// Whatever the driver writes, every entry completes with 0 or a
    /// known errno; a failed one keeps its parameters and gets no
    /// out-parameters; a query succeeds exactly when its parameters
    /// are zero and then holds the device's reply.
    #[test]
    fn every_entry_completes_with_a_known_status(
        cmds in prop::collection::vec((opcode(), params()), 1..24)
    ) {
        let mut h = harness();
        for (op, p) in cmds {
            let addr = h.post(op, 0, p);
            h.q.doorbell(h.pi);
            h.q.process(&h.m.mem, &mut h.v);
            let e: CmdEntry = h.m.read_obj(addr);
            let st = e.status.to_native();
            prop_assert!(
                [CMD_ST_OK, ENOENT, ENOMEM, EBUSY, EINVAL, EOPNOTSUPP].contains(&st),
                "opcode {:#x}: status {}", op, st
            );
            if st != CMD_ST_OK {
                prop_assert_eq!(e.params, p);
                prop_assert_eq!((e.out0.to_native(), e.out1.to_native()), (0, 0));
            }
            if op == CMD_QUERY_DEVICE || op == CMD_QUERY_PORT {
                let zero = p.iter().all(|&b| b == 0);
                prop_assert_eq!(st == CMD_ST_OK, zero);
                if zero {
                    let reply = if op == CMD_QUERY_DEVICE {
                        h.v.device_attr().as_slice().to_vec()
                    } else {
                        h.v.port_attr().as_slice().to_vec()
                    };
                    prop_assert_eq!(&e.params[..], &reply[..]);
                }
            }
        }
    }
}
