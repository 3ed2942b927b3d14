//! Subnet management packets (IBA vol 1 §14.2.1): LID-routed (class 0x01)
//! and directed-route (class 0x81) SMPs, 256 bytes each.
//!
//! ```text
//!   0  common MAD header (24; a DR SMP's status bit 15 is the D bit,
//!      its class-specific field the hop pointer and hop count)
//!  24  M_Key (8)
//!  32  LID-routed: reserved (32)    DR: DrSLID (2) DrDLID (2) reserved (28)
//!  64  SMP data: the attribute (64)
//! 128  LID-routed: reserved (128)   DR: initial path (64) return path (64)
//! ```

use super::header::{be16, be64, class, put, put16, put64, MadHeader, MadStatus, MAD_LEN};
use super::MadError;

/// Bytes of an SMP's attribute data.
pub const SMP_DATA_LEN: usize = 64;
/// The permissive LID: a directed-route end point, or "whoever receives".
pub const PERMISSIVE_LID: u16 = 0xffff;
/// Most hops a directed route can have (paths have 64 entries, 0 unused).
pub const MAX_HOPS: u8 = 63;
/// The D bit of a DR SMP's status: set on the way back.
const DIRECTION: u16 = 0x8000;

/// How an SMP is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SmpRoute {
    /// By the LRH's DLID (class 0x01).
    Lid,
    /// By the paths in the SMP (class 0x81).
    Directed,
}

/// One SMP, decoded. Fields of the other route kind are kept zero.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Smp {
    /// LID-routed or directed.
    pub route: SmpRoute,
    /// Base version (1 for a valid SMP; the SMA answers others with
    /// [`MadStatus::BAD_VERSION`]).
    pub base_version: u8,
    /// Class version (1).
    pub class_version: u8,
    /// Method.
    pub method: u8,
    /// Status (15 bits in a DR SMP).
    pub status: MadStatus,
    /// DR: the D bit (false on the way out, true on the way back).
    pub direction: bool,
    /// DR: the hop pointer.
    pub hop_ptr: u8,
    /// DR: the hop count.
    pub hop_cnt: u8,
    /// Transaction ID.
    pub tid: u64,
    /// Attribute ID.
    pub attr_id: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
    /// M_Key.
    pub m_key: u64,
    /// DR: the LID the directed part starts from ([`PERMISSIVE_LID`]
    /// when it starts at the requester).
    pub dr_slid: u16,
    /// DR: the LID the directed part leads to ([`PERMISSIVE_LID`] when it
    /// ends at the responder).
    pub dr_dlid: u16,
    /// The attribute.
    pub data: [u8; SMP_DATA_LEN],
    /// DR: the output port at each hop, index 1..=hop count.
    pub initial_path: [u8; 64],
    /// DR: the input port at each hop, filled in on the way out.
    pub return_path: [u8; 64],
}

impl Smp {
    /// A Get or Set request with zero data and paths.
    pub fn new(route: SmpRoute, method: u8, attr_id: u16, attr_mod: u32) -> Self {
        Smp {
            route,
            base_version: super::header::BASE_VERSION,
            class_version: 1,
            method,
            status: MadStatus::OK,
            direction: false,
            hop_ptr: 0,
            hop_cnt: 0,
            tid: 0,
            attr_id,
            attr_mod,
            m_key: 0,
            dr_slid: if route == SmpRoute::Directed {
                PERMISSIVE_LID
            } else {
                0
            },
            dr_dlid: if route == SmpRoute::Directed {
                PERMISSIVE_LID
            } else {
                0
            },
            data: [0; SMP_DATA_LEN],
            initial_path: [0; 64],
            return_path: [0; 64],
        }
    }

