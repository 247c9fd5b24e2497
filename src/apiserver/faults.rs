//! Fault injection and the request log, for reliability tests: fail or delay the next
//! requests that match, close every watch, compact history; and record every request
//! with its RBAC verb so tests can compare what controllers do with what RBAC grants.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::server::Shared;

/// Which requests a fault applies to; unset fields match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatcher {
    /// RBAC verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: Option<String>,
    pub group: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// The client's User-Agent, whole: a client's own requests, not another's of the same
    /// kind (a test's writes beside the controller's it holds back).
    pub user_agent: Option<String>,
}

impl RequestMatcher {
    /// Matches every request.
    pub fn any() -> Self {
        Self::default()
    }
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }
    pub fn group(mut self, group: &str) -> Self {
        self.group = Some(group.into());
        self
    }
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
    pub fn user_agent(mut self, user_agent: &str) -> Self {
        self.user_agent = Some(user_agent.into());
        self
    }

    pub(crate) fn matches(&self, r: &RequestRecord) -> bool {
        let eq = |want: &Option<String>, got: &str| want.as_deref().is_none_or(|w| w == got);
        eq(&self.verb, &r.verb)
            && eq(&self.group, &r.group)
            && eq(&self.resource, &r.resource)
            && eq(&self.subresource, &r.subresource)
            && eq(&self.namespace, r.namespace.as_deref().unwrap_or(""))
            && eq(&self.user_agent, &r.user_agent)
    }
}

/// What to do to a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP code and the `Status` the real server would send with it
    /// (409 Conflict, 429 TooManyRequests, 500 InternalError, 504 Timeout, ...);
    /// `retry_after` adds a `Retry-After` header (seconds).
    Fail { code: u16, retry_after: Option<u64> },
    /// Hold the request this long, then serve it normally.
    Delay(Duration),
    /// Serve the request normally and at once (a write is stored and its watch event
    /// goes out), but hold the response this long: nothing orders a watch stream against
    /// the answer to a write, and this makes the event win.
    DelayResponse(Duration),
    /// Serve it normally. A rule with `Pass` placed before a `Fail` rule lets the first
    /// N matching requests through, so the failure hits exactly the (N+1)-th.
    Pass,
}

#[derive(Debug, Clone)]
struct Rule {
    matcher: RequestMatcher,
    remaining: usize,
    action: FaultAction,
}

#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: Mutex<Vec<Rule>>,
}

impl Faults {
    /// The action for a request, consuming one use of the first matching rule.
    pub(crate) fn take(&self, r: &RequestRecord) -> Option<FaultAction> {
        let mut rules = self.rules.lock();
        let i = rules.iter().position(|rule| rule.matcher.matches(r))?;
        let action = rules[i].action.clone();
        rules[i].remaining -= 1;
        if rules[i].remaining == 0 {
            rules.remove(i);
        }
        Some(action)
    }
}

/// A handle to inject faults into a running server (cheap to clone).
#[derive(Clone)]
pub struct FaultInjector {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultInjector").finish_non_exhaustive()
    }
}

impl FaultInjector {
    /// Applies `action` to the next `times` requests matching `matcher`.
    pub fn inject(&self, matcher: RequestMatcher, times: usize, action: FaultAction) {
        if times == 0 {
            return;
        }
        self.shared.faults.rules.lock().push(Rule {
            matcher,
            remaining: times,
            action,
        });
    }

    /// Fails the next `times` matching requests with `code`.
    pub fn fail(&self, matcher: RequestMatcher, times: usize, code: u16) {
        self.inject(
            matcher,
            times,
            FaultAction::Fail {
                code,
                retry_after: None,
            },
        );
    }

    /// Lets the next `passed` matching requests through, then fails the `times` after
    /// them with `code`: "crash right after the N-th write".
    pub fn fail_after(&self, matcher: RequestMatcher, passed: usize, times: usize, code: u16) {
        self.inject(matcher.clone(), passed, FaultAction::Pass);
        self.fail(matcher, times, code);
    }

    /// Fails the next `times` matching requests with 429 and `Retry-After`.
    pub fn throttle(&self, matcher: RequestMatcher, times: usize, retry_after_secs: u64) {
        self.inject(
            matcher,
            times,
            FaultAction::Fail {
                code: 429,
                retry_after: Some(retry_after_secs),
            },
        );
    }

    /// Delays the next `times` matching requests.
    pub fn delay(&self, matcher: RequestMatcher, times: usize, by: Duration) {
        self.inject(matcher, times, FaultAction::Delay(by));
    }

    /// Serves the next `times` matching requests at once but holds their responses
    /// back by `by`.
    pub fn delay_response(&self, matcher: RequestMatcher, times: usize, by: Duration) {
        self.inject(matcher, times, FaultAction::DelayResponse(by));
    }

    /// Removes every pending fault.
    pub fn clear(&self) {
        self.shared.faults.rules.lock().clear();
    }

    /// Ends every open watch now (as a dropped connection or an API server restart would).
    pub fn close_watches(&self) {
        self.shared.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Forgets all watch history: a watch (or list continuation) from any
    /// resourceVersion handed out so far gets 410 Gone. Open watches are closed too, so
    /// clients must resume, and hit the 410.
    pub fn compact_history(&self) {
        self.shared.state.lock().compact();
        self.close_watches();
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The RBAC verb (get, list, watch, create, update, patch, delete, deletecollection)
    /// for resource requests; the lowercase HTTP method for other paths.
    pub verb: String,
    pub group: String,
    pub version: String,
    /// Empty for non-resource paths (discovery, openapi, version).
    pub resource: String,
    pub subresource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub path: String,
    pub user_agent: String,
    /// The HTTP status answered (for a watch: the status the stream started with).
    pub status: u16,
}

impl RequestRecord {
    /// Is this a request on an API resource (as opposed to discovery and the like)?
    pub fn is_resource_request(&self) -> bool {
        !self.resource.is_empty()
    }
}

/// The log of requests served so far (cheap to clone).
#[derive(Clone)]
pub struct RequestLog {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestLog").finish_non_exhaustive()
    }
}

impl RequestLog {
    /// Every request recorded since the start (or the last `clear`).
    pub fn entries(&self) -> Vec<RequestRecord> {
        self.shared.log.lock().iter().cloned().collect()
    }

    /// Forgets what was recorded.
    pub fn clear(&self) {
        self.shared.log.lock().clear();
    }
}
