//! A DURATION on the command line, as kubectl takes one (`30s`, `5m`, `1h30m`, `1.5h`,
//! `500ms`), parsed by jiff (already built for k8s-openapi's times), which also takes
//! ISO 8601 (`PT1H30M`).

use std::str::FromStr;

use k8s_openapi::jiff::SignedDuration;

/// Parses a DURATION that is not negative; clap's `value_parser` for `--grace` and
/// `--timeout`.
pub fn parse(text: &str) -> Result<SignedDuration, String> {
    let parsed = SignedDuration::from_str(text.trim()).map_err(|_| {
        format!("{text:?} is not a duration: write it as kubectl does, e.g. 30s, 5m or 1h30m")
    })?;
    if parsed.is_negative() {
        return Err(format!(
            "{text:?} is negative: a duration here is 0s or more"
        ));
    }
    Ok(parsed)
}

/// A duration for people, to the nearest second: `1h 30m`, `45s`, `0s`.
pub fn words(d: SignedDuration) -> String {
    let seconds = (d.as_millis() + 500).div_euclid(1000);
    let whole = SignedDuration::from_secs(i64::try_from(seconds).unwrap_or(i64::MAX));
    format!("{whole:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_as_kubectl_writes_them() {
        let secs = |s: &str| parse(s).map(|d| d.as_millis());
        assert_eq!(secs("30s"), Ok(30_000));
        assert_eq!(secs("5m"), Ok(300_000));
        assert_eq!(secs("1h30m"), Ok(5_400_000));
        assert_eq!(secs("1.5h"), Ok(5_400_000));
        assert_eq!(secs("500ms"), Ok(500));
        assert_eq!(secs("0s"), Ok(0));
        assert!(parse("5x").unwrap_err().contains("e.g. 30s"));
        assert!(parse("ten minutes").is_err());
        assert!(parse("-5m").unwrap_err().contains("negative"));
    }

    #[test]
    fn a_duration_is_printed_to_the_second() {
        assert_eq!(words(SignedDuration::from_secs(5_400)), "1h 30m");
        assert_eq!(words(SignedDuration::from_millis(3_599_400)), "59m 59s");
        assert_eq!(words(SignedDuration::from_millis(3_599_600)), "1h");
        assert_eq!(words(SignedDuration::ZERO), "0s");
    }
}
