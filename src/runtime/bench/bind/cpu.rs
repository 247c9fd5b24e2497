//! CPU time of a process, from `/proc/<pid>/stat`: its user and system time (fields 14
//! and 15, after the command name in parentheses, which may itself hold spaces), in
//! clock ticks of `USER_HZ`, which Linux fixes at 100 for every reader of `/proc`. Linux
//! only; elsewhere nothing is read and the figures stay 0.

/// `USER_HZ`: the unit of `/proc/<pid>/stat`'s times on Linux.
const TICKS_PER_SEC: f64 = 100.0;

/// The CPU seconds the process has used (user + system), if its stat can be read.
pub fn seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat).map(|ticks| ticks as f64 / TICKS_PER_SEC)
}

/// utime + stime, in ticks, from one stat line.
fn parse_stat(stat: &str) -> Option<u64> {
    // The fields after the command name, which ends at the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_user_and_system_ticks_past_a_name_with_spaces() {
        let stat =
            "4242 (server binder) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat(stat), Some(175));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn reads_this_process() {
        if cfg!(target_os = "linux") {
            // Burn CPU until the kernel has counted a tick of it (one is 10 ms).
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_millis(50) {
                std::hint::black_box(start.elapsed());
            }
            assert!(seconds(std::process::id()).expect("/proc/self/stat") > 0.0);
        }
    }
}
