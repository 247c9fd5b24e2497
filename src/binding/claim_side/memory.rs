//! [`ClaimSide`]: what the claim controller remembers between steps, as one value the
//! binder holds and the server side reads (the picks in flight and the claims backing
//! off count in whose turn it is: docs/binding.md, "Whose pick is it").

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::assumed::AssumedChoices;
use super::backoff::{RefusedWrites, RefusingServers};
use super::evicting::Evicting;
use super::summaries::SummaryClock;

/// The claim controller's memory. See the module docs.
#[derive(Clone, Debug)]
pub struct ClaimSide {
    /// The servers picked whose writes the watches have not shown yet.
    pub assumed: AssumedChoices,
    /// The claims whose last write was refused, backing off.
    pub refused: RefusedWrites,
    /// Servers whose last write was refused, until they change ([`RefusingServers`]).
    pub refusing: RefusingServers,
    /// When each waiting claim's summary was last written.
    pub summaries: SummaryClock,
    /// The evictions whose writes the watches have not shown yet.
    pub evicting: Evicting,
}

impl ClaimSide {
    /// A claim side that remembers nothing yet, started at `now`, writing a waiting
    /// claim's summary at most once per `status_interval`.
    pub fn new(status_interval: Duration, now: Timestamp) -> Self {
        Self {
            assumed: AssumedChoices::new(),
            refused: RefusedWrites::default(),
            refusing: RefusingServers::default(),
            summaries: SummaryClock::new(status_interval, now),
            evicting: Evicting::default(),
        }
    }

    /// The API server's answer to a server's last write, while it refuses them.
    pub fn refusal_of(&self, now: Timestamp) -> impl Fn(&str) -> Option<String> + '_ {
        move |server| self.refusing.message(server, now).map(str::to_string)
    }
}
