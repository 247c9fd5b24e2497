//! This process's name in events and the Lease. `run` and `dev` both name themselves;
//! a file of its own, below both, so that neither takes it from the other.

/// This process's name in events and the Lease: the pod's name in a cluster
/// (`POD_NAME`, from the downward API), else `<hostname>-<pid>`, so that two processes
/// on one machine never share one.
pub fn identity() -> String {
    let hostname = hostname::get().ok().and_then(|h| h.into_string().ok());
    choose_identity(std::env::var("POD_NAME").ok(), hostname, std::process::id())
}

/// [`identity`] from its inputs.
pub fn choose_identity(pod_name: Option<String>, hostname: Option<String>, pid: u32) -> String {
    let present = |s: &String| !s.trim().is_empty();
    match pod_name.filter(present) {
        Some(pod) => pod,
        None => {
            let host = hostname.filter(present);
            format!("{}-{pid}", host.as_deref().unwrap_or("server-binder"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_name_wins_else_host_and_pid() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            choose_identity(some("server-binder-7d9f-x2x9q"), some("node-1"), 42),
            "server-binder-7d9f-x2x9q"
        );
        assert_eq!(choose_identity(None, some("node-1"), 42), "node-1-42");
        assert_eq!(choose_identity(some(""), some("node-1"), 42), "node-1-42");
        assert_eq!(choose_identity(None, some("node-1"), 43), "node-1-43");
        assert_eq!(choose_identity(None, None, 42), "server-binder-42");
        assert_eq!(choose_identity(some(" "), some(""), 7), "server-binder-7");
    }
}
