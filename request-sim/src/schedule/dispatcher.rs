//! The dispatcher: takes prepared requests in trace order and releases each at
//! `start + timestamp / scale_factor`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::clock::Waiter;
use super::priority::IoBoost;
use super::producer::{NotTaken, Prepared, Producers};
use super::stop::{Stop, StopReason};

/// Timing settings.
#[derive(Debug, Clone)]
pub struct DispatchPlan {
    pub scale_factor: f64,
    /// Spin (instead of sleeping) this long before each send time.
    pub spin: Duration,
    /// Do not send requests scheduled at or after this offset from the start.
    pub time_limit: Option<Duration>,
    /// Tell the run about each burst this long before it is due (so it can open the
    /// connections the burst needs); `None`: never.
    pub burst_lead: Option<Duration>,
    /// Sends due within [`BURST_WINDOW`] from which a raise also keeps the cores awake:
    /// [`IoBoost::AWAKE_BURST`] for open-loop runs, [`CLOSED_AWAKE_BURST`] for closed-loop ones.
    pub awake_burst: usize,
    /// Learn the spin from the dispatcher's own wake-ups (at most `spin`) rather than spin
    /// `spin` before every send: closed-loop runs, whose dispatcher sends only the turns that
    /// wait for nothing (sessions' first turns), as the release clock learns its own.
    /// Open-loop runs spin `spin` (`--spin-us`), which their send-drift numbers were measured
    /// with (docs/performance.md).
    pub learn_spin: bool,
}

/// [`DispatchPlan::awake_burst`] of closed-loop runs: real bursts only (8 or more sends due
/// together), not the single first turns of sessions nor pairs. In `scripts/bench-agents.sh`
/// (1,000 sessions starting 50 a second, 12,000 requests, quiet machine) keeping the cores
/// awake before every session's first turn cost 0.60-0.65 CPU-ms a request against 0.51-0.55
/// without, and bought 0.095-0.128 ms of first-turn drift p99 against 0.139-0.142 (3 and 2
/// runs). Before pairs only (367 raises a run), the spinning threads still took 3.9% of the
/// client's samples (`perf record`), and three runs each with and without them were within
/// the machine's noise (first-turn drift p99 0.21-0.33 ms against 0.15-0.37, 0.57-0.71
/// CPU-ms a request against 0.56-0.65). Open-loop runs keep it for every send (see
/// [`IoBoost::AWAKE_BURST`]).
pub const CLOSED_AWAKE_BURST: usize = 8;

/// Requests due within this long of a burst's first one belong to the burst (for
/// [`DispatchPlan::burst_lead`]).
pub const BURST_WINDOW: Duration = Duration::from_millis(10);
/// At most this many requests are taken ahead to count a burst.
const MAX_BURST_AHEAD: usize = 256;
/// How long before its trace time a closed-loop turn that waits for its release is handed
/// over: enough for its task to start (at normal priority) and hand its instant to the release
/// clock before the trace time, the earliest its release can be.
pub const HANDOVER_AHEAD: Duration = Duration::from_millis(20);
/// Turns due within this long after the one the dispatcher woke up for are handed over in the
/// same wake-up (so at most `HANDOVER_AHEAD + HANDOVER_BATCH` early): one wake-up per turn was
/// most of what the dispatcher still cost in agent replays.
pub const HANDOVER_BATCH: Duration = Duration::from_millis(50);

/// Whether `p` is a closed-loop turn that waits for other requests (its parent, joins, a
/// user's previous conversation) before it is sent; other requests are sent when handed over.
fn waits_for_release(p: &Prepared) -> bool {
    p.planned
        .turn
        .as_ref()
        .is_some_and(|t| t.waits().next().is_some())
}

impl DispatchPlan {
    /// Offset of a request's send time from the start of the run.
    pub fn offset(&self, timestamp_ms: f64) -> Duration {
        Duration::from_secs_f64((timestamp_ms / 1e3 / self.scale_factor).max(0.0))
    }
}

