//! Value parsers of the command line: durations (`5s`, `1m30s`), the root
//! path, `--allowed-hosts` names and `--basic-auth` pairs. Each answers a
//! one-line reason on bad input, which clap prints as a usage error.

use std::time::Duration;

/// `""`, `"/"` → `""`; `"asynq"`, `"/asynq/"` → `"/asynq"`. Refuses `?`,
/// `#`, `//`, `..` and whitespace.
pub(crate) fn normalize_root_path(raw: &str) -> Result<String, String> {
    let trimmed = raw.trim().trim_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    let bad = trimmed.contains(['?', '#', '\\'])
        || trimmed.contains("//")
        || trimmed.split('/').any(|seg| seg == "..")
        || trimmed.chars().any(|c| c.is_whitespace() || c.is_control());
    if bad {
        return Err(format!(
            "--root-path {raw:?} must be a plain path like /asynq"
        ));
    }
    Ok(format!("/{trimmed}"))
}

/// Parses `5s`, `500ms`, `2m`, `1h`, `1m30s`, `1.5s` or plain seconds (`5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad =
        || format!("invalid duration {s:?}: use e.g. 5s, 500ms, 2m, 1m30s or a number of seconds");
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(value * scale).map_err(|_| bad())?;
    }
    Ok(total)
}

/// One `--allowed-hosts` entry: trimmed, not empty, no spaces, `/` or `@`.
pub(crate) fn parse_host_name(s: &str) -> Result<String, String> {
    let name = s.trim();
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '/' || c == '@') {
        return Err(format!("{s:?} is not a host name"));
    }
    Ok(name.to_string())
}

pub(crate) fn parse_basic_auth(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((user, password)) if !user.is_empty() && !password.is_empty() => {
            Ok((user.to_string(), password.to_string()))
        }
        _ => Err("expected user:password (both non-empty)".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations: units, compounds, plain seconds; garbage is refused.
    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        for bad in ["", "s", "5x", "-1", "five", "5 s", "1.2.3s", "ms5"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    /// Root paths gain a leading slash and lose trailing ones.
    #[test]
    fn root_paths() {
        assert_eq!(normalize_root_path(""), Ok(String::new()));
        assert_eq!(normalize_root_path("/"), Ok(String::new()));
        assert_eq!(normalize_root_path("asynq"), Ok("/asynq".into()));
        assert_eq!(normalize_root_path("/a/b/"), Ok("/a/b".into()));
        for bad in ["/a?b", "/a b", "/a//b", "/../x"] {
            assert!(normalize_root_path(bad).is_err(), "{bad:?}");
        }
    }
}
