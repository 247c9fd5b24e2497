//! What the verbs print of what they did to a server, as kubectl prints of a node
//! (`server/s1 cordoned`, `server/s1 already cordoned`).

use super::edit::{Said, drain_taint};
use crate::binding::state::eviction::describe_taint;

/// The line for `said` of server `name`, ending in `suffix` (` (dry run)` or nothing).
pub fn said(name: &str, said: &Said, suffix: &str) -> String {
    let taint = describe_taint(&drain_taint(None));
    let what = match said {
        Said::Cordoned => "cordoned".to_string(),
        Said::AlreadyCordoned => "already cordoned".to_string(),
        Said::Uncordoned => "uncordoned".to_string(),
        Said::AlreadyUncordoned => "already uncordoned".to_string(),
        Said::TaintAdded => format!("tainted {taint}"),
        Said::TaintKept(Some(added)) => format!("already tainted {taint} (added {added})"),
        Said::TaintKept(None) => format!("already tainted {taint} (its time not stamped yet)"),
        Said::TaintRemoved => format!("untainted {taint}"),
        Said::HardDeadlineSet(at) => format!("hard deadline {at}: every claim is off it by then"),
        Said::HardDeadlineKept(at) => {
            format!("keeps its earlier hard deadline {at} (--grace only moves it earlier)")
        }
    };
    format!("server/{name} {what}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_read_as_kubectl_s() {
        assert_eq!(said("s1", &Said::Cordoned, ""), "server/s1 cordoned");
        assert_eq!(
            said("s1", &Said::AlreadyCordoned, " (dry run)"),
            "server/s1 already cordoned (dry run)"
        );
        assert_eq!(
            said("s1", &Said::TaintAdded, ""),
            "server/s1 tainted metal.binder.dev/drain:Evict"
        );
    }
}
