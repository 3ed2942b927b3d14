//! IB identifiers on command lines and in topology files: a LID, QPN, GUID
//! or P_Key is hex with `0x` or decimal, checked against its range, and a
//! refusal names what and why (`LID 0xc000 is out of range 1–0xbfff`).
//!
//! Decimal with a leading zero (`010`) is refused as ambiguous: it could be
//! meant as octal, or as hex with the `0x` left out. A GUID may also be
//! written as colon-separated hex groups (`1200:0000:0001:0001`, with or
//! without `0x`), the form `ibstat` prints.

use std::ops::RangeInclusive;

/// The unicast LIDs a port can have.
pub const UNICAST_LIDS: RangeInclusive<u64> = 1..=0xbfff;

/// Largest QPN (24 bits).
pub const MAX_QPN: u64 = 0xff_ffff;

/// Parses `text` as hex (`0x…`) or decimal.
pub fn number(what: &str, text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, radix) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (t, 10),
    };
    if radix == 10 && digits.len() > 1 && digits.starts_with('0') {
        return Err(format!(
            "{what} '{text}': a leading 0 is ambiguous; write hex as 0x{} or decimal without the 0",
            digits.trim_start_matches('0')
        ));
    }
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        let form = if radix == 16 {
            "hex digits after 0x"
        } else {
            "decimal, or hex with 0x"
        };
        return Err(format!("{what} '{text}' is not a number ({form})"));
    }
    u64::from_str_radix(digits, radix).map_err(|_| format!("{what} '{text}' is too large"))
}

/// Parses `text` and checks it lies in `range` (shown in hex).
pub fn in_range(what: &str, text: &str, range: RangeInclusive<u64>) -> Result<u64, String> {
    let n = number(what, text)?;
    if !range.contains(&n) {
        return Err(format!(
            "{what} {} is out of range {}–{:#x}",
            text.trim(),
            range_start(*range.start()),
            range.end()
        ));
    }
    Ok(n)
}

fn range_start(n: u64) -> String {
    if n < 10 {
        n.to_string()
    } else {
        format!("{n:#x}")
    }
}

/// A unicast LID, 1–0xbfff.
pub fn lid(text: &str) -> Result<u16, String> {
    in_range("LID", text, UNICAST_LIDS).map(|n| n as u16)
}

/// A unicast LID or 0 (none), 0–0xbfff.
pub fn lid_or_zero(text: &str) -> Result<u16, String> {
    in_range("LID", text, 0..=*UNICAST_LIDS.end()).map(|n| n as u16)
}

/// A QPN, 0–0xffffff.
pub fn qpn(text: &str) -> Result<u32, String> {
    in_range("QPN", text, 0..=MAX_QPN).map(|n| n as u32)
}

/// A P_Key, 0x0001–0xffff; 0x8000 (a full member of no partition) is
/// refused too.
pub fn pkey(text: &str) -> Result<u16, String> {
    let p = in_range("P_Key", text, 1..=0xffff)?;
    if p == 0x8000 {
        return Err(format!(
            "P_Key {} is the invalid P_Key (base 0)",
            text.trim()
        ));
    }
    Ok(p as u16)
}

/// A GUID (EUI-64), not zero: hex with `0x`, decimal, or colon-separated
/// hex groups.
pub fn guid(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let g = if t.contains(':') {
        let hex = t.strip_prefix("0x").unwrap_or(t).replace(':', "");
        if hex.is_empty() || hex.len() > 16 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "GUID '{text}': colon-separated groups hold 1 to 16 hex digits"
            ));
        }
        u64::from_str_radix(&hex, 16).map_err(|e| format!("GUID '{text}': {e}"))?
    } else {
        number("GUID", t)?
    };
    if g == 0 {
        return Err(format!("GUID '{text}': zero is no GUID"));
    }
    Ok(g)
}