    /// A directed-route request along `ports` (the output port at each
    /// hop, the requester's own first); `None` if the path is longer than
    /// [`MAX_HOPS`].
    pub fn directed(method: u8, attr_id: u16, attr_mod: u32, ports: &[u8]) -> Option<Self> {
        let hops = u8::try_from(ports.len()).ok().filter(|n| *n <= MAX_HOPS)?;
        let mut smp = Smp::new(SmpRoute::Directed, method, attr_id, attr_mod);
        smp.hop_cnt = hops;
        smp.initial_path
            .get_mut(1..=ports.len())?
            .copy_from_slice(ports);
        Some(smp)
    }

    /// Decodes a MAD of exactly [`MAD_LEN`] bytes whose class is an SMP
    /// class.
    pub fn parse(mad: &[u8]) -> Result<Self, MadError> {
        let mad: &[u8; MAD_LEN] = mad.try_into().map_err(|_| MadError::Length(mad.len()))?;
        let h = MadHeader::read(mad);
        let route = match h.mgmt_class {
            class::SUBN_LID_ROUTED => SmpRoute::Lid,
            class::SUBN_DIRECTED_ROUTE => SmpRoute::Directed,
            other => return Err(MadError::NotSmp(other)),
        };
        let directed = route == SmpRoute::Directed;
        let mut smp = Smp::new(route, h.method, h.attr_id, h.attr_mod);
        smp.base_version = h.base_version;
        smp.class_version = h.class_version;
        smp.tid = h.tid;
        smp.m_key = be64(mad, 24);
        put(&mut smp.data, 0, mad.get(64..128).unwrap_or_default());
        if directed {
            smp.status = MadStatus(h.status & !DIRECTION);
            smp.direction = h.status & DIRECTION != 0;
            [smp.hop_ptr, smp.hop_cnt] = h.class_specific.to_be_bytes();
            smp.dr_slid = be16(mad, 32);
            smp.dr_dlid = be16(mad, 34);
            put(
                &mut smp.initial_path,
                0,
                mad.get(128..192).unwrap_or_default(),
            );
            put(
                &mut smp.return_path,
                0,
                mad.get(192..256).unwrap_or_default(),
            );
        } else {
            smp.status = MadStatus(h.status);
        }
        Ok(smp)
    }

    /// Encodes the SMP (reserved bytes zero).
    pub fn to_bytes(&self) -> [u8; MAD_LEN] {
        let mut mad = [0u8; MAD_LEN];
        let directed = self.route == SmpRoute::Directed;
        let header = MadHeader {
            base_version: self.base_version,
            mgmt_class: if directed {
                class::SUBN_DIRECTED_ROUTE
            } else {
                class::SUBN_LID_ROUTED
            },
            class_version: self.class_version,
            method: self.method,
            status: if directed {
                (self.status.0 & !DIRECTION) | if self.direction { DIRECTION } else { 0 }
            } else {
                self.status.0
            },
            class_specific: if directed {
                u16::from_be_bytes([self.hop_ptr, self.hop_cnt])
            } else {
                0
            },
            tid: self.tid,
            attr_id: self.attr_id,
            attr_mod: self.attr_mod,
        };
        header.write(&mut mad);
        put64(&mut mad, 24, self.m_key);
        put(&mut mad, 64, &self.data);
        if directed {
            put16(&mut mad, 32, self.dr_slid);
            put16(&mut mad, 34, self.dr_dlid);
            put(&mut mad, 128, &self.initial_path);
            put(&mut mad, 192, &self.return_path);
        }
        mad
    }

    /// Turns a request into its response: method GetResp, `status`, and
    /// for a DR SMP the D bit set (the hop pointer stays where the request
    /// ended, [`super::directed`] walks it back).
    pub fn make_response(&mut self, status: MadStatus) {
        self.method = super::header::method::GET_RESP;
        self.status = status;
        if self.route == SmpRoute::Directed {
            self.direction = true;
        }
    }

