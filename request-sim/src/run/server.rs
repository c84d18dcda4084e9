//! Phase 2: what talks to the server: the async runtime (real-time I/O threads when
//! permitted), the built-in simulator when there is no `--endpoint`, the endpoint and the
//! HTTP client.

use std::sync::Arc;
use std::time::Instant;

use super::note::{ms_since, note};
use crate::backend::{self, Endpoint};
use crate::config::{ReplayConfig, Target};
use crate::schedule::{Realtime, RealtimeMode};
use crate::stats::StartupTimes;
use crate::{Error, Result};

/// The server side of the run.
pub(super) struct Server {
    pub(super) rt: tokio::runtime::Runtime,
    /// The built-in simulator (stops when dropped).
    pub(super) sim: Option<BuiltinSim>,
    pub(super) ep: Endpoint,
    pub(super) client: backend::HttpClient,
    /// Connections known to be open, to open more before bursts (none in a dry run or with
    /// `--no-warm-connections`; set by the warm-up).
    pub(super) warmth: Option<Arc<backend::warm::Warmth>>,
    pub(super) client_options: backend::ClientOptions,
    pub(super) realtime: Realtime,
    /// The machine's steal time when the runtime started (`run.client_cpu.machine_steal_s`).
    pub(super) steal_at_start: Option<f64>,
}

pub(super) fn run(cfg: &ReplayConfig, startup: &mut StartupTimes) -> Result<Server> {
    let t = Instant::now();
    // The I/O threads write requests when their time comes: real-time scheduling when the
    // mode allows it (see schedule::priority). `on` fails here, before anything is sent.
    let mut realtime = Realtime::new(cfg.schedule.realtime, cfg.schedule.rt_priority)
        .keep_awake(cfg.schedule.keep_awake);
    match (cfg.schedule.realtime, realtime.probe()) {
        (RealtimeMode::On, Err(e)) => return Err(Error::config(format!("--realtime on: {e}"))),
        (RealtimeMode::Auto, Err(e)) => note(format!(
            "normal scheduling ({e}); other work on this machine can delay sends (see --realtime)"
        )),
        _ => {}
    }
    // One descriptor per connection: the soft open-files limit (often 1,024) goes up to the
    // hard one, as servers do, so 10,000 streams fit.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let rt_io = realtime.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.schedule.threads)
        .thread_name("request-io")
        .on_thread_start(move || rt_io.register_io_thread())
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the async runtime", e))?;
    let (sim, ep) = match &cfg.target.server {
        Target::Remote(ep) => (None, ep.clone()),
        Target::BuiltinSimulator if cfg.requests.dry_run => {
            (None, cfg.simulator_endpoint("http://127.0.0.1:9")?)
        }
        Target::BuiltinSimulator => {
            let (sim, ep) = start_simulator(cfg)?;
            (Some(sim), ep)
        }
    };
    // A server on this host (the built-in simulator too) keeps its cores: see
    // `Realtime::leave_cores_to_local_server`.
    if let Some(ip) = ep.on_this_host() {
        if let Some(what) = realtime.leave_cores_to_local_server(&ip.to_string()) {
            note(what);
        }
    }
    let client_options = backend::ClientOptions {
        insecure: cfg.target.insecure,
        tls_roots: ep.url.scheme() == "https",
        pool_idle_timeout: cfg.target.pool_idle_timeout,
        ..Default::default()
    };
    let client = backend::build_client(&client_options)?;
    startup.runtime_ms = ms_since(t);
    Ok(Server {
        rt,
        sim,
        ep,
        client,
        warmth: None,
        client_options,
        realtime,
        steal_at_start: super::cpu::machine_steal(),
    })
}

/// The built-in simulator's handle (none can exist in a build without it).
#[cfg(feature = "builtin-sim")]
pub(super) type BuiltinSim = llm_sim::SimThread;
#[cfg(not(feature = "builtin-sim"))]
pub(super) type BuiltinSim = std::convert::Infallible;

/// llm-sim in-process on 127.0.0.1, with the run's tokenizer when it has one, and its endpoint.
#[cfg(feature = "builtin-sim")]
fn start_simulator(cfg: &ReplayConfig) -> Result<(BuiltinSim, Endpoint)> {
    let sc = llm_sim::SimConfig {
        tokenizer: cfg.prompts.tokenizer.clone(),
        tokenizer_config: cfg.prompts.tokenizer_config.clone(),
        ..Default::default()
    };
    let s = llm_sim::spawn_in_thread(sc)
        .map_err(|e| Error::server(format!("cannot start the built-in simulator: {e:#}")))?;
    note(format!(
        "no --endpoint: started the built-in simulator (llm-sim) at {}",
        s.base_url()
    ));
    let ep = cfg.simulator_endpoint(&s.base_url())?;
    Ok((s, ep))
}

/// A build without the `builtin-sim` feature has no simulator to replay against.
#[cfg(not(feature = "builtin-sim"))]
fn start_simulator(_cfg: &ReplayConfig) -> Result<(BuiltinSim, Endpoint)> {
    Err(Error::config(
        "no --endpoint: this request-sim was built without the built-in simulator (cargo feature \
         `builtin-sim`); give --endpoint URL of a server, or --dry-run",
    ))
}
