//! The server's resource use during one measured case, from `/proc/<pid>` (Linux only;
//! elsewhere every reading is absent), and the load generator's own CPU time beside it.
//!
//! - CPU time: `utime + stime` of `/proc/<pid>/stat` (fields 14 and 15, in clock ticks of
//!   `USER_HZ`, which is 100 on every Linux architecture we run on), before and after.
//! - Client CPU time: the same of `/proc/self/stat`, so that a run shows how much of the
//!   machine the HTTP clients took from the server (client and server share its cores).
//!   For an in-process case (`--pid` is this process) the split is by thread: the threads
//!   whose name starts with [`SERVER_THREADS`] are the server, the rest the client.
//! - Peak RSS: `VmHWM` of `/proc/<pid>/status`. The kernel keeps it for the process's
//!   whole life, so [`Probe::start`] first tries to reset it by writing `5` to
//!   `/proc/<pid>/clear_refs` (allowed for our own processes or as root). If that fails,
//!   the peak covers everything since the server started, and [`Usage::peak_reset`] says so.

use std::time::Instant;

/// Clock ticks per second of `/proc/<pid>/stat` times.
const USER_HZ: f64 = 100.0;

/// The name prefix of the threads that serve requests in this process (`baseline`'s bare
/// axum server): their CPU time is the server's, the other threads' the client's.
pub const SERVER_THREADS: &str = "bench-server";

/// A measurement in progress.
#[derive(Debug)]
pub struct Probe {
    pid: u32,
    ticks: u64,
    /// This process's ticks (all threads, and those of [`SERVER_THREADS`]).
    own: Option<(u64, u64)>,
    reset: bool,
    started: Instant,
}

/// What one case cost the server.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Peak resident set size in MB (10^6 bytes).
    pub peak_rss_mb: f64,
    /// CPU seconds (user + system) spent during the case.
    pub cpu_secs: f64,
    /// CPU seconds per wall second (1.0 = one core busy).
    pub cores: f64,
    /// Whether the peak was reset at the start of the case.
    pub peak_reset: bool,
    /// CPU seconds the load generator (this process's client threads) spent.
    pub client_cpu_secs: Option<f64>,
}

impl Probe {
    /// Starts measuring `pid`; `None` if its `/proc` entry cannot be read.
    pub fn start(pid: u32) -> Option<Probe> {
        let reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
        let own = own_ticks();
        Some(Probe { pid, ticks: cpu_ticks(pid)?, own, reset, started: Instant::now() })
    }

    pub fn finish(self) -> Option<Usage> {
        let mut ticks = cpu_ticks(self.pid)?.saturating_sub(self.ticks);
        let (mut client, served) = match (self.own, own_ticks()) {
            (Some((all0, served0)), Some((all1, served1))) => {
                (Some(all1.saturating_sub(all0)), served1.saturating_sub(served0))
            }
            _ => (None, 0),
        };
        if self.pid == std::process::id() {
            // In-process: the server is the named threads, if any; else nothing is split.
            if served > 0 {
                client = Some(ticks.saturating_sub(served));
                ticks = served;
            } else {
                client = None;
            }
        }
        let cpu_secs = ticks as f64 / USER_HZ;
        let wall = self.started.elapsed().as_secs_f64();
        Some(Usage {
            peak_rss_mb: peak_rss_kb(self.pid)? as f64 * 1024.0 / 1e6,
            cpu_secs,
            cores: if wall > 0.0 { cpu_secs / wall } else { 0.0 },
            peak_reset: self.reset,
            client_cpu_secs: client.map(|ticks| ticks as f64 / USER_HZ),
        })
    }
}

/// This process's CPU ticks: all of them, and those of its [`SERVER_THREADS`].
fn own_ticks() -> Option<(u64, u64)> {
    let all = parse_stat_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    let mut served = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        if thread_name(&stat).is_some_and(|name| name.starts_with(SERVER_THREADS)) {
            served += parse_stat_ticks(&stat).unwrap_or(0);
        }
    }
    Some((all, served))
}

/// The command name of a `stat` line: between the first `(` and the last `)`.
fn thread_name(stat: &str) -> Option<&str> {
    let start = stat.find('(')? + 1;
    let end = stat.rfind(')')?;
    stat.get(start..end)
}

/// CPU seconds (user + system) `pid` has used so far.
pub fn cpu_secs(pid: u32) -> Option<f64> {
    cpu_ticks(pid).map(|ticks| ticks as f64 / USER_HZ)
}

/// `utime + stime` of `pid` in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat)
}

/// The command name (field 2) is in parentheses and may contain spaces, so fields are
/// counted after its closing `)`: field 3 is the first there, utime (14) the 12th.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `VmHWM` of `pid` in kB.
fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_hwm_kb(&status)
}

/// The resident set size (`VmRSS`) of `pid` now, in MB (10^6 bytes).
pub fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(parse_status_kb(&status, "VmRSS:")? as f64 * 1024.0 / 1e6)
}

fn parse_hwm_kb(status: &str) -> Option<u64> {
    parse_status_kb(status, "VmHWM:")
}

fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.trim_start_matches(field).trim().trim_end_matches("kB").trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 40 0 0 20 0";
        assert_eq!(parse_stat_ticks(stat), Some(290));
    }

    #[test]
    fn thread_names_may_hold_parentheses() {
        let stat = "1234 (bench-server (2)) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 40 0";
        assert_eq!(thread_name(stat), Some("bench-server (2)"));
    }

    #[test]
    fn hwm_is_read_in_kb() {
        let status = "Name:\tbunko\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(parse_hwm_kb(status), Some(51200));
    }

    #[test]
    fn own_process_can_be_probed() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let probe = Probe::start(std::process::id()).expect("own /proc entry");
        let usage = probe.finish().expect("own usage");
        assert!(usage.peak_rss_mb > 0.0);
        // No server threads here: an in-process probe does not split client from server.
        assert_eq!(usage.client_cpu_secs, None);
    }
}
