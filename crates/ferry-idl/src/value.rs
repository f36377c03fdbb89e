//! Default and constant values, read as ROS 2 reads them: Python's integer
//! and float syntax (`0x1F`, `1_000`, `nan`, `-inf`), `true`/`false`/`1`/`0`
//! for booleans, optionally quoted strings (`"…"` or `'…'`, the quote
//! escaped inside as `\"` or `\'`), and `[a, b, c]` for arrays.

use crate::model::{BaseType, Collection, FieldType, Primitive, Value};

/// Parses `text` as a value of `ty`; the error says why not.
pub fn parse_value(text: &str, ty: &FieldType) -> Result<Value, String> {
    match ty.collection {
        Collection::Single => parse_scalar(text, &ty.base),
        Collection::Array(n) | Collection::Bounded(n) => {
            let items = parse_array(text, &ty.base)?;
            let len = items.len() as u64;
            if matches!(ty.collection, Collection::Array(_)) && len != n {
                return Err(format!("the array holds exactly {n} elements, found {len}"));
            }
            if len > n {
                return Err(format!(
                    "the sequence holds at most {n} elements, found {len}"
                ));
            }
            Ok(Value::Array(items))
        }
        Collection::Unbounded => parse_array(text, &ty.base).map(Value::Array),
    }
}

/// Parses one element of `base`.
pub fn parse_scalar(text: &str, base: &BaseType) -> Result<Value, String> {
    match base {
        BaseType::Primitive(Primitive::Bool) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err("a bool is `true`, `false`, `1` or `0`".into()),
        },
        BaseType::Primitive(p @ (Primitive::Float32 | Primitive::Float64)) => parse_float(text)
            .map(Value::Float)
            .ok_or_else(|| format!("a {p} is a number like `1.5`, `-2e-3`, `nan` or `inf`")),
        BaseType::Primitive(p) => {
            let v = parse_int(text).ok_or_else(|| {
                "an integer is decimal, `0x…`, `0o…` or `0b…`, digits optionally grouped with `_`"
                    .to_string()
            })?;
            let (lo, hi) = p.int_range().unwrap_or((0, 0));
            if v < lo || v > hi {
                return Err(format!("out of range {lo}..={hi}"));
            }
            Ok(Value::Int(v))
        }
        BaseType::String { bound } | BaseType::WString { bound } => {
            let s = unquote(text)?;
            if let Some(n) = bound {
                let len = s.chars().count() as u64;
                if len > *n {
                    return Err(format!(
                        "the string holds at most {n} characters, found {len}"
                    ));
                }
            }
            Ok(Value::String(s))
        }
        BaseType::Message(_) => Err("message fields have no default values".into()),
    }
}

