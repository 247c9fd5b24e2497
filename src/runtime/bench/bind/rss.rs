//! The operator's memory, from `/proc/<pid>/status`: the resident set now (`VmRSS`), its
//! high-water mark (`VmHWM`), which the kernel keeps, so a peak between two samples is
//! not missed, and the anonymous part of the resident set now (`RssAnon`: the heap and
//! stacks, without the binary's pages, which are file-backed and shared by every process
//! of the binary). Linux only; elsewhere nothing is read and the figures stay 0.

/// The figures in KiB, as the kernel gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub anon_kib: u64,
}

/// The process's memory, if its status can be read (it is alive, and this is Linux).
pub fn read(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(parse_status(&status))
}

/// `VmRSS:    1234 kB`, `VmHWM:    5678 kB` and `RssAnon:    910 kB` from a status
/// file; a missing line is 0.
pub fn parse_status(status: &str) -> Memory {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("VmRSS"),
        hwm_kib: field("VmHWM"),
        anon_kib: field("RssAnon"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_its_high_water_mark_and_its_anonymous_part() {
        let status = "Name:\tserver-binder\nVmPeak:\t  900 kB\nVmHWM:\t   5678 kB\n\
                      VmRSS:\t   1234 kB\nRssAnon:\t    910 kB\nRssFile:\t    324 kB\n";
        assert_eq!(
            parse_status(status),
            Memory {
                rss_kib: 1234,
                hwm_kib: 5678,
                anon_kib: 910,
            }
        );
        assert_eq!(parse_status("Name:\tx\n"), Memory::default());
    }

    #[test]
    fn reads_this_process() {
        if cfg!(target_os = "linux") {
            let me = read(std::process::id()).expect("/proc/self/status");
            assert!(me.rss_kib > 0 && me.hwm_kib >= me.rss_kib, "{me:?}");
            assert!(me.anon_kib > 0 && me.anon_kib <= me.rss_kib, "{me:?}");
        }
    }
}