/// Deserializes a number written in a file as a JSON number or as a
/// string, hex (`"0x10"`) or decimal ([`number`]); for
/// `#[serde(deserialize_with = "…")]` on LIDs, QPNs, Q_Keys and PSNs. The
/// caller checks the range and names the field.
pub fn number_in_file<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Written {
        Number(u64),
        Text(String),
    }
    match <Written as serde::Deserialize>::deserialize(d)? {
        Written::Number(n) => Ok(n),
        Written::Text(t) => number("value", &t).map_err(serde::de::Error::custom),
    }
}

/// [`number_in_file`] for an optional field (with `#[serde(default)]`).
pub fn optional_number_in_file<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    number_in_file(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Field {
        #[serde(deserialize_with = "number_in_file")]
        n: u64,
        #[serde(default, deserialize_with = "optional_number_in_file")]
        o: Option<u64>,
    }

    #[test]
    fn a_file_number_is_a_json_number_or_a_hex_or_decimal_string() {
        let f: Field = serde_json::from_str(r#"{"n": "0x1f", "o": "17"}"#).unwrap();
        assert_eq!((f.n, f.o), (0x1f, Some(17)));
        let f: Field = serde_json::from_str(r#"{"n": 5}"#).unwrap();
        assert_eq!((f.n, f.o), (5, None));
        let e = serde_json::from_str::<Field>(r#"{"n": "0xzz"}"#)
            .err()
            .unwrap();
        assert!(e.to_string().contains("'0xzz' is not a number"), "{e}");
    }

    #[test]
    fn hex_and_decimal_alike() {
        assert_eq!(lid("0x10"), Ok(16));
        assert_eq!(lid("16"), Ok(16));
        assert_eq!(lid("0xbfff"), Ok(0xbfff));
        assert_eq!(qpn("0xffffff"), Ok(0xff_ffff));
        assert_eq!(qpn("7"), Ok(7));
        assert_eq!(pkey("0xffff"), Ok(0xffff));
        assert_eq!(pkey("32767"), Ok(0x7fff));
        assert_eq!(guid("0x1200000000010001"), Ok(0x1200_0000_0001_0001));
        assert_eq!(guid("1200:0000:0001:0001"), Ok(0x1200_0000_0001_0001));
        assert_eq!(guid("0x1200:1111:2222:3333"), Ok(0x1200_1111_2222_3333));
        assert_eq!(guid("42"), Ok(42));
        assert_eq!(lid_or_zero("0"), Ok(0));
    }

    #[test]
    fn refusals_say_what_and_why() {
        assert_eq!(
            lid("0xc000").unwrap_err(),
            "LID 0xc000 is out of range 1–0xbfff"
        );
        assert_eq!(lid("0").unwrap_err(), "LID 0 is out of range 1–0xbfff");
        assert_eq!(
            lid("49152").unwrap_err(),
            "LID 49152 is out of range 1–0xbfff"
        );
        assert_eq!(
            lid("abc").unwrap_err(),
            "LID 'abc' is not a number (decimal, or hex with 0x)"
        );
        assert_eq!(
            lid("0xg").unwrap_err(),
            "LID '0xg' is not a number (hex digits after 0x)"
        );
        assert_eq!(
            lid("010").unwrap_err(),
            "LID '010': a leading 0 is ambiguous; write hex as 0x10 or decimal without the 0"
        );
        assert_eq!(
            qpn("0x1000000").unwrap_err(),
            "QPN 0x1000000 is out of range 0–0xffffff"
        );
        assert_eq!(pkey("0").unwrap_err(), "P_Key 0 is out of range 1–0xffff");
        assert_eq!(
            pkey("0x8000").unwrap_err(),
            "P_Key 0x8000 is the invalid P_Key (base 0)"
        );
        assert_eq!(guid("0").unwrap_err(), "GUID '0': zero is no GUID");
        assert_eq!(
            guid("0x11112222333344445").unwrap_err(),
            "GUID '0x11112222333344445' is too large"
        );
        // A bare 16-digit hex GUID would read as a different decimal number.
        assert!(guid("0200000000010001")
            .unwrap_err()
            .contains("leading 0 is ambiguous"));
        assert!(guid("xyz").is_err());
    }
}