/// What the dispatcher did.
#[derive(Debug, Clone)]
pub struct DispatchResult {
    pub dispatched: usize,
    pub reason: StopReason,
    /// How precisely the dispatcher itself kept the schedule.
    pub stats: DispatchStats,
    /// When the last request was handed over.
    pub last_send: Option<Instant>,
    /// Trace-ideal prefix-cache hit tokens and prompt tokens of the requests dispatched
    /// (hits `None` when some request's were not tracked).
    pub ideal_hits: Option<u64>,
    pub input_tokens: u64,
    /// Some request dispatched has hash ids (else there is no ideal ratio to speak of).
    pub any_hash_ids: bool,
}

/// The dispatcher's own lateness: the time it handed each request to the runtime minus the
/// scheduled time. Send drift in the records adds the runtime's delay in starting the request
/// task; comparing the two tells which stage made a request late.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct DispatchStats {
    /// Bodies built only after their send time (the send waited for the producer). A body
    /// that is simply not due yet (beyond the lookahead, `--lookahead-secs`) does not count.
    pub not_ready: u64,
    /// Hand-overs later than 1 ms / 5 ms after their scheduled time.
    pub late_over_1ms: u64,
    pub late_over_5ms: u64,
    /// Latest hand-over, ms after its scheduled time.
    pub max_late_ms: f64,
    /// CPU time spent spinning before send times, seconds.
    pub spin_s: f64,
    /// Connections opened (warm-up `GET`s) before bursts the pool was too small for, and the
    /// bursts they were opened for (`backend::warm`).
    pub warm_gets: u64,
    pub warm_bursts: u64,
}

/// Dispatch the producers' requests in order until they end; `send(prepared, scheduled)` hands
/// one to the runtime. With [`DispatchPlan::burst_lead`], `burst(n, due)` is called that long
/// before each burst (`n` requests due within [`BURST_WINDOW`] from `due`, as far as they are
/// built) and returns the connections it opened for it.
///
/// With `boost`, the I/O threads are raised to real-time priority [`IoBoost::LEAD`] before each
/// send time and lowered once the requests handed over have started, unless the next send comes
/// first (see [`super::priority`]).
pub fn dispatch(
    producers: &Producers,
    start: Instant,
    plan: &DispatchPlan,
    stop: &Stop,
    mut boost: Option<IoBoost>,
    mut send: impl FnMut(Prepared, Instant),
    mut burst: impl FnMut(usize, Instant) -> usize,
) -> DispatchResult {
    let mut d = Dispatcher::new(producers, start, plan, stop);
    for i in 0.. {
        // Take the body first (it is normally ready long before its time; one due after a
        // long gap is built only within the lookahead of it, and a stop or the time limit
        // ends the wait for it).
        let (prepared, waited) = match d.take(i) {
            Ok(taken) => taken,
            Err(NotTaken::Ended) => return d.end(producers.ending_at(i)),
            Err(NotTaken::Stopped) => return d.stopped(),
            Err(NotTaken::Deadline) => return d.end(StopReason::TimeLimit),
        };
        let offset = plan.offset(prepared.planned.req.timestamp_ms);
        if waited && Instant::now() > start + offset {
            d.r.stats.not_ready += 1;
        }
        if let Some(limit) = plan.time_limit {
            if offset >= limit {
                // Wait out the time limit so in-flight requests get the full window.
                let _ = d.waiter.wait_until(start + limit, stop.flag());
                return d.end(StopReason::TimeLimit);
            }
        }
        let scheduled = start + offset;
        if let Some(lead) = plan.burst_lead {
            if d.burst_end.is_none_or(|e| scheduled > e)
                && !d.announce_burst(i, offset, lead, &mut burst)
            {
                return d.stopped();
            }
        }
        let waits = waits_for_release(&prepared);
        if waits {
            // A closed-loop turn that waits for its release: its task takes the release from
            // `scheduled` and its parents, and the release clock sends it (`super::release`),
            // so it is handed over a little early, without a raise or a spin. Spinning and
            // raising for every turn's trace time cost agent replays about a third of their
            // CPU (`perf`, scripts/bench-agents.sh).
            let at = scheduled.checked_sub(HANDOVER_AHEAD).unwrap_or(scheduled);
            if d.handover_until.is_none_or(|u| at > u) {
                if !d.waiter.sleep_until(at, stop.flag()) {
                    return d.stopped();
                }
                d.handover_until = Some(at + HANDOVER_BATCH);
            }
        } else {
            if let Some(b) = boost.as_mut() {
                if !b.is_raised() && !d.raise(b, &prepared, offset) {
                    return d.stopped();
                }
            }
            if !d.waiter.wait_until(scheduled, stop.flag()) {
                return d.stopped();
            }
        }
        let now = Instant::now();
        d.count_send(&prepared, scheduled, now);
        send(prepared, scheduled);
        d.r.dispatched = i + 1;
        d.last_send = Some(now);
        if let Some(b) = boost.as_mut() {
            d.settle(b, i);
        }
    }
    unreachable!("the loop ends by returning")
}

