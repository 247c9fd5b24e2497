//! String `format`s, as kube-openapi's `strfmt` registry checks them.
//!
//! Only the formats the real server keeps are checked (see
//! `node::SUPPORTED_FORMATS`). `isbn*`, `creditcard` and `password` are
//! accepted as any string (the real checks are checksum/regex heavy and never
//! used by kube-derive schemas).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use base64::Engine;
use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime};
use regex::Regex;

fn re(cell: &'static OnceLock<Regex>, src: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(src).expect("static regex"))
}

/// Parses an RFC 3339 date-time (`2006-01-02T15:04:05Z`, with optional fraction and offset).
pub(crate) fn parse_date_time(s: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(s).ok()
}

/// The date-time layouts `strfmt.ParseDateTime` accepts: RFC 3339 (with or
/// without fraction, `:` in the offset optional), local ISO 8601 times, times
/// with minute precision and `2006-01-02 15:04:05`.
fn is_date_time(s: &str) -> bool {
    if parse_date_time(s).is_some() {
        return true;
    }
    const WITH_OFFSET: &[&str] = &["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%dT%H:%MZ"];
    const LOCAL: &[&str] = &[
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
    ];
    WITH_OFFSET.iter().any(|f| {
        DateTime::parse_from_str(s, f).is_ok() || NaiveDateTime::parse_from_str(s, f).is_ok()
    }) || LOCAL
        .iter()
        .any(|f| NaiveDateTime::parse_from_str(s, f).is_ok())
}

/// Parses a Go `time.ParseDuration` string (`1h30m`, `-1.5s`, `300ms`, `0`).
pub(crate) fn parse_go_duration(s: &str) -> Option<chrono::Duration> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        nanos += n * unit;
    }
    if nanos > i64::MAX as f64 {
        return None;
    }
    let d = chrono::Duration::nanoseconds(nanos as i64);
    Some(if neg { -d } else { d })
}

/// `strfmt`'s duration also accepts `<n> <unit>` forms such as `3 days` or `1 w`.
fn is_duration(s: &str) -> bool {
    static RX: OnceLock<Regex> = OnceLock::new();
    parse_go_duration(s).is_some()
        || re(
            &RX,
            r"^(?i)[+-]?\d+\s*(ns|nanos?|nanoseconds?|us|µs|micros?|microseconds?|ms|millis?|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?)$",
        )
        .is_match(s.trim())
}

/// Decodes standard base64 (what `format: byte` holds).
pub(crate) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

fn is_hostname(s: &str) -> bool {
    static RX: OnceLock<Regex> = OnceLock::new();
    s.len() <= 255
        && re(&RX, r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$")
            .is_match(s)
}

/// Whether `s` is valid for `format` (names compared with `-` removed).
pub(crate) fn validates(format: &str, s: &str) -> bool {
    static UUID: OnceLock<Regex> = OnceLock::new();
    static UUID3: OnceLock<Regex> = OnceLock::new();
    static UUID4: OnceLock<Regex> = OnceLock::new();
    static UUID5: OnceLock<Regex> = OnceLock::new();
    static MAC: OnceLock<Regex> = OnceLock::new();
    static HEX: OnceLock<Regex> = OnceLock::new();
    static RGB: OnceLock<Regex> = OnceLock::new();
    static SSN: OnceLock<Regex> = OnceLock::new();
    static BSON: OnceLock<Regex> = OnceLock::new();
    static EMAIL: OnceLock<Regex> = OnceLock::new();
    match format.replace('-', "").as_str() {
        "datetime" => is_date_time(s),
        "date" => NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "duration" => is_duration(s),
        "byte" => decode_base64(s).is_some(),
        "uuid" => re(&UUID, r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$").is_match(s),
        "uuid3" => re(&UUID3, r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$").is_match(s),
        "uuid4" => {
            re(&UUID4, r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$").is_match(s)
        }
        "uuid5" => {
            re(&UUID5, r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$").is_match(s)
        }
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok() || s.parse::<Ipv4Addr>().is_ok(),
        "cidr" => s
            .split_once('/')
            .is_some_and(|(ip, bits)| match (ip.parse::<IpAddr>(), bits.parse::<u8>()) {
                (Ok(IpAddr::V4(_)), Ok(b)) => b <= 32 && !bits.starts_with('+'),
                (Ok(IpAddr::V6(_)), Ok(b)) => b <= 128 && !bits.starts_with('+'),
                _ => false,
            }),
        "mac" => re(
            &MAC,
            r"^(?i)(([0-9a-f]{2}:){5,19}[0-9a-f]{2}|([0-9a-f]{2}-){5,19}[0-9a-f]{2}|([0-9a-f]{4}\.){2,9}[0-9a-f]{4})$",
        )
        .is_match(s),
        "hostname" => is_hostname(s),
        "email" => re(&EMAIL, r"^[^@\s<>]+@[^@\s<>]+$").is_match(s),
        "uri" => s.contains(':') || s.starts_with('/'),
        "hexcolor" => re(&HEX, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").is_match(s),
        "rgbcolor" => re(&RGB, r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$").is_match(s),
        "ssn" => re(&SSN, r"^\d{3}[- ]?\d{2}[- ]?\d{4}$").is_match(s),
        "bsonobjectid" => re(&BSON, r"^[0-9a-fA-F]{24}$").is_match(s),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert!(validates("date-time", "2024-05-01T10:00:00Z"));
        assert!(validates("date-time", "2024-05-01T10:00:00.123+02:00"));
        assert!(!validates("date-time", "yesterday"));
        assert!(validates("date", "2024-05-01"));
        assert!(!validates("date", "2024-13-01"));
        assert!(validates("duration", "1h30m"));
        assert!(validates("duration", "3 days"));
        assert!(!validates("duration", "soon"));
        assert!(validates("byte", "aGVsbG8="));
        assert!(!validates("byte", "not base64!"));
        assert!(validates("ipv4", "10.0.0.1"));
        assert!(!validates("ipv4", "10.0.0.300"));
        assert!(validates("cidr", "10.0.0.0/8"));
        assert!(!validates("cidr", "10.0.0.0/33"));
        assert!(validates("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(validates("mac", "00:1a:2b:3c:4d:5e"));
        assert!(validates("hostname", "node-1.example.com"));
        assert!(!validates("hostname", "-bad"));
        assert_eq!(
            parse_go_duration("1m30s"),
            Some(chrono::Duration::seconds(90))
        );
        assert_eq!(
            parse_go_duration("-1.5s"),
            Some(chrono::Duration::milliseconds(-1500))
        );
    }
}
