//! Kubernetes resource quantities (`500m`, `2`, `8Gi`, `1e3`), as the API
//! server parses them, so a bad value fails here and not at `kubectl apply`.

/// Parses a quantity and returns its value in base units (cores, bytes) as a
/// float, which is precise enough to compare against zero and to order.
pub fn parse(s: &str) -> Result<f64, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty quantity".to_owned());
    }
    let (sign, rest) = match s.as_bytes()[0] {
        b'+' => (1.0, &s[1..]),
        b'-' => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(format!("`{s}` does not start with a number"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{s}` does not start with a number"))?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..]
                .parse()
                .map_err(|_| format!("`{s}` has an invalid exponent"))?;
            10f64.powi(e)
        }
        other => {
            return Err(format!(
                "`{s}` has an unknown suffix `{other}` (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
            ));
        }
    };
    Ok(sign * value * scale)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn accepts_the_api_server_forms() {
        assert_eq!(parse("500m").unwrap(), 0.5);
        assert_eq!(parse("2").unwrap(), 2.0);
        assert_eq!(parse("8Gi").unwrap(), 8.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(parse("1e3").unwrap(), 1000.0);
        assert_eq!(parse("1.5").unwrap(), 1.5);
        assert_eq!(parse(".5").unwrap(), 0.5);
        assert_eq!(parse("-1").unwrap(), -1.0);
    }

    #[test]
    fn refuses_what_the_api_server_refuses() {
        for bad in ["", "Gi", "8GB", "8 Gi", "1..2", "one", "8gi", "1e", "--1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
