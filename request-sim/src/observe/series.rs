//! The time series of the scraped gauges ([`Series`]: running, waiting, KV usage of every
//! instance), shared with the record writer for the per-request join: the server's state
//! nearest to a request's send ([`StateAt`]), of the instance that served it or of the cluster.

use std::sync::Mutex;
use std::time::Instant;

use crate::record::ServedBy;

/// One gauge reading of one instance, for the time series (the summary's means and peaks, and
/// the per-request join).
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub at: Instant,
    /// Tick of the shared schedule (0 = the start-up scrape).
    pub tick: u64,
    pub running: Option<f32>,
    pub waiting: Option<f32>,
    pub kv_usage: Option<f32>,
}

/// The time series of every instance, shared with the record writer for the per-request join.
#[derive(Debug, Default)]
pub struct Series {
    per_instance: Mutex<Vec<Vec<Point>>>,
    /// Host and port of each scraped URL, in instance order (set when start-up chose them;
    /// an instance a router lists later is added).
    addresses: Mutex<Vec<Address>>,
}

/// Host and port of a scraped URL.
type Address = (String, Option<u16>);

fn address(u: &reqwest::Url) -> Address {
    (
        u.host_str().unwrap_or("").to_string(),
        u.port_or_known_default(),
    )
}

/// The server's state nearest to an instant: of one instance, or summed (waiting, running) and
/// averaged (KV usage) over the cluster.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateAt {
    pub waiting: Option<f64>,
    pub running: Option<f64>,
    pub kv_usage: Option<f64>,
    /// Sample time minus the instant, ms (the largest distance over the instances).
    pub dt_ms: f64,
    /// Instances with a sample.
    pub instances: usize,
    /// The one instance the state is of, when a request named it (see [`Series::state_at`]).
    pub instance: Option<usize>,
}

impl Series {
    pub(super) fn push(&self, instance: usize, p: Point) {
        let mut g = self.per_instance.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() <= instance {
            g.resize_with(instance + 1, Vec::new);
        }
        g[instance].push(p);
    }

