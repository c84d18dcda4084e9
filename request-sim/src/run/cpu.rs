//! The client's own CPU time (`run.client_cpu`): `getrusage` of the process at the end of the
//! drain, so a user sees what the replayer costs per request next to the numbers it measured.
//!
//! `getrusage` is a libc call the standard library does not wrap, and the crates that do give
//! the total only; the user/system split tells the kernel's share (reads, wake-ups) apart.

use crate::stats::ClientCpu;

/// The process's user and system CPU seconds so far (`None` where not available).
fn process_cpu() -> Option<(f64, f64)> {
    #[cfg(unix)]
    {
        // SAFETY: an all-zero rusage is a valid value of the plain C struct, and getrusage
        // only writes into the struct it is given, which outlives the call.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: see above; RUSAGE_SELF needs no other argument.
        let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (r == 0).then(|| (secs(ru.ru_utime), secs(ru.ru_stime)))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The machine's steal time so far, seconds over all its vCPUs: the time the hypervisor ran
/// something else while a vCPU of this machine had work (the 8th value of `/proc/stat`'s `cpu`
/// line). `None` off Linux, or when it cannot be read. On a virtual machine it is where timing
/// tails the process cannot cause come from: a thread under SCHED_FIFO, spinning on a quiet
/// 2-vCPU development VM, saw its vCPU stop for 2.4 and 6.0 ms in 30 s.
pub(super) fn machine_steal() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: f64 = line.split_whitespace().nth(8)?.parse().ok()?;
    #[cfg(unix)]
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    #[cfg(not(unix))]
    let hz = 100;
    (hz > 0).then(|| ticks / hz as f64)
}

/// The client's CPU for a run of `records` records; `builtin_simulator`: the in-process
/// simulator's CPU is in it; `steal_at_start`: [`machine_steal`] when the run started.
pub(super) fn client_cpu(
    records: usize,
    builtin_simulator: bool,
    steal_at_start: Option<f64>,
) -> Option<ClientCpu> {
    let (user_s, sys_s) = process_cpu()?;
    let machine_steal_s = match (steal_at_start, machine_steal()) {
        (Some(a), Some(b)) => Some(((b - a).max(0.0) * 1e3).round() / 1e3),
        _ => None,
    };
    Some(ClientCpu {
        user_s,
        sys_s,
        ms_per_request: (records > 0).then(|| (user_s + sys_s) * 1e3 / records as f64),
        includes_simulator: builtin_simulator,
        machine_steal_s,
    })
}