/// The state of one [`dispatch`] run.
struct Dispatcher<'a> {
    producers: &'a Producers,
    start: Instant,
    plan: &'a DispatchPlan,
    stop: &'a Stop,
    waiter: Waiter,
    r: DispatchResult,
    last_send: Option<Instant>,
    /// Requests taken early, in order (to know when the one after a send is due, and how many
    /// a burst holds).
    ahead: VecDeque<Prepared>,
    /// The end of the burst announced last.
    burst_end: Option<Instant>,
    /// Waiting turns due to be handed over before this are handed over without sleeping.
    handover_until: Option<Instant>,
}

impl<'a> Dispatcher<'a> {
    fn new(
        producers: &'a Producers,
        start: Instant,
        plan: &'a DispatchPlan,
        stop: &'a Stop,
    ) -> Self {
        Dispatcher {
            producers,
            start,
            plan,
            stop,
            waiter: if plan.learn_spin {
                Waiter::learning(plan.spin)
            } else {
                Waiter::new(plan.spin)
            },
            r: DispatchResult {
                dispatched: 0,
                reason: StopReason::Completed,
                stats: DispatchStats::default(),
                last_send: None,
                ideal_hits: Some(0),
                input_tokens: 0,
                any_hash_ids: false,
            },
            last_send: None,
            ahead: VecDeque::new(),
            burst_end: None,
            handover_until: None,
        }
    }

    /// Request `i` (taken ahead, ready, or waited for) and whether it had to be waited for.
    /// The wait ends when it is built, the producers end, a stop is asked for, or the time
    /// limit is reached ([`NotTaken::Deadline`]: no request due after it is sent, whatever
    /// the one waited for turns out to be).
    fn take(&mut self, i: usize) -> Result<(Prepared, bool), NotTaken> {
        if let Some(p) = self
            .ahead
            .pop_front()
            .or_else(|| self.producers.try_take(i))
        {
            return Ok((p, false));
        }
        let limit = self.plan.time_limit.map(|l| self.start + l);
        let p = self.producers.take_until(i, self.stop.flag(), limit)?;
        Ok((p, true))
    }

    /// The result, ending for `reason`.
    fn end(mut self, reason: StopReason) -> DispatchResult {
        self.r.stats.spin_s = self.waiter.spun().as_secs_f64();
        self.r.reason = reason;
        self.r.last_send = self.last_send;
        self.r
    }

    /// The result, ended by the stop signal.
    fn stopped(self) -> DispatchResult {
        let reason = self.stop.reason().unwrap_or(StopReason::Interrupted);
        self.end(reason)
    }

