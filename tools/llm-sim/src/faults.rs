//! Fault injection: the runtime-switchable [`FaultHandle`] and the per-request [`FaultPlan`].

use std::sync::{Arc, RwLock};

use crate::config::FaultConfig;
use crate::util::{hash3, unit};

/// Shared, runtime-changeable fault switches of one server. Cloning is cheap; all clones see
/// the same settings.
#[derive(Clone, Debug, Default)]
pub struct FaultHandle {
    inner: Arc<RwLock<FaultConfig>>,
}

const KIND_STATUS: u64 = 1;
const KIND_RESET: u64 = 2;
const KIND_STALL: u64 = 3;
const KIND_MALFORMED: u64 = 4;
const KIND_USAGE: u64 = 5;
const KIND_ACCEPT: u64 = 6;
const KIND_POSITION: u64 = 7;

/// What goes wrong with one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Answer with this error status instead of serving.
    pub status: Option<u16>,
    /// Reset the connection after this many output tokens were sent.
    pub reset: bool,
    /// Stall (for `stall_ms`) after this many output tokens were sent.
    pub stall: bool,
    /// Send one malformed chunk.
    pub malformed: bool,
    /// Leave `usage` out.
    pub missing_usage: bool,
    /// How long a stall lasts.
    pub stall_ms: u64,
    /// A hash from which the token position of a mid-stream fault is drawn.
    pub position_hash: u64,
}

impl FaultPlan {
    /// The output-token index (in `0..n_tokens`) at which a mid-stream fault fires: after that
    /// many tokens were sent.
    pub fn position(&self, n_tokens: u32) -> u32 {
        if n_tokens <= 1 {
            0
        } else {
            // Somewhere strictly inside the stream when possible.
            1 + (self.position_hash % u64::from(n_tokens - 1)) as u32
        }
    }
}

impl FaultHandle {
    /// A handle holding `cfg`.
    pub fn new(cfg: FaultConfig) -> Self {
        FaultHandle {
            inner: Arc::new(RwLock::new(cfg)),
        }
    }

    /// The current settings.
    pub fn get(&self) -> FaultConfig {
        match self.inner.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Replaces the settings after validating them.
    pub fn set(&self, cfg: FaultConfig) -> Result<(), String> {
        cfg.validate()?;
        match self.inner.write() {
            Ok(mut g) => *g = cfg,
            Err(p) => *p.into_inner() = cfg,
        }
        Ok(())
    }

    /// Changes some settings in place (validated; nothing changes on error).
    pub fn update(&self, f: impl FnOnce(&mut FaultConfig)) -> Result<(), String> {
        let mut cfg = self.get();
        f(&mut cfg);
        self.set(cfg)
    }

    /// Turns every fault off (keeps the seed and durations).
    pub fn clear(&self) {
        let cur = self.get();
        let off = FaultConfig {
            seed: cur.seed,
            stall_ms: cur.stall_ms,
            slow_accept_ms: cur.slow_accept_ms,
            ..FaultConfig::default()
        };
        // A default config is always valid.
        let _ = self.set(off);
    }

    /// The faults of request number `n` (numbered in arrival order from 0).
    pub fn plan(&self, n: u64) -> FaultPlan {
        let cfg = self.get();
        plan_for(&cfg, n)
    }

    /// Delay before serving connection number `n`, if it is a slow accept.
    pub fn accept_delay_ms(&self, n: u64) -> Option<u64> {
        let cfg = self.get();
        if cfg.slow_accept_rate > 0.0
            && unit(hash3(cfg.seed, n, KIND_ACCEPT)) < cfg.slow_accept_rate
        {
            Some(cfg.slow_accept_ms)
        } else {
            None
        }
    }

    /// True when connections should be closed with a TCP RST (reset faults are on).
    pub fn resets_enabled(&self) -> bool {
        self.get().reset_rate > 0.0
    }
}

fn hit(cfg: &FaultConfig, rate: f64, n: u64, kind: u64) -> bool {
    rate > 0.0 && unit(hash3(cfg.seed, n, kind)) < rate
}

/// The faults of request number `n` under `cfg`.
pub fn plan_for(cfg: &FaultConfig, n: u64) -> FaultPlan {
    if cfg.is_off() {
        return FaultPlan::default();
    }
    let u = unit(hash3(cfg.seed, n, KIND_STATUS));
    let status = if u < cfg.error_500_rate {
        Some(500)
    } else if u < cfg.error_500_rate + cfg.error_429_rate {
        Some(429)
    } else if u < cfg.error_500_rate + cfg.error_429_rate + cfg.error_503_rate {
        Some(503)
    } else {
        None
    };
    FaultPlan {
        status,
        reset: hit(cfg, cfg.reset_rate, n, KIND_RESET),
        stall: hit(cfg, cfg.stall_rate, n, KIND_STALL),
        malformed: hit(cfg, cfg.malformed_rate, n, KIND_MALFORMED),
        missing_usage: hit(cfg, cfg.missing_usage_rate, n, KIND_USAGE),
        stall_ms: cfg.stall_ms,
        position_hash: hash3(cfg.seed, n, KIND_POSITION),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_respected_and_deterministic() {
        let cfg = FaultConfig {
            seed: 7,
            error_500_rate: 0.1,
            error_429_rate: 0.2,
            reset_rate: 0.5,
            ..FaultConfig::default()
        };
        let n = 20_000u64;
        let plans: Vec<FaultPlan> = (0..n).map(|i| plan_for(&cfg, i)).collect();
        let c500 = plans.iter().filter(|p| p.status == Some(500)).count() as f64 / n as f64;
        let c429 = plans.iter().filter(|p| p.status == Some(429)).count() as f64 / n as f64;
        let reset = plans.iter().filter(|p| p.reset).count() as f64 / n as f64;
        assert!((c500 - 0.1).abs() < 0.01, "{c500}");
        assert!((c429 - 0.2).abs() < 0.01, "{c429}");
        assert!((reset - 0.5).abs() < 0.02, "{reset}");
        assert!(plans.iter().all(|p| p.status != Some(503) && !p.stall));
        let again: Vec<FaultPlan> = (0..n).map(|i| plan_for(&cfg, i)).collect();
        assert_eq!(plans, again);
        let other = FaultConfig { seed: 8, ..cfg };
        let diff: Vec<FaultPlan> = (0..n).map(|i| plan_for(&other, i)).collect();
        assert_ne!(plans, diff);
    }

    #[test]
    fn validation_rejects_bad_rates() {
        let h = FaultHandle::default();
        assert!(h.update(|c| c.reset_rate = 1.5).is_err());
        assert!(h
            .update(|c| {
                c.error_500_rate = 0.6;
                c.error_503_rate = 0.6;
            })
            .is_err());
        assert_eq!(h.get(), FaultConfig::default());
        assert!(h.update(|c| c.stall_rate = 1.0).is_ok());
        assert_eq!(h.get().stall_rate, 1.0);
    }

    #[test]
    fn position_is_inside_stream() {
        let p = FaultPlan {
            position_hash: 12345,
            ..FaultPlan::default()
        };
        for n in 0..50 {
            let at = p.position(n);
            assert!(at < n.max(1));
            if n > 1 {
                assert!(at >= 1);
            }
        }
    }
}
