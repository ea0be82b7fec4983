//! `$bucketAuto`'s `granularity`: bucket boundaries rounded to a preferred-number series,
//! as MongoDB rounds them. A series lists the numbers of one decade (`R5` is 1.0, 1.6, 2.5,
//! 4.0, 6.3, scaled by 10); a value is scaled into the decade that holds it by powers of
//! ten, and rounding up gives the first series number strictly above it, rounding down the
//! last strictly below (zero rounds to itself). The series are MongoDB's, number for
//! number (its `R40` has no 335 and its `R80` only the 40 numbers between `R40`'s); a
//! boundary of a series is a double (a Decimal128 value rounds to a Decimal128, through a
//! double). `POWERSOF2` rounds to the next (previous) power of two, typed as `$pow` types
//! `2` to an integer power: an int or long for an int, long or double value, a double
//! below 1.

use bson::{Bson, DateTime, Document, bson};

use crate::expr::value::{decimal, to_f64, type_name};
use crate::expr::{Expr, ExprError, Result, Vars};

const R5: &[f64] = &[10., 16., 25., 40., 63.];
const R10: &[f64] = &[100., 125., 160., 200., 250., 315., 400., 500., 630., 800.];
const R20: &[f64] = &[
    100., 112., 125., 140., 160., 180., 200., 224., 250., 280., 315., 355., 400., 450., 500., 560.,
    630., 710., 800., 900.,
];
const R40: &[f64] = &[
    100., 106., 112., 118., 125., 132., 140., 150., 160., 170., 180., 190., 200., 212., 224., 236.,
    250., 265., 280., 300., 315., 355., 375., 400., 425., 450., 475., 500., 530., 560., 600., 630.,
    670., 710., 750., 800., 850., 900., 950.,
];
const R80: &[f64] = &[
    103., 109., 115., 122., 128., 136., 145., 155., 165., 175., 185., 195., 206., 218., 230., 243.,
    258., 272., 290., 307., 325., 345., 365., 387., 412., 437., 462., 487., 515., 545., 575., 615.,
    650., 690., 730., 775., 825., 875., 925., 975.,
];
const ONE_TWO_FIVE: &[f64] = &[10., 20., 50.];
const E6: &[f64] = &[10., 15., 22., 33., 47., 68.];
const E12: &[f64] = &[10., 12., 15., 18., 22., 27., 33., 39., 47., 56., 68., 82.];
const E24: &[f64] = &[
    10., 11., 12., 13., 15., 16., 18., 20., 22., 24., 27., 30., 33., 36., 39., 43., 47., 51., 56.,
    62., 68., 75., 82., 91.,
];
const E48: &[f64] = &[
    100., 105., 110., 115., 121., 127., 133., 140., 147., 154., 162., 169., 178., 187., 196., 205.,
    215., 226., 237., 249., 261., 274., 287., 301., 316., 332., 348., 365., 383., 402., 422., 442.,
    464., 487., 511., 536., 562., 590., 619., 649., 681., 715., 750., 787., 825., 866., 909., 953.,
];
const E96: &[f64] = &[
    100., 102., 105., 107., 110., 113., 115., 118., 121., 124., 127., 130., 133., 137., 140., 143.,
    147., 150., 154., 158., 162., 165., 169., 174., 178., 182., 187., 191., 196., 200., 205., 210.,
    215., 221., 226., 232., 237., 243., 249., 255., 261., 267., 274., 280., 287., 294., 301., 309.,
    316., 324., 332., 340., 348., 357., 365., 374., 383., 392., 402., 412., 422., 432., 442., 453.,
    464., 475., 487., 499., 511., 523., 536., 549., 562., 576., 590., 604., 619., 634., 649., 665.,
    681., 698., 715., 732., 750., 768., 787., 806., 825., 845., 866., 887., 909., 931., 953., 976.,
];
const E192: &[f64] = &[
    100., 101., 102., 104., 105., 106., 107., 109., 110., 111., 113., 114., 115., 117., 118., 120.,
    121., 123., 124., 126., 127., 129., 130., 132., 133., 135., 137., 138., 140., 142., 143., 145.,
    147., 149., 150., 152., 154., 156., 158., 160., 162., 164., 165., 167., 169., 172., 174., 176.,
    178., 180., 182., 184., 187., 189., 191., 193., 196., 198., 200., 203., 205., 208., 210., 213.,
    215., 218., 221., 223., 226., 229., 232., 234., 237., 240., 243., 246., 249., 252., 255., 258.,
    261., 264., 267., 271., 274., 277., 280., 284., 287., 291., 294., 298., 301., 305., 309., 312.,
    316., 320., 324., 328., 332., 336., 340., 344., 348., 352., 357., 361., 365., 370., 374., 379.,
    383., 388., 392., 397., 402., 407., 412., 417., 422., 427., 432., 437., 442., 448., 453., 459.,
    464., 470., 475., 481., 487., 493., 499., 505., 511., 517., 523., 530., 536., 542., 549., 556.,
    562., 569., 576., 583., 590., 597., 604., 612., 619., 626., 634., 642., 649., 657., 665., 673.,
    681., 690., 698., 706., 715., 723., 732., 741., 750., 759., 768., 777., 787., 796., 806., 816.,
    825., 835., 845., 856., 866., 876., 887., 898., 909., 920., 931., 942., 953., 965., 976., 988.,
];

