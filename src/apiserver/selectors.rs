//! Label and field selectors, parsed from the query string the way
//! `k8s.io/apimachinery/pkg/labels` and `.../fields` parse them.

use super::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<LabelReq>);

/// Splits on commas outside parentheses (`a in (x,y),b` is two requirements).
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn parse_err(s: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why}: {s:?}"))
}

fn parse_set(s: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| parse_err(whole, "expected a parenthesised set of values"))?;
    inner
        .split(',')
        .map(|v| {
            let v = v.trim();
            if valid_value(v) {
                Ok(v.to_owned())
            } else {
                Err(parse_err(whole, "invalid label value"))
            }
        })
        .collect()
}

fn parse_label_req(raw: &str) -> Result<LabelReq, ApiError> {
    let s = raw.trim();
    if let Some(key) = s.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) {
            Ok(LabelReq::NotExists(key.to_owned()))
        } else {
            Err(parse_err(s, "invalid label key"))
        };
    }
    // Set-based: `key in (...)`, `key notin (...)`.
    if let Some(pos) = s.find('(') {
        let head = s[..pos].trim_end();
        let (key, op) = head
            .rsplit_once(char::is_whitespace)
            .ok_or_else(|| parse_err(s, "expected `in` or `notin`"))?;
        let key = key.trim();
        if !valid_key(key) {
            return Err(parse_err(s, "invalid label key"));
        }
        let values = parse_set(&s[pos..], s)?;
        return match op {
            "in" => Ok(LabelReq::In(key.to_owned(), values)),
            "notin" => Ok(LabelReq::NotIn(key.to_owned(), values)),
            _ => Err(parse_err(s, "expected `in` or `notin`")),
        };
    }
    for (op, len) in [("!=", 2), ("==", 2), ("=", 1), (">", 1), ("<", 1)] {
        if let Some(pos) = s.find(op) {
            let key = s[..pos].trim();
            let value = s[pos + len..].trim();
            if !valid_key(key) {
                return Err(parse_err(s, "invalid label key"));
            }
            if !valid_value(value) {
                return Err(parse_err(s, "invalid label value"));
            }
            let (k, v) = (key.to_owned(), value.to_owned());
            return Ok(match op {
                "!=" => LabelReq::NotEq(k, v),
                "==" | "=" => LabelReq::Eq(k, v),
                _ => {
                    let n: i64 = v.parse().map_err(|_| {
                        parse_err(s, "for 'Gt', 'Lt' operators, the value must be an integer")
                    })?;
                    if op == ">" {
                        LabelReq::Gt(k, n)
                    } else {
                        LabelReq::Lt(k, n)
                    }
                }
            });
        }
    }
    if valid_key(s) {
        Ok(LabelReq::Exists(s.to_owned()))
    } else {
        Err(parse_err(s, "invalid label key"))
    }
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        split_top_level(s)
            .into_iter()
            .map(parse_label_req)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Does a label set (looked up by `get`) satisfy every requirement?
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v),
            LabelReq::NotEq(k, v) => get(k) != Some(v),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

/// One `field=value` / `field!=value` term of a `fieldSelector`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldReq {
    pub field: String,
    pub value: String,
    pub negate: bool,
}

/// A parsed `fieldSelector`. Which fields may be used is up to the resource; the caller
/// checks them with [`FieldSelector::check_fields`].
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(pub Vec<FieldReq>);

/// Splits on unescaped commas, and un-escapes `\,` `\=` `\\` as `fields.ParseSelector` does.
fn split_escaped(s: &str, sep: char) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next()
                && let Some(last) = out.last_mut()
            {
                if n != sep {
                    last.push('\\');
                }
                last.push(n);
            }
        } else if c == sep {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut reqs = Vec::new();
        for term in split_escaped(s, ',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (field, value, negate) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                )));
            };
            reqs.push(FieldReq {
                field: field.trim().to_owned(),
                value: unescape(value.trim()),
                negate,
            });
        }
        Ok(Self(reqs))
    }

    /// Rejects fields the resource does not support, as the real server does (400).
    pub fn check_fields(&self, supported: impl Fn(&str) -> bool) -> Result<(), ApiError> {
        match self.0.iter().find(|r| !supported(&r.field)) {
            Some(r) => Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.field
            ))),
            None => Ok(()),
        }
    }

    /// Does the object satisfy every term? `get` yields a field's value (`""` when unset,
    /// as the server's field sets do).
    pub fn matches(&self, get: impl Fn(&str) -> String) -> bool {
        self.0
            .iter()
            .all(|r| (get(&r.field) == r.value) != r.negate)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn sel(s: &str, labels: &[(&str, &str)]) -> bool {
        let m: HashMap<&str, &str> = labels.iter().copied().collect();
        LabelSelector::parse(s)
            .unwrap()
            .matches(|k| m.get(k).copied())
    }

    #[test]
    fn label_operators() {
        let l = [("app", "web"), ("tier", "front")];
        assert!(sel("app=web", &l));
        assert!(sel("app==web,tier", &l));
        assert!(sel("app!=db", &l));
        assert!(sel("missing!=x", &l));
        assert!(sel("app in (web, db)", &l));
        assert!(!sel("app notin (web,db)", &l));
        assert!(sel("missing notin (web)", &l));
        assert!(sel("!missing", &l));
        assert!(!sel("!app", &l));
        assert!(sel("", &l));
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("a=b c").is_err());
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse("metadata.name=a\\,b,metadata.namespace!=x").unwrap();
        assert_eq!(f.0[0].value, "a,b");
        assert!(f.matches(|k| if k == "metadata.name" {
            "a,b".into()
        } else {
            "y".into()
        }));
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