/// Python's `int(s)`, then `int(s, 0)`: optional sign, decimal (leading
/// zeros allowed) or a `0x`/`0o`/`0b` prefix, `_` between digits.
pub fn parse_int(text: &str) -> Option<i128> {
    let t = text.trim();
    let (neg, body) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(r) = lower.strip_prefix("0x") {
        (16, r.strip_prefix('_').unwrap_or(r))
    } else if let Some(r) = lower.strip_prefix("0o") {
        (8, r.strip_prefix('_').unwrap_or(r))
    } else if let Some(r) = lower.strip_prefix("0b") {
        (2, r.strip_prefix('_').unwrap_or(r))
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c == '_' || c.is_digit(radix))
    {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let v = i128::from_str_radix(&clean, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// Python's `float(s)`: decimal or exponent notation, `nan`, `inf`,
/// `infinity` (any case, optional sign), `_` between digits.
pub fn parse_float(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.is_empty() || t.starts_with('_') || t.ends_with('_') || t.contains("__") {
        return None;
    }
    let clean: String = t.chars().filter(|&c| c != '_').collect();
    let lower = clean.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if !matches!(unsigned, "inf" | "infinity" | "nan")
        && !unsigned
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-'))
    {
        return None;
    }
    lower.parse().ok()
}

/// A string value: the text itself, or without its quotes when it starts
/// and ends with the same quote (the quote must then be escaped inside).
fn unquote(text: &str) -> Result<String, String> {
    for q in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(q) && text.ends_with(q) {
            let inner = &text[1..text.len() - 1];
            let mut out = String::with_capacity(inner.len());
            let mut prev_backslash = false;
            for c in inner.chars() {
                if c == q && !prev_backslash {
                    return Err(format!(
                        "a `{q}` inside the quotes must be escaped as `\\{q}`"
                    ));
                }
                if c == q {
                    out.pop(); // the backslash
                }
                out.push(c);
                prev_backslash = c == '\\';
            }
            return Ok(out);
        }
    }
    Ok(text.to_string())
}

/// `[a, b, c]` of elements of `base`.
fn parse_array(text: &str, base: &BaseType) -> Result<Vec<Value>, String> {
    let t = text.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or("an array value is written `[a, b, c]`")?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    let stringy = matches!(base, BaseType::String { .. } | BaseType::WString { .. });
    let parts = if stringy {
        split_strings(inner)?
    } else {
        inner.split(',').map(|s| s.trim().to_string()).collect()
    };
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| parse_scalar(p, base).map_err(|e| format!("element {i}: {e}")))
        .collect()
}

/// Splits the inside of a string array: quoted elements may hold commas.
fn split_strings(inner: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = inner.chars().collect();
    let mut i = 0;
    loop {
        while i < chars.len() && chars[i] == ' ' {
            i += 1;
        }
        if i >= chars.len() {
            return Err("a `,` with no element after it".into());
        }
        let start = i;
        if chars[i] == '"' || chars[i] == '\'' {
            let q = chars[i];
            i += 1;
            while i < chars.len() && !(chars[i] == q && chars[i - 1] != '\\') {
                i += 1;
            }
            if i >= chars.len() {
                return Err(format!("an element opens `{q}` and never closes it"));
            }
            i += 1;
            out.push(chars[start..i].iter().collect());
            while i < chars.len() && chars[i] == ' ' {
                i += 1;
            }
            if i < chars.len() && chars[i] != ',' {
                return Err("expected `,` after a quoted element".into());
            }
        } else {
            while i < chars.len() && chars[i] != ',' {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            if s.trim().is_empty() {
                return Err("an empty element between `,`".into());
            }
            out.push(s.trim().to_string());
        }
        if i >= chars.len() {
            return Ok(out);
        }
        i += 1; // the comma
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_python() {
        for (s, v) in [
            ("10", 10),
            ("-0x1f", -31),
            ("0o17", 15),
            ("0b101", 5),
            ("1_000", 1000),
            ("007", 7),
            (" +3 ", 3),
            ("0x_ff", 255),
        ] {
            assert_eq!(parse_int(s), Some(v), "{s}");
        }
        for s in ["", "1__0", "_1", "1_", "0x", "1.0", "abc", "--1", "0xg"] {
            assert_eq!(parse_int(s), None, "{s}");
        }
    }

    #[test]
    fn floats_follow_python() {
        assert_eq!(parse_float("1.5e3"), Some(1500.0));
        assert_eq!(parse_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_float("nan").is_some_and(f64::is_nan));
        assert_eq!(parse_float("1_0.5"), Some(10.5));
        assert_eq!(parse_float(".5"), Some(0.5));
        for s in ["", "1,5", "one", "1e", "0x10"] {
            assert_eq!(parse_float(s), None, "{s}");
        }
    }

    #[test]
    fn strings_unquote_and_check_escapes() {
        assert_eq!(unquote("\"Hello'world!\"").unwrap(), "Hello'world!");
        assert_eq!(unquote("'Hello\\'world!'").unwrap(), "Hello'world!");
        assert_eq!(unquote("plain text").unwrap(), "plain text");
        assert_eq!(unquote("\"a").unwrap(), "\"a");
        assert!(unquote("'a'b'").is_err());
    }

    #[test]
    fn string_arrays_split_on_commas_outside_quotes() {
        let v = split_strings("\"a,b\", 'c' , d").unwrap();
        assert_eq!(v, vec!["\"a,b\"", "'c'", "d"]);
        assert!(split_strings(",a").is_err());
        assert!(split_strings("'a").is_err());
        assert!(split_strings("a,,b").is_err());
    }
}
