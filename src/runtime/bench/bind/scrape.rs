//! Reading the operator's HTTP endpoints: a bare HTTP/1.0 GET over a TCP stream (the
//! bench needs a status code and a small body, not a client stack), and a parser for
//! the metric families the report needs: `server_binder_api_writes_total`, and the
//! reconcile and watch event counters ([`Counters`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The family the report reads: writes by controller, resource and result.
const API_WRITES: &str = "server_binder_api_writes_total";

/// `GET path` on `addr`: the status code and the body. HTTP/1.0, so the server answers
/// with a plain body (no chunking) and closes the connection.
pub async fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    // A wedged operator must not hang the bench.
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 10 s"))??;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {head:.80}")))?;
    Ok((code, body.to_owned()))
}

/// The counters the report divides per bind besides the writes: reconciles by
/// controller (`server_binder_reconcile_duration_seconds_count`) and objects the watches
/// received by resource (`server_binder_watch_events_total`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    pub reconciles: BTreeMap<String, f64>,
    pub received: BTreeMap<String, f64>,
}

impl Counters {
    pub fn of(exposition: &str) -> Self {
        Self {
            reconciles: by_label(
                exposition,
                "server_binder_reconcile_duration_seconds_count",
                "controller",
            ),
            received: by_label(exposition, "server_binder_watch_events_total", "resource"),
        }
    }

    /// These counters less `before`'s (a run's counts since its baseline).
    pub fn since(&self, before: &Counters) -> Counters {
        let less = |now: &BTreeMap<String, f64>, then: &BTreeMap<String, f64>| {
            now.iter()
                .map(|(k, v)| (k.clone(), v - then.get(k).copied().unwrap_or(0.0)))
                .collect()
        };
        Counters {
            reconciles: less(&self.reconciles, &before.reconciles),
            received: less(&self.received, &before.received),
        }
    }
}

/// The samples of `family` summed by the value of `label` (samples without it are
/// skipped). Label values here hold no quotes, commas or escapes.
fn by_label(exposition: &str, family: &str, label: &str) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(family).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        let value: Option<f64> = value.split_whitespace().next().and_then(|v| v.parse().ok());
        let found = labels.split(',').find_map(|pair| {
            let (key, quoted) = pair.split_once('=')?;
            let v = quoted.strip_prefix('"')?.strip_suffix('"')?;
            (key.trim() == label).then(|| v.to_owned())
        });
        if let (Some(v), Some(value)) = (found, value) {
            *sums.entry(v).or_insert(0.0) += value;
        }
    }
    sums
}

/// One sample of `server_binder_api_writes_total`.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteSample {
    pub controller: String,
    pub resource: String,
    pub result: String,
    pub value: f64,
}

/// Every `server_binder_api_writes_total` sample in a Prometheus text exposition; other
/// families, comments and malformed lines are skipped.
pub fn api_writes(exposition: &str) -> Vec<WriteSample> {
    exposition.lines().filter_map(api_write_line).collect()
}

/// `name{k="v",...} value`, for this family only. Its label values (controller,
/// resource and result names) hold no quotes, commas or escapes.
fn api_write_line(line: &str) -> Option<WriteSample> {
    let rest = line.strip_prefix(API_WRITES)?.strip_prefix('{')?;
    let (labels, value) = rest.split_once('}')?;
    let mut sample = WriteSample {
        controller: String::new(),
        resource: String::new(),
        result: String::new(),
        value: value.split_whitespace().next()?.parse().ok()?,
    };
    for pair in labels.split(',').filter(|p| !p.is_empty()) {
        let (key, quoted) = pair.split_once('=')?;
        let v = quoted.strip_prefix('"')?.strip_suffix('"')?.to_owned();
        match key.trim() {
            "controller" => sample.controller = v,
            "resource" => sample.resource = v,
            "result" => sample.result = v,
            _ => {}
        }
    }
    Some(sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_write_counters_and_nothing_else() {
        let text = "\
# HELP server_binder_api_writes_total Writes the controllers issued
# TYPE server_binder_api_writes_total counter
server_binder_api_writes_total{controller=\"claim\",resource=\"serverclaims\",result=\"ok\"} 20
server_binder_api_writes_total{controller=\"server\",resource=\"servers/status\",result=\"conflict\"} 3
server_binder_api_writes_total_extra{controller=\"claim\"} 9
server_binder_binds_total 10
server_binder_api_writes_total{controller=\"claim\",resource=\"serverclaims\",result=\"error\"} not-a-number
";
        let samples = api_writes(text);
        assert_eq!(
            samples,
            [
                WriteSample {
                    controller: "claim".into(),
                    resource: "serverclaims".into(),
                    result: "ok".into(),
                    value: 20.0,
                },
                WriteSample {
                    controller: "server".into(),
                    resource: "servers/status".into(),
                    result: "conflict".into(),
                    value: 3.0,
                },
            ]
        );
    }

    #[test]
    fn reads_what_the_operator_exports() {
        let metrics = crate::controllers::Metrics::new();
        let samples = api_writes(&metrics.encode());
        // Zeroed at startup, for both controllers and every result.
        assert!(samples.len() >= 6, "{samples:?}");
        for s in &samples {
            assert!(!s.controller.is_empty() && !s.resource.is_empty(), "{s:?}");
            assert_eq!(s.value, 0.0, "{s:?}");
        }
        assert!(
            samples
                .iter()
                .any(|s| s.resource == "servers" && s.result == "conflict")
        );
    }
}
