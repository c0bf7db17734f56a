//! CPU and memory sampling: this process's peak RSS and CPU time, the whole
//! machine's busy time, and waiting for a quiet machine before a run.

use std::time::{Duration, Instant};

/// Peak resident set size of this process (VmHWM, kB); 0 when unreadable.
pub fn vm_hwm_kb() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// User and system CPU time of this process so far, in ms.
pub fn self_cpu_ms() -> (i64, i64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we pass and nothing else.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec * 1000 + t.tv_usec / 1000;
    (ms(ru.ru_utime), ms(ru.ru_stime))
}

/// Busy CPU time of the whole machine so far, in ms (/proc/stat `cpu` line:
/// user + nice + system + irq + softirq + steal).
pub fn machine_busy_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: f64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    busy * 1000.0 / hz
}

/// Waits (up to `max`) for a 1 s window in which the rest of the machine
/// used less than 10 % of one CPU, so other work does not skew a run.
pub async fn wait_quiet(max: Duration) {
    let until = Instant::now() + max;
    loop {
        let b0 = machine_busy_ms();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let busy = machine_busy_ms() - b0;
        if busy < 100.0 {
            return;
        }
        if Instant::now() > until {
            eprintln!("bench: machine still busy ({busy:.0} ms CPU/s); running anyway");
            return;
        }
    }
}