/// How boundaries are rounded.
#[derive(Clone, Debug, PartialEq)]
pub enum Granularity {
    /// A preferred-number series (one decade of it).
    Series(&'static [f64]),
    PowersOf2,
}

impl Granularity {
    /// The granularity named `name` (MongoDB's names).
    pub fn parse(name: &Bson) -> Result<Granularity> {
        let Bson::String(name) = name else {
            return Err(ExprError::location(
                40261,
                format!(
                    "The $bucketAuto 'granularity' field must be a string, but found type: {}",
                    type_name(name)
                ),
            ));
        };
        let series = match name.as_str() {
            "POWERSOF2" => return Ok(Granularity::PowersOf2),
            "R5" => R5,
            "R10" => R10,
            "R20" => R20,
            "R40" => R40,
            "R80" => R80,
            "1-2-5" => ONE_TWO_FIVE,
            "E6" => E6,
            "E12" => E12,
            "E24" => E24,
            "E48" => E48,
            "E96" => E96,
            "E192" => E192,
            other => {
                return Err(ExprError::location(
                    40257,
                    format!("Unknown rounding mode for granularity: {other}"),
                ));
            }
        };
        Ok(Granularity::Series(series))
    }

    /// Checks a `groupBy` value: with a granularity it must be a number, not NaN and not
    /// negative.
    pub fn check(value: &Bson) -> Result<()> {
        let prefix = "$bucketAuto can specify a 'granularity' with";
        let Some(x) = to_f64(value) else {
            return Err(ExprError::location(
                40258,
                format!(
                    "{prefix} numeric boundaries only, but found a value with type: {}",
                    type_name(value)
                ),
            ));
        };
        if x.is_nan() {
            return Err(ExprError::location(
                40259,
                format!("{prefix} numeric boundaries only, but found a NaN"),
            ));
        }
        if x < 0.0 {
            return Err(ExprError::location(
                40260,
                format!("{prefix} non-negative numbers only, but found a negative number"),
            ));
        }
        Ok(())
    }

    /// The boundary at or above `value` (strictly above unless it is zero).
    pub fn round_up(&self, value: &Bson) -> Result<Bson> {
        self.round(value, true)
    }

    /// The boundary below `value` (zero stays zero).
    pub fn round_down(&self, value: &Bson) -> Result<Bson> {
        self.round(value, false)
    }

