//! Numbers: their value as CouchDB sees it, exact comparison, and the magnitude encoding.
//!
//! CouchDB's JSON decoder (jiffy) turns a literal without `.`, `e` or `E` into an Erlang
//! integer of any size and every other literal into an IEEE double; Erlang then compares an
//! integer with a float by exact value. Bunko keeps a number's text (serde_json's
//! `arbitrary_precision`), and [`Decimal::of`] gives each literal that same value as an exact
//! decimal:
//!
//! - integer literal: its digits, exactly;
//! - other literal, finite as `f64`: the nearest `f64` `f`. When `|f| ≥ 2^53`, `f` is an
//!   integer and is written out exactly (`{:.0}`: `1e23` is `99999999999999991611392`).
//!   Otherwise the shortest decimal that parses back to `f` (`{:e}`) stands for it: it lies
//!   strictly inside `f`'s rounding interval, so it orders the same as `f` against every other
//!   double and every integer (no integer is in that interval unless `f` is that integer);
//! - other literal beyond the `f64` range (`1e400`; Erlang has no infinite float, so CouchDB
//!   cannot decode it): its exact decimal value, so it still sorts beyond every finite double.
//!
//! The exponent is kept as an `i64`, saturating: only literals with exponents beyond ±9·10¹⁸
//! (never produced by a real encoder) collapse together.

use std::cmp::Ordering;

use serde_json::Number;

/// Offsets from a collation's number tag.
const NEGATIVE: u8 = 0;
const ZERO: u8 = 1;
const POSITIVE: u8 = 2;

/// `2^53`: from here on every `f64` is an integer.
const TWO_POW_53: f64 = 9_007_199_254_740_992.0;

/// Exponent literals are read up to this magnitude, then saturate.
const EXPONENT_LIMIT: i128 = 1 << 100;

/// Compares two numbers by exact value.
pub(super) fn compare(a: &Number, b: &Number) -> Ordering {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x.cmp(&y);
    }
    if let (Some(x), Some(y)) = (float_value(a), float_value(b)) {
        // Finite, so never unordered; -0.0 == 0.0.
        return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    }
    Decimal::of(a).cmp(&Decimal::of(b))
}

/// Appends the number's tag (`tag` + sign offset) and, unless it is zero, its magnitude;
/// a negative number's magnitude bytes are inverted so larger magnitudes sort first.
pub(super) fn encode(n: &Number, tag: u8, out: &mut Vec<u8>) {
    let decimal = Decimal::of(n);
    match decimal.signum() {
        Ordering::Equal => out.push(tag + ZERO),
        Ordering::Greater => {
            out.push(tag + POSITIVE);
            decimal.write_magnitude(out);
        }
        Ordering::Less => {
            out.push(tag + NEGATIVE);
            let start = out.len();
            decimal.write_magnitude(out);
            out.iter_mut().skip(start).for_each(|b| *b = !*b);
        }
    }
}

/// The `f64` a float literal decodes to; `None` for integer literals and for floats beyond
/// the `f64` range.
fn float_value(n: &Number) -> Option<f64> {
    if n.as_str().contains(['.', 'e', 'E']) { n.as_f64() } else { None }
}

/// An exact decimal `±0.d₁d₂…dₙ × 10^exponent`, normalized: no leading or trailing zero
/// digit; zero has no digits (and is never negative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Decimal {
    negative: bool,
    exponent: i64,
    /// Digit values `0..=9`.
    digits: Vec<u8>,
}

impl Decimal {
    /// The value CouchDB gives the literal `n` (module docs).
    pub(super) fn of(n: &Number) -> Self {
        match float_value(n) {
            Some(f) if f.abs() >= TWO_POW_53 => Self::parse(&format!("{f:.0}")),
            Some(f) => Self::parse(&format!("{f:e}")),
            None => Self::parse(n.as_str()),
        }
    }