    /// A new burst starting with request `i` (due at `offset`): wait for its lead time, count
    /// it (taking ahead what is built of it), and announce it. Counted only then: right after
    /// the previous burst the producers may not have built this one yet (with one producer,
    /// the burst after the first was counted as one request and got no connections). False
    /// when stopped while waiting.
    fn announce_burst(
        &mut self,
        i: usize,
        offset: Duration,
        lead: Duration,
        burst: &mut impl FnMut(usize, Instant) -> usize,
    ) -> bool {
        let scheduled = self.start + offset;
        let window = offset + BURST_WINDOW;
        self.burst_end = Some(self.start + window);
        let lead_at = scheduled.checked_sub(lead).unwrap_or(self.start);
        if !self.waiter.sleep_until(lead_at, self.stop.flag()) {
            return false;
        }
        let n = self.count_burst(i, window);
        let opened = burst(n, scheduled);
        if opened > 0 {
            self.r.stats.warm_gets += opened as u64;
            self.r.stats.warm_bursts += 1;
        }
        true
    }

    /// Requests of the burst starting with request `i` (those due within `window` of the
    /// start), taking ahead what is built of it.
    fn count_burst(&mut self, i: usize, window: Duration) -> usize {
        let plan = self.plan;
        let mut n = 1 + self
            .ahead
            .iter()
            .filter(|p| plan.offset(p.planned.req.timestamp_ms) <= window)
            .count();
        while n == 1 + self.ahead.len() && self.ahead.len() < MAX_BURST_AHEAD {
            let Some(p) = self.producers.try_take(i + 1 + self.ahead.len()) else {
                break;
            };
            let within = plan.offset(p.planned.req.timestamp_ms) <= window;
            self.ahead.push_back(p);
            if !within {
                break;
            }
            n += 1;
        }
        n
    }

    /// Raise the I/O threads [`IoBoost::LEAD`] before `prepared`'s send time (`offset`),
    /// keeping the cores awake when sends are due ([`IoBoost::AWAKE_BURST`]); false
    /// when stopped while waiting for that.
    fn raise(&mut self, b: &mut IoBoost, prepared: &Prepared, offset: Duration) -> bool {
        let scheduled = self.start + offset;
        let lead = scheduled.checked_sub(IoBoost::LEAD).unwrap_or(scheduled);
        if !self.waiter.sleep_until(lead, self.stop.flag()) {
            return false;
        }
        let awake = self.sends_due(prepared, offset) >= self.plan.awake_burst;
        b.raise_with(awake);
        true
    }

    /// Requests sent at once when handed over (not closed-loop turns, which wait for their
    /// release) due within [`BURST_WINDOW`] from `offset`, starting with `first`, as far as
    /// they are built (taken ahead).
    fn sends_due(&mut self, first: &Prepared, offset: Duration) -> usize {
        let sends_at_once = |p: &Prepared| !waits_for_release(p);
        let window = offset + BURST_WINDOW;
        let mut n = usize::from(sends_at_once(first));
        let mut k = 0;
        loop {
            if k == self.ahead.len() {
                if k >= MAX_BURST_AHEAD {
                    break;
                }
                let Some(p) = self.producers.try_take(self.r.dispatched + 1 + k) else {
                    break;
                };
                self.ahead.push_back(p);
            }
            let p = &self.ahead[k];
            if self.plan.offset(p.planned.req.timestamp_ms) > window {
                break;
            }
            n += usize::from(sends_at_once(p));
            if n >= self.plan.awake_burst {
                break;
            }
            k += 1;
        }
        n
    }

    /// Account a request handed over at `now` for its `scheduled` time.
    fn count_send(&mut self, prepared: &Prepared, scheduled: Instant, now: Instant) {
        let r = &mut self.r;
        let late = now.saturating_duration_since(scheduled);
        if late > Duration::from_millis(1) {
            r.stats.late_over_1ms += 1;
            if late > Duration::from_millis(5) {
                r.stats.late_over_5ms += 1;
            }
        }
        r.stats.max_late_ms = r.stats.max_late_ms.max(late.as_secs_f64() * 1e3);
        let req = &prepared.planned.req;
        r.input_tokens += u64::from(req.input_length);
        r.any_hash_ids |= !req.hash_ids.is_empty();
        r.ideal_hits = r
            .ideal_hits
            .zip(prepared.planned.ideal_hit)
            .map(|(a, b)| a + u64::from(b));
    }

