//! Python's arithmetic on the two number types a translated UDF meets — `int`
//! (here 64 bits; past them the call goes back to Python) and `float` — written
//! after CPython's `Objects/longobject.c` and `floatobject.c`. `None` means
//! "Python would raise here, or the answer needs more than 64 bits": the key
//! is run by Python, which gives the real answer or the real exception.

use std::cmp::Ordering;

/// Ints whose conversion to a float, and division, are exact.
const EXACT_INT: i64 = 1 << 53;

/// `a // b` for ints: rounded toward negative infinity.
pub fn int_floordiv(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let q = a.checked_div(b)?;
    if a % b != 0 && ((a < 0) != (b < 0)) {
        q.checked_sub(1)
    } else {
        Some(q)
    }
}

/// `a % b` for ints: the sign of `b`.
pub fn int_mod(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let r = a.wrapping_rem(b);
    Some(if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    })
}

/// `a / b` for ints: a float, correctly rounded (exact operands only).
pub fn int_div(a: i64, b: i64) -> Option<f64> {
    if b == 0 || a.unsigned_abs() > EXACT_INT as u64 || b.unsigned_abs() > EXACT_INT as u64 {
        return None;
    }
    Some(a as f64 / b as f64)
}

/// `a / b` for floats.
pub fn float_div(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// `divmod(a, b)` for floats, as `float_divmod` computes it.
fn float_divmod(vx: f64, wx: f64) -> Option<(f64, f64)> {
    if wx == 0.0 {
        return None;
    }
    let mut m = vx % wx;
    let mut div = (vx - m) / wx;
    if m != 0.0 {
        if (wx < 0.0) != (m < 0.0) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = 0.0_f64.copysign(wx);
    }
    let floordiv = if div != 0.0 {
        let mut f = div.floor();
        if div - f > 0.5 {
            f += 1.0;
        }
        f
    } else {
        0.0_f64.copysign(vx / wx)
    };
    Some((floordiv, m))
}

/// `a // b` for floats.
pub fn float_floordiv(a: f64, b: f64) -> Option<f64> {
    float_divmod(a, b).map(|(d, _)| d)
}

/// `a % b` for floats (`float_rem`).
pub fn float_mod(vx: f64, wx: f64) -> Option<f64> {
    if wx == 0.0 {
        return None;
    }
    let mut m = vx % wx;
    if m != 0.0 {
        if (wx < 0.0) != (m < 0.0) {
            m += wx;
        }
    } else {
        m = 0.0_f64.copysign(wx);
    }
    Some(m)
}

/// `a ** b` for ints with `b >= 0` (a negative power is a float: Python's).
pub fn int_pow(a: i64, b: i64) -> Option<i64> {
    let b = u32::try_from(b).ok()?;
    a.checked_pow(b)
}

/// `a ** b` for floats, where CPython's `float_pow` would not raise or give a
/// complex number.
pub fn float_pow(x: f64, y: f64) -> Option<f64> {
    if y == 0.0 {
        return Some(1.0);
    }
    if x.is_nan() {
        return Some(x);
    }
    if x == 0.0 && y < 0.0 {
        return None;
    }
    if x < 0.0 && y.is_finite() && y.fract() != 0.0 {
        return None;
    }
    let r = x.powf(y);
    if r.is_infinite() && x.is_finite() && y.is_finite() {
        return None;
    }
    Some(r)
}

/// How an int compares with a float, exactly (Python compares the values,
/// not a rounded copy); `None` when the float is NaN.
pub fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // 2**63 as a float: every finite float at or above it exceeds every i64.
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if f >= TWO63 {
        return Some(Ordering::Less);
    }
    if f < -TWO63 {
        return Some(Ordering::Greater);
    }
    let t = f.trunc();
    // |t| < 2**63 and integral: exact as an i64.
    let ti = t as i64;
    Some(match i.cmp(&ti) {
        Ordering::Equal => {
            let frac = f - t;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        other => other,
    })
}

/// `round(x)`: half to even, as an int.
pub fn round_to_int(x: f64) -> Option<i64> {
    to_int(x.round_ties_even())
}

/// An integral float as an i64, when it is one.
pub fn to_int(x: f64) -> Option<i64> {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    (x.is_finite() && (-TWO63..TWO63).contains(&x)).then_some(x as i64)
}

/// `round(x, n)` for a float and `0 <= n <= 17`: through the decimal text
/// correctly rounded to `n` places and back, as CPython's `double_round`.
pub fn round_places(x: f64, n: i64) -> Option<f64> {
    if !x.is_finite() {
        return None;
    }
    let n = usize::try_from(n).ok().filter(|&n| n <= 17)?;
    let text = format!("{x:.n$}");
    text.parse().ok()
}

/// A math function's result `r` at `x`, with CPython's `math_1` rule: a NaN from a
/// number, or an infinity from a finite number, raises.
pub fn math_1(x: f64, r: f64) -> Option<f64> {
    if (r.is_nan() && !x.is_nan()) || (r.is_infinite() && x.is_finite()) {
        None
    } else {
        Some(r)
    }
}

/// `repr(x)` (and `str(x)`, `f"{x}"`) for a float, as CPython writes it: the
/// shortest digits that read back as `x`, in fixed notation when the decimal
/// point falls within 16 places before and 4 after the first digit, else as
/// `d.ddde±XX`; `.0` after a whole number.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return (if x > 0.0 { "inf" } else { "-inf" }).to_owned();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d.ddde-7`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let n = digits.len() as i32;
    let decpt = exp + 1;
    let mut out = String::new();
    if x.is_sign_negative() {
        out.push('-');
    }
    if (-3..=16).contains(&decpt) {
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-decpt) as usize));
            out.push_str(&digits);
        } else if decpt >= n {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (decpt - n) as usize));
            out.push_str(".0");
        } else {
            let (a, b) = digits.split_at(decpt as usize);
            out.push_str(a);
            out.push('.');
            out.push_str(b);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let e = decpt - 1;
        out.push_str(&format!("e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_floor_toward_negative_infinity() {
        assert_eq!(int_floordiv(7, 2), Some(3));
        assert_eq!(int_floordiv(-7, 2), Some(-4));
        assert_eq!(int_floordiv(7, -2), Some(-4));
        assert_eq!(int_floordiv(-7, -2), Some(3));
        assert_eq!(int_floordiv(i64::MIN, -1), None);
        assert_eq!(int_floordiv(1, 0), None);
        assert_eq!(int_mod(-7, 2), Some(1));
        assert_eq!(int_mod(7, -2), Some(-1));
        assert_eq!(int_mod(i64::MIN, -1), Some(0));
    }

    #[test]
    fn floats_divide_as_cpython_does() {
        assert_eq!(float_floordiv(7.5, 2.0), Some(3.0));
        assert_eq!(float_floordiv(-7.5, 2.0), Some(-4.0));
        assert_eq!(float_mod(-7.5, 2.0), Some(0.5));
        assert_eq!(float_mod(7.5, -2.0), Some(-0.5));
        assert!(float_mod(0.0, -2.0).is_some_and(|m| m == 0.0 && m.is_sign_negative()));
        assert!(float_floordiv(-0.0, 5.0).is_some_and(|d| d == 0.0 && d.is_sign_negative()));
        assert_eq!(float_floordiv(1.0, 0.0), None);
    }

    #[test]
    fn ints_compare_with_floats_exactly() {
        let big = (1_i64 << 53) + 1;
        assert_eq!(cmp_int_float(big, big as f64), Some(Ordering::Greater));
        assert_eq!(cmp_int_float(i64::MAX, 9.3e18), Some(Ordering::Less));
        assert_eq!(cmp_int_float(-3, -2.5), Some(Ordering::Less));
        assert_eq!(cmp_int_float(2, 2.0), Some(Ordering::Equal));
        assert_eq!(cmp_int_float(0, f64::NAN), None);
    }

    #[test]
    fn floats_are_written_as_cpythons_repr() {
        for (x, text) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (2.5, "2.5"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (123.456, "123.456"),
            (1e308, "1e+308"),
            (5e-324, "5e-324"),
            (-2.675, "-2.675"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(float_repr(x), text, "{x:?}");
        }
    }

    #[test]
    fn round_is_half_to_even() {
        assert_eq!(round_to_int(2.5), Some(2));
        assert_eq!(round_to_int(-0.5), Some(0));
        assert_eq!(round_to_int(3.5), Some(4));
        assert_eq!(round_to_int(f64::INFINITY), None);
        assert_eq!(round_places(2.675, 2), Some(2.67));
        assert_eq!(round_places(0.125, 2), Some(0.12));
    }
}