    /// Every instance's points (for the summary).
    pub fn snapshot(&self) -> Vec<Vec<Point>> {
        self.per_instance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Remember the scraped URLs' addresses (instance order) for [`Series::instance_of`].
    pub fn set_addresses(&self, urls: &[reqwest::Url]) {
        let mut g = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        *g = urls.iter().map(address).collect();
    }

    /// Add the address of an instance scraped from now on (the next instance index).
    pub fn add_address(&self, url: &reqwest::Url) {
        let mut g = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        g.push(address(url));
    }

    /// The scraped instance a response named: the only one on its port, or among several on
    /// that port (or without a port) the only one whose host is the pod.
    pub fn instance_of(&self, s: &ServedBy) -> Option<usize> {
        let addrs = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        let only = |f: &dyn Fn(&Address) -> bool| {
            let mut hits = addrs.iter().enumerate().filter(|(_, a)| f(a));
            match (hits.next(), hits.next()) {
                (Some((i, _)), None) => Some(i),
                _ => None,
            }
        };
        let host_is_pod = |a: &Address| s.pod.as_deref() == Some(a.0.as_str());
        match s.port {
            Some(port) => only(&|a| a.1 == Some(port))
                .or_else(|| only(&|a| a.1 == Some(port) && host_is_pod(a))),
            None => only(&host_is_pod),
        }
    }

    /// The state at `at` of the instance that served a request, when `served_by` names a
    /// scraped one with samples; else the cluster's.
    pub fn state_at(&self, at: Instant, served_by: Option<&ServedBy>) -> Option<StateAt> {
        served_by
            .and_then(|s| self.instance_of(s))
            .and_then(|i| self.instance_at(at, i))
            .or_else(|| self.cluster_at(at))
    }

    /// Instance `i`'s state at its sample nearest to `at`.
    pub fn instance_at(&self, at: Instant, i: usize) -> Option<StateAt> {
        let g = self.per_instance.lock().unwrap_or_else(|e| e.into_inner());
        let p = nearest(g.get(i)?, at)?;
        let f = |v: Option<f32>| v.map(f64::from);
        Some(StateAt {
            waiting: f(p.waiting),
            running: f(p.running),
            kv_usage: f(p.kv_usage),
            dt_ms: signed_ms(at, p.at),
            instances: 1,
            instance: Some(i),
        })
    }

    /// The cluster's state at the samples nearest to `at` (one per instance that has any).
    pub fn cluster_at(&self, at: Instant) -> Option<StateAt> {
        let g = self.per_instance.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Option<StateAt> = None;
        let mut kv_n = 0usize;
        for points in g.iter() {
            let Some(p) = nearest(points, at) else {
                continue;
            };
            let dt = signed_ms(at, p.at);
            let o = out.get_or_insert(StateAt {
                waiting: None,
                running: None,
                kv_usage: None,
                dt_ms: dt,
                instances: 0,
                instance: None,
            });
            o.instances += 1;
            if dt.abs() > o.dt_ms.abs() {
                o.dt_ms = dt;
            }
            add_opt(&mut o.waiting, p.waiting);
            add_opt(&mut o.running, p.running);
            if let Some(k) = p.kv_usage {
                add_opt(&mut o.kv_usage, Some(k));
                kv_n += 1;
            }
        }
        if let Some(o) = out.as_mut() {
            if kv_n > 0 {
                o.kv_usage = o.kv_usage.map(|k| k / kv_n as f64);
            }
        }
        out
    }
}

/// A record's `server`: the state, KV usage to 6 digits and the distance to µs.
impl From<StateAt> for crate::record::ServerAtSend {
    fn from(st: StateAt) -> Self {
        crate::record::ServerAtSend {
            waiting: st.waiting,
            running: st.running,
            kv_usage: st.kv_usage.map(|k| (k * 1e6).round() / 1e6),
            dt_ms: (st.dt_ms * 1e3).round() / 1e3,
            instances: st.instances,
            instance: st.instance,
        }
    }
}

fn add_opt(acc: &mut Option<f64>, v: Option<f32>) {
    if let Some(v) = v {
        *acc = Some(acc.unwrap_or(0.0) + f64::from(v));
    }
}

/// `b - a` in ms.
pub(super) fn signed_ms(a: Instant, b: Instant) -> f64 {
    if b >= a {
        b.duration_since(a).as_secs_f64() * 1e3
    } else {
        -(a.duration_since(b).as_secs_f64() * 1e3)
    }
}

/// The point nearest to `at` in a time-ordered list.
fn nearest(points: &[Point], at: Instant) -> Option<&Point> {
    let i = points.partition_point(|p| p.at < at);
    let after = points.get(i);
    let before = i.checked_sub(1).and_then(|j| points.get(j));
    match (before, after) {
        (Some(b), Some(a)) => {
            if at.duration_since(b.at) <= a.at.duration_since(at) {
                Some(b)
            } else {
                Some(a)
            }
        }
        (b, a) => b.or(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn served(pod: Option<&str>, port: Option<u16>) -> ServedBy {
        ServedBy {
            pod: pod.map(str::to_string),
            port,
        }
    }

    #[test]
    fn a_response_names_its_instance_by_port_then_by_host() {
        let s = Series::default();
        assert_eq!(
            s.instance_of(&served(None, Some(8001))),
            None,
            "no URLs yet"
        );
        let urls: Vec<reqwest::Url> = [
            "http://127.0.0.1:8000/metrics",
            "http://127.0.0.1:8001/metrics",
            "http://10.0.0.7:9000/metrics",
            "http://10.0.0.8:9000/metrics",
        ]
        .iter()
        .map(|u| u.parse().unwrap())
        .collect();
        s.set_addresses(&urls);
        assert_eq!(
            s.instance_of(&served(Some("llm-sim-1"), Some(8001))),
            Some(1)
        );
        // Two instances on port 9000: the pod must be the host.
        assert_eq!(s.instance_of(&served(None, Some(9000))), None);
        assert_eq!(
            s.instance_of(&served(Some("10.0.0.8"), Some(9000))),
            Some(3)
        );
        assert_eq!(s.instance_of(&served(Some("10.0.0.7"), None)), Some(2));
        assert_eq!(s.instance_of(&served(Some("llm-sim-0"), None)), None);
        assert_eq!(s.instance_of(&served(None, Some(7777))), None);
    }

    #[test]
    fn the_state_is_the_named_instances_else_the_clusters() {
        let s = Series::default();
        s.set_addresses(&[
            "http://127.0.0.1:8000/".parse().unwrap(),
            "http://127.0.0.1:8001/".parse().unwrap(),
        ]);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for (i, waiting) in [(0, 3.0), (1, 5.0)] {
            for ms in [0, 100] {
                s.push(
                    i,
                    Point {
                        at: at(ms),
                        tick: ms / 100,
                        running: Some(1.0),
                        waiting: Some(waiting + ms as f32),
                        kv_usage: Some(0.5),
                    },
                );
            }
        }
        let st = s.state_at(at(90), Some(&served(None, Some(8001)))).unwrap();
        assert_eq!((st.instance, st.instances), (Some(1), 1));
        assert_eq!(st.waiting, Some(105.0));
        assert!((st.dt_ms - 10.0).abs() < 1e-6, "{st:?}");
        let cluster = s.state_at(at(10), Some(&served(None, Some(7777)))).unwrap();
        assert_eq!((cluster.instance, cluster.instances), (None, 2));
        assert_eq!(cluster.waiting, Some(8.0));
        assert_eq!(s.state_at(at(10), None), Some(cluster));
    }
}