    /// Writes the fields a directed-route step changes ([`super::directed`]:
    /// the hop pointer, the return path) into `mad`, the encoding this SMP
    /// was decoded from; every other byte of `mad` stays as it is. A
    /// LID-routed SMP has neither: `mad` is left alone.
    pub fn write_route(&self, mad: &mut [u8; MAD_LEN]) {
        if self.route == SmpRoute::Directed {
            put16(mad, 6, u16::from_be_bytes([self.hop_ptr, self.hop_cnt]));
            put(mad, 192, &self.return_path);
        }
    }
}

/// Turns the SMP request whose MAD is `mad` into its response where it
/// lies: the bytes that [`Smp::parse`], [`Smp::make_response`]`(status)`,
/// its data replaced by `data` when given, and [`Smp::to_bytes`] give
/// (reserved bytes zero), without decoding it. False, `mad` untouched,
/// if its class is neither SMP class.
pub fn respond_in_place(
    mad: &mut [u8; MAD_LEN],
    status: MadStatus,
    data: Option<&[u8; SMP_DATA_LEN]>,
) -> bool {
    let directed = match mad[1] {
        class::SUBN_DIRECTED_ROUTE => true,
        class::SUBN_LID_ROUTED => false,
        _ => return false,
    };
    mad[3] = super::header::method::GET_RESP;
    if directed {
        put16(mad, 4, (status.0 & !DIRECTION) | DIRECTION);
        put(mad, 36, &[0; 28]);
    } else {
        put16(mad, 4, status.0);
        put16(mad, 6, 0);
        put(mad, 32, &[0; 32]);
        put(mad, 128, &[0; 128]);
    }
    put16(mad, 18, 0);
    if let Some(data) = data {
        put(mad, 64, data);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::directed::{self, DrStep};
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        /// A response written over its request's bytes is the response
        /// made of the decoded request and encoded, whatever the request
        /// held (its reserved bytes too).
        #[test]
        fn a_response_in_place_is_the_decoded_requests_response_encoded(
            seed in proptest::collection::vec(proptest::prelude::any::<u8>(), MAD_LEN),
            class in 0u8..4,
            status in proptest::prelude::any::<u16>(),
            data in proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), SMP_DATA_LEN)),
        ) {
            let mut mad: [u8; MAD_LEN] = seed.try_into().unwrap();
            mad[1] = [class::SUBN_LID_ROUTED, class::SUBN_DIRECTED_ROUTE, 0x03, mad[1]][usize::from(class)];
            let data: Option<[u8; SMP_DATA_LEN]> = data.map(|d| d.try_into().unwrap());
            let status = MadStatus(status);
            let mut in_place = mad;
            let answered = respond_in_place(&mut in_place, status, data.as_ref());
            match Smp::parse(&mad) {
                Ok(mut smp) => {
                    smp.make_response(status);
                    if let Some(d) = data {
                        smp.data = d;
                    }
                    proptest::prop_assert!(answered);
                    proptest::prop_assert_eq!(in_place, smp.to_bytes());
                }
                Err(_) => {
                    proptest::prop_assert!(!answered);
                    proptest::prop_assert_eq!(in_place, mad);
                }
            }
        }
    }

    #[test]
    fn a_step_written_into_its_encoding_equals_the_stepped_smp_encoded() {
        let mut smp = Smp::directed(1, 0x11, 0, &[1, 2, 3]).unwrap();
        smp.hop_ptr = 2;
        let mut mad = smp.to_bytes();
        assert_eq!(
            directed::on_receive(&mut smp, true, 4, 8),
            DrStep::Forward(3)
        );
        smp.write_route(&mut mad);
        assert_eq!(mad, smp.to_bytes());
        let mut lid = Smp::new(SmpRoute::Lid, 1, 0x11, 0);
        lid.hop_ptr = 5;
        let mut mad = [0xa5; MAD_LEN];
        lid.write_route(&mut mad);
        assert_eq!(mad, [0xa5; MAD_LEN]);
    }
}
