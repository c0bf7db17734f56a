//! Go's `time.Duration.String()` ([`go_duration`]) and `time.ParseDuration` (units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`;
//! decimals and sequences such as `1h30m`, `1.5s`), for `@every` specs and
//! the schedule file's durations.

use std::time::Duration;

/// Go `time.Duration.String()` (`0s`, `150ms`, `1.5s`, `2m3.45s`, `1h0m0s`).
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    // Integer part and fraction digits (trailing zeros trimmed) of
    // `value / 10^digits`.
    fn decimal(value: u128, digits: u32) -> String {
        let scale = 10u128.pow(digits);
        let (int, frac) = (value / scale, value % scale);
        if frac == 0 {
            return int.to_string();
        }
        let frac = format!("{frac:0width$}", width = digits as usize);
        format!("{int}.{}", frac.trim_end_matches('0'))
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", decimal(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 6));
    }
    let secs_total = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    let (h, m, s) = (secs_total / 3600, secs_total / 60 % 60, secs_total % 60);
    let secs = decimal(s * 1_000_000_000 + sub, 9);
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, _) => format!("{m}m{secs}s"),
        _ => format!("{h}h{m}m{secs}s"),
    }
}

/// Parses a Go duration string. Negative durations are refused (no asynq
/// option takes one). Errors with Go's wording: `time: invalid duration "x"`,
/// `time: missing unit in duration "1"`, `time: unknown unit "d" in duration "1d"`.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return Err(invalid());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = num.parse().map_err(|_| invalid())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per = match unit {
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            other => return Err(format!("time: unknown unit {other:?} in duration {s:?}")),
        };
        total += value * nanos_per;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_forms() {
        let ok = |s: &str| parse_go_duration(s).unwrap();
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("2m3.5s"), Duration::from_millis(123_500));
        assert_eq!(ok("24h"), Duration::from_secs(86_400));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("10us"), Duration::from_micros(10));
        assert_eq!(
            parse_go_duration("1").unwrap_err(),
            "time: missing unit in duration \"1\""
        );
        assert_eq!(
            parse_go_duration("1d").unwrap_err(),
            "time: unknown unit \"d\" in duration \"1d\""
        );
        assert_eq!(
            parse_go_duration("").unwrap_err(),
            "time: invalid duration \"\""
        );
        assert!(parse_go_duration("-1s").is_err());
        assert!(parse_go_duration("s").is_err());
    }
}