    /// After request `i` was handed over: lower the I/O threads once the requests handed over
    /// have started (and been written), if that happens before the next send needs them
    /// raised again. The next request not built yet (its time unknown): lower them once these
    /// have started, as after the last request; the next send raises them again.
    fn settle(&mut self, b: &mut IoBoost, i: usize) {
        if self.ahead.is_empty() {
            self.ahead.extend(self.producers.try_take(i + 1));
        }
        let until = match self.ahead.front() {
            Some(p) => (self.start + self.plan.offset(p.planned.req.timestamp_ms))
                .checked_sub(IoBoost::LEAD)
                .unwrap_or(self.start),
            None => Instant::now() + IoBoost::SETTLE_MAX,
        };
        b.settle(i + 1, until, self.stop.flag());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::schedule::producer::{BuildFn, Built, ProducerConfig, Scratch};
    use crate::trace::{Planned, TraceRequest};

    fn planned(index: usize, timestamp_ms: f64) -> crate::Result<Planned> {
        Ok(Planned {
            req: TraceRequest {
                model: None,
                reasoning: Default::default(),
                images: None,
                index,
                line: index + 1,
                timestamp_ms,
                input_length: 1,
                output_length: 1,
                hash_ids: Default::default(),
                session: None,
            },
            turn: None,
            chat: None,
            ideal_hit: None,
        })
    }

    #[test]
    fn a_burst_is_counted_at_its_lead_time_not_when_the_one_before_is_sent() {
        // One slow producer (4 ms a body): right after the first burst (2 requests at 0) only
        // the first of the next burst (6 at 150 ms) is built; by its lead time all 6 are.
        let times = [0.0, 0.0, 150.0, 150.0, 150.0, 150.0, 150.0, 150.0, 300.0];
        let feed = Box::new(
            times
                .iter()
                .enumerate()
                .map(|(i, &t)| planned(i, t))
                .collect::<Vec<_>>()
                .into_iter(),
        );
        let build: Arc<BuildFn> = Arc::new(|_p: &Planned, _s: &mut Scratch| {
            std::thread::sleep(Duration::from_millis(4));
            Built {
                body: Bytes::from_static(b"{}"),
                intended_prompt_tokens: 1,
                images: None,
                live: None,
            }
        });
        let cfg = ProducerConfig {
            threads: 1,
            capacity: 40960,
            pin: false,
            cores: vec![],
            budget_bytes: 1 << 20,
            horizon: Duration::from_secs(5),
            scale_factor: 1.0,
            nice: 0,
        };
        let producers = Producers::spawn(feed, &cfg, build).unwrap();
        assert!(crate::schedule::eventually(|| producers.built_first(2)));
        let plan = DispatchPlan {
            scale_factor: 1.0,
            spin: Duration::from_micros(200),
            time_limit: None,
            burst_lead: Some(Duration::from_millis(50)),
            awake_burst: IoBoost::AWAKE_BURST,
            learn_spin: false,
        };
        let stop = Stop::default();
        let start = Instant::now();
        producers.start_clock(start);
        let mut sent = Vec::new();
        let mut bursts = Vec::new();
        let r = dispatch(
            &producers,
            start,
            &plan,
            &stop,
            None,
            |p, at| sent.push((p.index, at)),
            |n, due| {
                bursts.push((n, due.duration_since(start), Instant::now()));
                0
            },
        );
        assert_eq!(r.dispatched, times.len());
        assert_eq!(
            sent.iter().map(|s| s.0).collect::<Vec<_>>(),
            (0..times.len()).collect::<Vec<_>>()
        );
        let counts: Vec<(usize, u128)> = bursts
            .iter()
            .map(|(n, due, _)| (*n, due.as_millis()))
            .collect();
        assert_eq!(counts, vec![(2, 0), (6, 150), (1, 300)]);
        // Each burst after the first was announced no earlier than its lead time.
        for (_, due, at) in &bursts[1..] {
            assert!(*at >= start + *due - Duration::from_millis(50));
        }
    }
}
