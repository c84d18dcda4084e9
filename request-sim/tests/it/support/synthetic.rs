//! Deterministic test data: a small PRNG (so the tests need no extra crate) and synthetic
//! records with known timings for the report tests.

use request_sim::record::{Record, Status, TokenSource};

/// Small deterministic PRNG (the 64-bit LCG of Knuth's MMIX; outputs the state's top 31 bits).
pub struct Lcg(u64);

impl Lcg {
    /// A generator whose first output is the one after `seed`'s (the seed mixed once).
    pub fn new(seed: u64) -> Self {
        Lcg(step(seed))
    }
    /// A generator starting from the state `state` as it is.
    pub fn from_state(state: u64) -> Self {
        Lcg(state)
    }
    /// The next output, in 0..2^31.
    pub fn next(&mut self) -> u64 {
        self.0 = step(self.0);
        self.0 >> 33
    }
    pub fn next_u32(&mut self) -> u32 {
        self.next() as u32
    }
    /// Uniform in 0..n.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.next_u32() as f64 / (1u64 << 31) as f64
    }
}

fn step(state: u64) -> u64 {
    state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
}

/// Round to 1 µs, as times are recorded.
pub fn us(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn base_record(i: usize) -> Record {
    Record {
        input_length: 1000,
        output_length: 10,
        ..Record::new(i, i + 1, Status::Ok)
    }
}

/// `n` records over ~n/10 s of trace time: mostly ok with 1..60 chunks, some HTTP errors and
/// timeouts, a never-sent cancelled last request, some without usage.
pub fn synthetic(n: usize, seed: u64) -> Vec<Record> {
    let mut rng = Lcg::new(seed);
    let mut out = Vec::with_capacity(n);
    let mut t = 0.0;
    for i in 0..n {
        let mut r = base_record(i);
        t += us(20.0 + rng.unit() * 160.0);
        r.timestamp = t;
        r.scheduled_ms = t;
        r.input_length = 200 + rng.next_u32() % 8000;
        r.output_length = 1 + rng.next_u32() % 80;
        if i == n - 1 {
            r.status = Status::Cancelled;
            r.error = Some("run stopped".into());
            out.push(r);
            continue;
        }
        let drift = if i % 50 == 3 {
            us(2.0 + rng.unit() * 3.0)
        } else {
            us(rng.unit() * 0.6)
        };
        r.drift_ms = Some(drift);
        r.sent_ms = Some(us(t + drift));
        if i % 37 == 5 {
            r.status = Status::HttpError;
            r.http_status = Some(503);
            r.error = Some("Service Unavailable".into());
            r.done_ms = Some(us(5.0 + rng.unit() * 10.0));
            out.push(r);
            continue;
        }
        if i % 53 == 7 {
            r.status = Status::Timeout;
            r.error = Some("no response within 3 s".into());
            r.done_ms = Some(3000.0);
            out.push(r);
            continue;
        }
        let ttft = us(15.0 + rng.unit() * rng.unit() * 400.0);
        let chunks = 1 + rng.next_u32() % 60;
        let mut itl = Vec::new();
        for _ in 1..chunks {
            itl.push(us(4.0
                + rng.unit() * 30.0
                + if rng.unit() < 0.02 { 150.0 } else { 0.0 }));
        }
        let e2e = us(ttft + itl.iter().sum::<f64>());
        r.ttft_ms = Some(ttft);
        r.ttfc_ms = Some(if i % 4 == 0 { us(ttft + 0.2) } else { ttft });
        r.e2e_ms = Some(e2e);
        r.done_ms = Some(us(e2e + 0.4));
        r.chunks = chunks;
        let out_tokens = if i % 10 == 0 { chunks * 2 } else { chunks };
        r.output_tokens = Some(out_tokens);
        r.output_tokens_source = Some(if i % 29 == 0 {
            TokenSource::Chunks
        } else {
            TokenSource::Usage
        });
        if out_tokens > 1 {
            r.tpot_ms = Some((e2e - ttft) / (out_tokens - 1) as f64);
        }
        if i % 29 != 0 {
            let pt = if i % 17 == 0 {
                r.input_length + 1
            } else {
                r.input_length
            };
            r.prompt_tokens = Some(pt);
            r.cached_tokens = Some((pt / 512) * 512 / 2);
        }
        r.itl_ms = Some(itl);
        out.push(r);
    }
    out
}
