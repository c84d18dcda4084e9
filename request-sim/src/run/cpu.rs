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

/// The client's CPU for a run of `records` records; `builtin_simulator`: the in-process
/// simulator's CPU is in it.
pub(super) fn client_cpu(records: usize, builtin_simulator: bool) -> Option<ClientCpu> {
    let (user_s, sys_s) = process_cpu()?;
    Some(ClientCpu {
        user_s,
        sys_s,
        ms_per_request: (records > 0).then(|| (user_s + sys_s) * 1e3 / records as f64),
        includes_simulator: builtin_simulator,
    })
}