    /// Reads a JSON number literal exactly. Never fails: stray characters are skipped.
    pub(super) fn parse(text: &str) -> Self {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, ""));
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).filter_map(digit).collect();
        let leading = digits.iter().take_while(|&&d| d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
        }
        if digits.is_empty() {
            return Self { negative: false, exponent: 0, digits };
        }
        let int_len = int.bytes().filter_map(digit).count();
        let exponent = to_i128(int_len) + parse_exponent(exponent) - to_i128(leading);
        let exponent =
            i64::try_from(exponent).unwrap_or(if exponent < 0 { i64::MIN } else { i64::MAX });
        Self { negative, exponent, digits }
    }

    fn signum(&self) -> Ordering {
        match (self.digits.is_empty(), self.negative) {
            (true, _) => Ordering::Equal,
            (false, true) => Ordering::Less,
            (false, false) => Ordering::Greater,
        }
    }

    /// Appends the exponent, then the digit pairs (module docs of [`super`]).
    fn write_magnitude(&self, out: &mut Vec<u8>) {
        write_exponent(self.exponent, out);
        write_digits(&self.digits, out);
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        self.signum().cmp(&other.signum()).then_with(|| {
            let magnitude = (self.exponent, &self.digits).cmp(&(other.exponent, &other.digits));
            if self.negative { magnitude.reverse() } else { magnitude }
        })
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn digit(b: u8) -> Option<u8> {
    b.is_ascii_digit().then(|| b - b'0')
}

fn to_i128(n: usize) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}

/// Reads `[+-]digits`, saturating at [`EXPONENT_LIMIT`]; empty reads as 0.
fn parse_exponent(text: &str) -> i128 {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let magnitude = digits
        .bytes()
        .filter_map(digit)
        .fold(0i128, |acc, d| (acc * 10 + i128::from(d)).min(EXPONENT_LIMIT));
    if negative { -magnitude } else { magnitude }
}

/// Appends `e` as an order-preserving, self-delimiting signed integer:
///
/// | `e` | bytes |
/// |---|---|
/// | `e ≥ 64` | `c0 + (len − 1)`, then `e − 64` big-endian in `len` (1..=8, minimal) bytes |
/// | `0 ≤ e < 64` | `80 + e` |
/// | `−64 ≤ e < 0` | `40 + (e + 64)` |
/// | `e < −64` | `3f − (len − 1)`, then `!(−65 − e)` big-endian in `len` (minimal) bytes |
fn write_exponent(e: i64, out: &mut Vec<u8>) {
    match e {
        64.. => write_long(0xc0, e.abs_diff(64), false, out),
        0..=63 => out.push(0x80 | e as u8),
        -64..=-1 => out.push(0x40 + (e + 64) as u8),
        _ => write_long(0x3f, e.abs_diff(-65), true, out),
    }
}

/// A header byte (`base` moved up, or down when `invert`, by `len − 1`) and `u`'s `len`
/// significant big-endian bytes, inverted when `invert`.
fn write_long(base: u8, u: u64, invert: bool, out: &mut Vec<u8>) {
    let len = u64::BITS.saturating_sub(u.leading_zeros()).div_ceil(8).max(1) as usize;
    let step = (len - 1) as u8;
    out.push(if invert { base - step } else { base + step });
    let bytes = u.to_be_bytes();
    let significant = bytes.iter().skip(bytes.len() - len);
    out.extend(significant.map(|&b| if invert { !b } else { b }));
}

