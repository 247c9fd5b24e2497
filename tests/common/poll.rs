//! The one way the tests wait: poll a check until a deadline, return the value that
//! satisfied it, or fail saying what was awaited and the last value seen. Included by the
//! test binaries that wait (`#[path = "…/common/poll.rs"] mod poll;`).

// Each binary uses part of this module.
#![allow(dead_code)]

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

/// How often a check runs: short against the seconds-long deadlines, long enough not to
/// load the API server under test.
const INTERVAL: Duration = Duration::from_millis(20);

/// What one run of a check found: the awaited value, or what was seen instead.
pub trait Look {
    type Value;
    fn into_result(self) -> Result<Self::Value, String>;
}

/// `Some(value)`: done.
impl<T> Look for Option<T> {
    type Value = T;
    fn into_result(self) -> Result<T, String> {
        self.ok_or_else(|| "nothing yet (the check returned None)".into())
    }
}

/// `true`: done.
impl Look for bool {
    type Value = ();
    fn into_result(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("false".into()) }
    }
}

/// `Ok(value)`: done; `Err(seen)`: not yet, and `seen` is what a timeout reports.
impl<T, E: Debug> Look for Result<T, E> {
    type Value = T;
    fn into_result(self) -> Result<T, String> {
        self.map_err(|seen| format!("{seen:#?}"))
    }
}

fn timed_out(what: &str, timeout: Duration, last: &str) -> ! {
    panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
}

/// Runs `check` until it finds what it looks for, and returns that; panics after
/// `timeout` with `what` and the last thing the check saw.
pub async fn eventually<L, F, Fut>(what: &str, timeout: Duration, mut check: F) -> L::Value
where
    L: Look,
    F: FnMut() -> Fut,
    Fut: Future<Output = L>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match check().await.into_result() {
            Ok(value) => return value,
            Err(last) if tokio::time::Instant::now() >= deadline => timed_out(what, timeout, &last),
            Err(_) => tokio::time::sleep(INTERVAL).await,
        }
    }
}

/// Reads with `read` until `done` holds of what it read, and returns that value (not a
/// second read, which could already differ).
pub async fn wait_for<T, F, Fut>(
    what: &str,
    timeout: Duration,
    mut read: F,
    done: impl Fn(&T) -> bool,
) -> T
where
    T: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let done = &done;
    eventually(what, timeout, || {
        let reading = read();
        async move {
            let value = reading.await;
            if done(&value) { Ok(value) } else { Err(value) }
        }
    })
    .await
}

/// [`eventually`] for a test without an async runtime.
pub fn eventually_blocking<L: Look>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> L,
) -> L::Value {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match check().into_result() {
            Ok(value) => return value,
            Err(last) if std::time::Instant::now() >= deadline => timed_out(what, timeout, &last),
            Err(_) => std::thread::sleep(INTERVAL),
        }
    }
}
