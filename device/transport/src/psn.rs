//! 24-bit sequence-number arithmetic for PSNs and MSNs (IBA §9.7.1, seed
//! 002 item 2): values live modulo 2^24 and are compared inside a window of
//! half the space, so "before" is well defined across the wrap as long as
//! no two compared numbers are 2^23 or more apart.

/// The 24 significant bits.
pub const MASK: u32 = 0x00ff_ffff;

/// Half the sequence space: the largest distance [`diff`] can express.
pub const HALF: u32 = 0x0080_0000;

/// `a + n` modulo 2^24.
pub fn add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & MASK
}

/// `a - n` modulo 2^24.
pub fn sub(a: u32, n: u32) -> u32 {
    a.wrapping_sub(n) & MASK
}

/// Signed distance `a - b` in `[-2^23, 2^23)`: negative when `a` comes
/// before `b`.
pub fn diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & MASK;
    if d & HALF != 0 {
        // Cannot overflow: d < 2^24.
        d as i32 - (MASK as i32 + 1)
    } else {
        d as i32
    }
}

/// Whether `a` comes strictly before `b`.
pub fn before(a: u32, b: u32) -> bool {
    diff(a, b) < 0
}

/// Whether `p` lies in the half-open window `[start, end)`.
pub fn in_window(p: u32, start: u32, end: u32) -> bool {
    diff(p, start) >= 0 && diff(p, end) < 0
}

/// The later of `a` and `b`.
pub fn max(a: u32, b: u32) -> u32 {
    if before(a, b) {
        b & MASK
    } else {
        a & MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sub_wrap() {
        assert_eq!(add(MASK, 1), 0);
        assert_eq!(add(0xff_fff0, 0x20), 0x10);
        assert_eq!(sub(0, 1), MASK);
        assert_eq!(sub(0x10, 0x20), 0xff_fff0);
        // Upper bits of the inputs never leak into results.
        assert_eq!(add(0xff00_0001, 1), 2);
    }

    #[test]
    fn diff_is_signed_and_wraps() {
        assert_eq!(diff(5, 3), 2);
        assert_eq!(diff(3, 5), -2);
        assert_eq!(diff(0, MASK), 1);
        assert_eq!(diff(MASK, 0), -1);
        assert_eq!(diff(0x10, 0xff_fff0), 0x20);
        assert_eq!(diff(HALF - 1, 0), (HALF - 1) as i32);
        assert_eq!(diff(HALF, 0), -(HALF as i32));
        assert!(before(0xff_ffff, 0));
        assert!(!before(0, 0xff_ffff));
        assert!(!before(7, 7));
    }

    #[test]
    fn window_across_wrap() {
        assert!(in_window(0xff_fffe, 0xff_fffe, 2));
        assert!(in_window(0, 0xff_fffe, 2));
        assert!(in_window(1, 0xff_fffe, 2));
        assert!(!in_window(2, 0xff_fffe, 2));
        assert!(!in_window(0xff_fffd, 0xff_fffe, 2));
        assert!(!in_window(5, 5, 5));
        assert_eq!(max(0xff_ffff, 1), 1);
        assert_eq!(max(1, 0xff_ffff), 1);
    }

    proptest::proptest! {
        #[test]
        fn add_then_diff_round_trips(a in 0u32..=MASK, n in 0u32..HALF) {
            let b = add(a, n);
            proptest::prop_assert_eq!(diff(b, a), n as i32);
            proptest::prop_assert_eq!(sub(b, n), a);
            proptest::prop_assert_eq!(diff(a, b), -(n as i32));
        }
    }
}
