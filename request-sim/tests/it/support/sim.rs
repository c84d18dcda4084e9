//! Starting llm-sim for a test: in its own thread on 127.0.0.1, stopped when dropped; a
//! cluster of instances behind llm-sim's router ([`Cluster`]).

use llm_sim::{FaultConfig, SimConfig, SimThread};

/// llm-sim with `cfg`.
pub fn start_sim(cfg: SimConfig) -> SimThread {
    llm_sim::spawn_in_thread(cfg).unwrap_or_else(|e| panic!("start llm-sim: {e}"))
}

/// llm-sim with its defaults.
pub fn default_sim() -> SimThread {
    start_sim(SimConfig::default())
}

/// llm-sim with its defaults and these faults switched on from the start.
pub fn faulty_sim(faults: FaultConfig) -> SimThread {
    start_sim(SimConfig {
        faults,
        ..SimConfig::default()
    })
}

/// `llm-sim --instances N --router POLICY` in-process: the instances and the router on their
/// own thread and runtime, stopped when dropped.
pub struct Cluster {
    pub router: String,
    pub instances: Vec<std::net::SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Cluster {
    pub fn start(n: usize, policy: llm_sim::routing::Policy, cfg: llm_sim::SimConfig) -> Cluster {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let servers = llm_sim::start_cluster(cfg, n).await.unwrap();
                let router = llm_sim::start_router(&servers, llm_sim::RouterConfig::new(policy))
                    .await
                    .unwrap();
                let addrs = servers.iter().map(|s| s.addr).collect::<Vec<_>>();
                ready_tx.send((router.base_url(), addrs)).unwrap();
                let _ = stopped.await;
                router.shutdown().await;
                for s in servers {
                    s.shutdown().await;
                }
            });
        });
        let (router, instances) = ready_rx.recv().unwrap();
        Cluster {
            router,
            instances,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