    fn round(&self, value: &Bson, up: bool) -> Result<Bson> {
        Self::check(value)?;
        let x = to_f64(value).unwrap_or(0.0);
        if x == 0.0 || x.is_infinite() {
            return Ok(value.clone());
        }
        match self {
            Granularity::Series(series) => {
                let r = if up { series_up(x, series) } else { series_down(x, series) };
                Ok(match value {
                    Bson::Decimal128(_) => decimal(r),
                    _ => Bson::Double(r),
                })
            }
            Granularity::PowersOf2 => power_of_two(value, x, up),
        }
    }
}

/// The first number of the series (scaled by a power of ten) strictly above `x > 0`.
fn series_up(x: f64, series: &[f64]) -> f64 {
    let (first, last) = (series[0], series[series.len() - 1]);
    let mut scale = 1.0;
    while x >= last * scale {
        scale *= 10.0;
    }
    while x < first * scale {
        let below = first * scale;
        scale /= 10.0;
        // Between one decade's last number and the next decade's first.
        if x >= last * scale {
            return below;
        }
    }
    series.iter().map(|s| s * scale).find(|s| x < *s).unwrap_or(last * scale)
}

/// The last number of the series (scaled by a power of ten) strictly below `x > 0`.
fn series_down(x: f64, series: &[f64]) -> f64 {
    let (first, last) = (series[0], series[series.len() - 1]);
    let mut scale = 1.0;
    while x <= first * scale {
        scale /= 10.0;
    }
    while x > last * scale {
        let above = last * scale;
        scale *= 10.0;
        if x <= first * scale {
            return above;
        }
    }
    series.iter().map(|s| s * scale).take_while(|s| *s < x).last().unwrap_or(first * scale)
}

/// The next (or previous) power of two of `x > 0`, as `{$pow: [2, exponent]}` types it.
fn power_of_two(value: &Bson, x: f64, up: bool) -> Result<Bson> {
    let exponent = match value {
        Bson::Int32(_) | Bson::Int64(_) => {
            let n = to_f64(value).map_or(1, |f| f as i64).max(1);
            let bits = 64 - i64::from(n.leading_zeros());
            match (up, n.count_ones() == 1) {
                (true, _) => bits,
                (false, true) => bits - 2,
                (false, false) => bits - 1,
            }
        }
        _ => match up {
            true => x.log2().floor() as i64 + 1,
            false => x.log2().ceil() as i64 - 1,
        },
    };
    let exponent = match value {
        Bson::Decimal128(_) => decimal(exponent as f64),
        _ => Bson::Int32(i32::try_from(exponent).unwrap_or(i32::MAX)),
    };
    let pow = Expr::parse(&bson!({"$pow": [2, exponent]}))?;
    pow.eval(&mut Vars::new(&Document::new(), DateTime::from_millis(0)))
}

#[cfg(test)]
mod tests {
    use bson::{Bson, bson};

    use super::Granularity;
    use crate::expr::Result;

    fn g(name: &str) -> Result<Granularity> {
        Granularity::parse(&Bson::String(name.into()))
    }

    #[test]
    fn series_round_strictly_past_the_value_across_decades() -> Result<()> {
        let e6 = g("E6")?;
        // MongoDB's own cases: 0.8 between decades rounds up to 1.0, down to 0.68.
        assert_eq!(e6.round_up(&bson!(0.8))?, Bson::Double(1.0));
        let down = e6.round_down(&bson!(0.8))?.as_f64().unwrap_or_default();
        assert!((down - 0.68).abs() < 1e-12, "{down}");
        assert_eq!(e6.round_up(&bson!(22))?, Bson::Double(33.0));
        assert_eq!(e6.round_down(&bson!(22))?, Bson::Double(15.0));
        assert_eq!(e6.round_up(&bson!(0))?, bson!(0));
        let r20 = g("R20")?;
        assert_eq!(r20.round_up(&bson!(59))?, Bson::Double(63.0));
        assert_eq!(r20.round_up(&bson!(82))?, Bson::Double(90.0));
        assert_eq!(r20.round_up(&bson!(1500))?, Bson::Double(1600.0));
        assert_eq!(g("1-2-5")?.round_up(&bson!(39))?, Bson::Double(50.0));
        assert_eq!(g("1-2-5")?.round_down(&bson!(100))?, Bson::Double(50.0));
        Ok(())
    }

    #[test]
    fn powers_of_two_keep_pow_types() -> Result<()> {
        let p = g("POWERSOF2")?;
        assert_eq!(p.round_up(&bson!(19))?, Bson::Int32(32));
        assert_eq!(p.round_up(&bson!(32))?, Bson::Int32(64));
        assert_eq!(p.round_down(&bson!(32))?, Bson::Int32(16));
        assert_eq!(p.round_down(&bson!(33_i64))?, Bson::Int32(32));
        assert_eq!(p.round_up(&bson!(5.5))?, Bson::Int32(8));
        assert_eq!(p.round_down(&bson!(0.3))?, Bson::Double(0.25));
        Ok(())
    }

    #[test]
    fn bad_names_and_values_get_mongodbs_codes() {
        let code = |r: Result<Granularity>| r.err().map(|e| e.code);
        assert_eq!(code(g("R7")), Some(40257));
        assert_eq!(code(Granularity::parse(&bson!(5))), Some(40261));
        let check = |v: Bson| Granularity::check(&v).err().map(|e| e.code);
        assert_eq!(check(bson!("a")), Some(40258));
        assert_eq!(check(Bson::Double(f64::NAN)), Some(40259));
        assert_eq!(check(bson!(-1)), Some(40260));
    }
}