/// Appends the digits two at a time: `2·(10d + d') + 1` while more pairs follow, `2·(10d + d')`
/// for the last pair (an odd last digit is paired with 0).
fn write_digits(digits: &[u8], out: &mut Vec<u8>) {
    let mut pairs = digits.chunks(2).peekable();
    while let Some(pair) = pairs.next() {
        let high = pair.first().copied().unwrap_or(0);
        let low = pair.get(1).copied().unwrap_or(0);
        let more = u8::from(pairs.peek().is_some());
        out.push(2 * (10 * high + low) + more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(text: &str) -> Number {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn encoded(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&num(text), 0x40, &mut out);
        out
    }

    /// Each group is equal within itself and below the next group.
    const ORDERED: &[&[&str]] = &[
        &["-1e400"],
        &["-1.7976931348623157e308"],
        &["-12345678901234567890124"],
        &["-12345678901234567890123"],
        &["-100", "-1e2", "-100.0", "-0.1e3"],
        &["-1.5"],
        &["-1", "-1.0", "-1e0", "-10e-1"],
        &["-0.5"],
        &["-5e-324"],
        &["0", "-0", "0.0", "-0.0", "0e10", "0E-7", "1e-400"],
        &["5e-324"],
        &["0.001"],
        &[
            "0.1",
            "0.1000000000000000055511151231257827021181583404541015625",
            "0.10000000000000000001",
        ],
        &["0.125"],
        &["1", "1.0", "1e0", "1E0", "10e-1", "0.1e1", "1.00000000000000000001"],
        &["2"],
        &["3.0", "3"],
        &["9007199254740991"],
        &["9007199254740992", "9007199254740992.0", "9007199254740993.0"],
        &["9007199254740993"],
        &["12345678901234567890123"],
        &["12345678901234567890124"],
        &["99999999999999991611391"],
        &["99999999999999991611392", "1e23", "1E+23", "100000000000000000000000.0"],
        &["99999999999999991611393"],
        &["100000000000000000000000"],
        &["1.7976931348623157e308"],
        &["1e400", "10e399"],
        &["1e401"],
    ];

    #[test]
    fn numbers_order_by_exact_value_as_couchdb_decodes_them() {
        let flat: Vec<(usize, &str)> = ORDERED
            .iter()
            .enumerate()
            .flat_map(|(rank, group)| group.iter().map(move |t| (rank, *t)))
            .collect();
        for &(ra, a) in &flat {
            for &(rb, b) in &flat {
                let want = ra.cmp(&rb);
                assert_eq!(compare(&num(a), &num(b)), want, "compare {a} {b}");
                assert_eq!(Decimal::of(&num(a)).cmp(&Decimal::of(&num(b))), want, "{a} {b}");
                assert_eq!(encoded(a).cmp(&encoded(b)), want, "encode {a} {b}");
            }
        }
    }

    #[test]
    fn parse_normalizes() {
        let d = Decimal::parse("-00120.0340e2");
        assert_eq!(d, Decimal { negative: true, exponent: 5, digits: vec![1, 2, 0, 0, 3, 4] });
        assert_eq!(
            Decimal::parse("0.05"),
            Decimal { negative: false, exponent: -1, digits: vec![5] }
        );
        assert_eq!(
            Decimal::parse("-0.000"),
            Decimal { negative: false, exponent: 0, digits: vec![] }
        );
        assert_eq!(Decimal::parse("junk"), Decimal::parse("0"));
        assert_eq!(Decimal::parse("1e99999999999999999999999999999999").exponent, i64::MAX);
        assert_eq!(Decimal::parse("1e-99999999999999999999999999999999").exponent, i64::MIN);
    }

    #[test]
    fn exponent_encoding_orders_and_delimits() {
        let mut exponents: Vec<i64> = (-70_000..70_000).step_by(7).collect();
        exponents.extend([i64::MIN, i64::MIN + 1, -65_601, -321, -320, -65, -64, -1, 0, 63, 64]);
        exponents.extend([319, 320, 65_599, 65_600, i64::MAX - 1, i64::MAX]);
        exponents
            .extend((0..63).flat_map(|s| [1i64 << s, -(1i64 << s), (1 << s) + 64, -(1 << s) - 65]));
        exponents.sort_unstable();
        exponents.dedup();
        let encoded: Vec<Vec<u8>> = exponents
            .iter()
            .map(|&e| {
                let mut out = Vec::new();
                write_exponent(e, &mut out);
                out
            })
            .collect();
        for (pair, e) in encoded.windows(2).zip(&exponents) {
            assert!(pair[0] < pair[1], "order at {e}");
            assert!(!pair[1].starts_with(&pair[0]), "prefix at {e}");
        }
    }

    #[test]
    fn encoding_bytes_match_the_spec() {
        assert_eq!(encoded("0"), [0x41]);
        assert_eq!(encoded("1"), [0x42, 0x81, 20]);
        assert_eq!(encoded("123"), [0x42, 0x83, 25, 60]);
        assert_eq!(encoded("-123"), [0x40, !0x83, !25, !60]);
        assert_eq!(encoded("0.05"), [0x42, 0x7f, 100]);
        assert_eq!(encoded("1e15"), [0x42, 0x90, 20]);
        assert_eq!(encoded("1e100").len(), 3 + 101_usize.div_ceil(2));
        assert_eq!(encoded("1e-100"), [0x42, 0x3f, !34, 20]);
        // A float at or above 2^53 is an integer and keeps all its digits, so that it equals
        // the integer literal of the same value, as in CouchDB.
        let exact = concat!(
            "10000000000000000159028911097599180468360808563945281389781327557747838772",
            "170381060813469985856815104"
        );
        assert_eq!(encoded("1.0e100"), encoded(exact));
    }
}
