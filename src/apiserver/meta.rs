//! Small helpers over objects held as `serde_json::Value`: metadata accessors, ids,
//! timestamps. Every stored object is JSON, so these are shared by every verb.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value};

/// `metadata.<field>` as a string, if it is one.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.name`, or `""`.
pub(crate) fn name_of(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

/// `metadata.namespace`, or `""`.
pub(crate) fn namespace_of(obj: &Value) -> &str {
    meta_str(obj, "namespace").unwrap_or("")
}

/// The `metadata` map, created if missing (a non-object `metadata` is replaced).
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(map) = obj else {
        unreachable!("made an object above")
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

/// `metadata.labels` as string pairs (non-string values are ignored).
pub(crate) fn labels_of(obj: &Value) -> impl Iterator<Item = (&str, &str)> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        })
}

/// `metadata.finalizers` as strings.
pub(crate) fn finalizers_of(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Follows a dotted path (`spec.ref.name`) through objects.
pub(crate) fn path_get<'a>(obj: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted
        .split('.')
        .filter(|s| !s.is_empty())
        .try_fold(obj, |v, seg| v.get(seg))
}

/// Now, truncated to whole seconds as `metav1.Time` is.
pub(crate) fn now_rfc3339() -> String {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

/// How long ago `ts` (RFC 3339) was, the way kubectl and the API server print ages
/// (`k8s.io/apimachinery/pkg/util/duration.HumanDuration`).
pub(crate) fn age(ts: &str) -> String {
    match ts.parse::<Timestamp>() {
        Ok(t) => human_duration(Timestamp::now().duration_since(t)),
        Err(_) => "<invalid>".into(),
    }
}

pub(crate) fn human_duration(d: SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// 64 unpredictable bits: std's randomly keyed hasher over a counter and the clock.
/// Good enough for uids and generated names; no cryptographic claim.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_i128(Timestamp::now().as_nanosecond());
    h.finish()
}

/// A random (version 4) UUID, as the API server gives `metadata.uid`.
pub(crate) fn new_uid() -> String {
    let hi = random_u64();
    let lo = random_u64();
    let bytes: [u8; 16] = (((hi as u128) << 64) | lo as u128).to_be_bytes();
    let mut b = bytes;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The 5-character suffix for `generateName`, from the same alphabet the API server
/// uses (no vowels, no look-alikes).
pub(crate) fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
            r /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(SignedDuration::from_secs(5)), "5s");
        assert_eq!(human_duration(SignedDuration::from_secs(150)), "2m30s");
        assert_eq!(human_duration(SignedDuration::from_secs(3600 * 5)), "5h");
        assert_eq!(human_duration(SignedDuration::from_secs(86400 * 3)), "3d");
    }

    #[test]
    fn uids_look_like_uuids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_ne!(u, new_uid());
        assert_eq!(name_suffix().len(), 5);
    }
}
