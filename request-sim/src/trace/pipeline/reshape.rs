//! Reshaping a trace (`request-sim transform`, and the same flags on `replay`): the stages of
//! the pipeline that change what the workload is, rather than how a file is read.
//!
//! | stage | where | what it does |
//! |---|---|---|
//! | [`Copies`] | `Pipeline::read` (file order, streams) | `--infer-sessions` gives a row without a session the one its hash ids continue; `--max-input-length` caps a row; `--sample-sessions P` keeps whole sessions with probability P; `--amplify N` makes N copies of every row with disjoint hash-id (and session-id) spaces, copy k shifted by a seeded phase |
//! | [`Reshape::finish`] | the end of the file (whole trace only) | `--retime`/`--rate-series` give every session a new start (its turns keep their gaps); `--max-idle-gap` caps the gaps; `--prefix-scale`/`--prompt-scale` grow or shrink the shared and unique blocks |
//!
//! The whole-trace stages move rows by more than any bounded reorder window, so a replay
//! that uses them loads the trace whole ([`Reshape::needs_whole`]).
//!
//! Randomness: every decision is a pure function of `--seed` and what it is about (a session
//! key, a copy number, a hash id), through SplitMix64 (`llm_common::util`); the arrival times
//! of `--retime` come from one seeded `StdRng` (rand) drawn in session order. The same seed and
//! trace give the same output.

use std::collections::HashMap;

use llm_common::util::{hash3, mix64};
use rand::SeedableRng;
use rand_distr::{Distribution, Exp1, Gamma};

use super::session::BlockSessions;
use crate::trace::error::RowError;
use crate::trace::model::TraceStats;
use crate::trace::options::{Arrivals, Reshape};
use crate::trace::row::RawRow;

/// Hash ids of copy k are moved up by `k << COPY_SHIFT` (original ids must be below it).
const COPY_SHIFT: u32 = 44;
/// Bailian chat ids of copy k are moved up by `k << CHAT_SHIFT`.
const CHAT_SHIFT: u32 = 40;
/// Fresh block ids (`--prefix-scale`, `--prompt-scale`) have this bit set, which no amplified
/// or recorded id below 2^62 has.
pub(crate) const FRESH_BIT: u64 = 1 << 63;

/// What a seeded hash is about (so that two decisions about the same key differ).
#[derive(Clone, Copy)]
enum Tag {
    Round = 1,
    Row,
    Amplify,
    Phase,
    Sample,
    Bailian,
    Line,
    Retime,
}

impl Reshape {
    /// The whole-trace stages, on every row of the trace in time order (`rows`; the times are
    /// set in place, the caller puts the rows back in time order): re-timing, capped think
    /// times, scaled prompts.
    pub(crate) fn finish(&self, rows: &mut [&mut RawRow], block: usize, stats: &mut TraceStats) {
        if self.retime.is_some() || self.max_idle_gap_ms.is_some() {
            self.retime_sessions(rows, stats);
        }
        if self.scales() {
            self.scale_prompts(rows, block.max(1));
            // The cap is on the final prompt: after the scales (the `Copies` stage leaves it).
            for raw in rows.iter_mut() {
                self.cap_input(raw, block, stats);
            }
        }
    }

    /// True when `--prefix-scale` or `--prompt-scale` is given.
    fn scales(&self) -> bool {
        self.prefix_scale.is_some() || self.prompt_scale.is_some()
    }

    /// `--max-input-length`: a longer prompt is cut, its hash ids with it (counted).
    fn cap_input(&self, raw: &mut RawRow, block: usize, stats: &mut TraceStats) {
        if let Some(max) = self.max_input_length {
            if raw.input_length > max {
                raw.input_length = max;
                if let Some(ids) = raw.hash_ids.as_mut() {
                    ids.truncate((max as usize).div_ceil(block.max(1)));
                }
                stats.capped_inputs += 1;
            }
        }
    }

    /// New times: a session's first turn at its new start (or where it was), every later turn
    /// at the previous one's new time plus its own gap, capped by `--max-idle-gap`.
    fn retime_sessions(&self, rows: &mut [&mut RawRow], stats: &mut TraceStats) {
        let keys = session_keys(rows);
        let sessions = keys.iter().filter(|k| k.first).count();
        let mut starts = self.arrivals(sessions).into_iter();
        // Per session: (its previous turn's original time, its new time).
        let mut prev: HashMap<u64, (f64, f64)> = HashMap::new();
        for (raw, key) in rows.iter_mut().zip(&keys) {
            let t = raw.timestamp_ms;
            let new = match prev.get(&key.id) {
                Some(&(orig, new)) => {
                    let gap = t - orig;
                    let capped = self.max_idle_gap_ms.map_or(gap, |c| gap.min(c));
                    if capped < gap {
                        stats.capped_gaps += 1;
                    }
                    if let Some(d) = raw.delay_ms.as_mut() {
                        *d = d.min(capped);
                    }
                    new + capped
                }
                None => match &self.retime {
                    Some(_) => starts.next().unwrap_or(t),
                    None => t,
                },
            };
            prev.insert(key.id, (t, new));
            raw.timestamp_ms = new;
        }
    }

    /// `sessions` new start times (ms, increasing). The rate (`--rate`, `--rate-series`) is
    /// the rate of session starts: a row without a session is a session of one, so on a trace
    /// without sessions it is the request rate; on a trace with sessions the request rate
    /// follows from the turns and their gaps, which are kept (`transform` prints it).
    fn arrivals(&self, sessions: usize) -> Vec<f64> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(mix64(self.seed ^ Tag::Retime as u64));
        let mut out = Vec::with_capacity(sessions);
        let mut t = 0.0f64;
        match &self.retime {
            None => {}
            Some(Arrivals::Poisson { rate }) => {
                let lambda = *rate;
                for _ in 0..sessions {
                    let e: f64 = Exp1.sample(&mut rng);
                    t += e / lambda;
                    out.push(t * 1e3);
                }
            }
            Some(Arrivals::Gamma { rate, cv }) => {
                let lambda = *rate;
                let shape = 1.0 / (cv * cv);
                let gamma = Gamma::new(shape, 1.0 / (lambda * shape)).ok();
                for _ in 0..sessions {
                    t += gamma.as_ref().map_or(1.0 / lambda, |g| g.sample(&mut rng));
                    out.push(t * 1e3);
                }
            }
            Some(Arrivals::Series(series)) => {
                // An inhomogeneous Poisson process by inversion of the integrated rate.
                let mut area = 0.0;
                for _ in 0..sessions {
                    let e: f64 = Exp1.sample(&mut rng);
                    area += e;
                    match series.invert(area) {
                        Some(s) => out.push(s * 1e3),
                        None => break,
                    }
                }
                // A series that ends at rate 0: the rest start with the last one.
                let last = out.last().copied().unwrap_or(0.0);
                out.resize(sessions, last);
            }
        }
        out
    }

    /// `--prefix-scale`/`--prompt-scale`: each block is replaced by `scale` blocks (rounded up
    /// or down by a seeded coin per block, so a scale of 1.5 gives half of the blocks two),
    /// the first keeping its id and the new ones fresh ids made from it: equal blocks stay
    /// equal, so the prefix tree keeps its shape. A block is shared when two requests or more
    /// hold it, else unique. Tokens beyond the last block scale with `--prompt-scale`.
    fn scale_prompts(&self, rows: &mut [&mut RawRow], block: usize) {
        let mut holders: HashMap<u64, u32> = HashMap::new();
        for raw in rows.iter() {
            for &h in raw.hash_ids.iter().flatten() {
                *holders.entry(h).or_insert(0) += 1;
            }
        }
        let prefix = self.prefix_scale.unwrap_or(1.0);
        let prompt = self.prompt_scale.unwrap_or(1.0);
        let b = block as u64;
        for raw in rows.iter_mut() {
            let len = u64::from(raw.input_length);
            let Some(ids) = raw.hash_ids.take() else {
                raw.input_length = scale_tokens(len, prompt, self.seed, u64::MAX)
                    .clamp(1, u64::from(u32::MAX)) as u32;
                continue;
            };
            let n = ids.len() as u64;
            let mut out = Vec::with_capacity(ids.len());
            let mut tokens = 0u64;
            for (i, &h) in ids.iter().enumerate() {
                let scale = if holders.get(&h).copied().unwrap_or(0) >= 2 {
                    prefix
                } else {
                    prompt
                };
                let copies = rounded(scale, self.seed, h);
                let in_block = b.min(len.saturating_sub(i as u64 * b));
                for j in 0..copies {
                    out.push(if j == 0 {
                        h
                    } else {
                        FRESH_BIT | (hash3(self.seed, h, j) >> 1)
                    });
                    // Only the last copy of a partial (last) block is partial.
                    tokens += if j + 1 == copies { in_block } else { b };
                }
            }
            let tail = len.saturating_sub(n * b);
            tokens += scale_tokens(tail, prompt, self.seed, u64::MAX - 1);
            raw.input_length = tokens.clamp(1, u64::from(u32::MAX)) as u32;
            raw.hash_ids = Some(out);
        }
    }
}

/// `scale` rounded down or up for `what` by a seeded coin (P(up) = the fraction).
pub(crate) fn rounded(scale: f64, seed: u64, what: u64) -> u64 {
    let base = scale.floor();
    let up = unit(hash3(seed, what, Tag::Round as u64)) < scale - base;
    base as u64 + u64::from(up)
}

/// `tokens * scale`, rounded by a seeded coin.
pub(crate) fn scale_tokens(tokens: u64, scale: f64, seed: u64, what: u64) -> u64 {
    let x = tokens as f64 * scale;
    let up = unit(hash3(seed, what, tokens)) < x - x.floor();
    x.floor() as u64 + u64::from(up)
}

/// A uniform number in [0, 1) from 64 random bits.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A 64-bit hash of a string (SplitMix64 over its bytes).
fn str_hash(s: &str) -> u64 {
    s.as_bytes().chunks(8).fold(mix64(s.len() as u64), |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        mix64(h ^ u64::from_le_bytes(w))
    })
}

/// The session of one row, as the whole-trace stages see it.
struct RowKey {
    /// Session key (rows without a session: a key of their own).
    id: u64,
    /// The first row of its session in time order.
    first: bool,
}

/// Every row's session key, in the order of `rows` (time order): `session_id`, else the root
/// of a Bailian parent chain, else the row alone.
fn session_keys(rows: &[&mut RawRow]) -> Vec<RowKey> {
    let parent: HashMap<i64, i64> = rows
        .iter()
        .filter_map(|r| r.session.as_ref())
        .map(|s| (s.chat_id, s.parent_chat_id))
        .collect();
    let root = |mut id: i64| {
        // A chain that loops is reported by the session pass; here it just stops.
        for _ in 0..parent.len() {
            match parent.get(&id) {
                Some(&p) if p >= 0 && parent.contains_key(&p) => id = p,
                _ => break,
            }
        }
        id
    };
    let mut seen = std::collections::HashSet::new();
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let id = if let Some(s) = &r.session_id {
                str_hash(s)
            } else if let Some(s) = &r.session {
                mix64(root(s.chat_id) as u64 ^ Tag::Bailian as u64)
            } else {
                hash3(i as u64, Tag::Row as u64, 0)
            };
            RowKey {
                id,
                first: seen.insert(id),
            }
        })
        .collect()
}

/// The per-row stages, in file order: cap, sample, copy (see the module doc).
pub(crate) struct Copies {
    reshape: Reshape,
    /// Bailian chat id -> the root of its chain, as far as the rows read so far tell.
    roots: HashMap<i64, i64>,
    /// `--infer-sessions`: the sessions inferred so far.
    infer: Option<BlockSessions>,
}

impl Copies {
    pub(crate) fn new(reshape: &Reshape) -> Copies {
        Copies {
            reshape: reshape.clone(),
            roots: HashMap::new(),
            infer: reshape.infer_sessions.then(BlockSessions::default),
        }
    }

    /// True when the stage changes nothing.
    pub(crate) fn idle(&self) -> bool {
        let r = &self.reshape;
        r.amplify.is_none()
            && r.sample_sessions.is_none()
            && r.max_input_length.is_none()
            && !r.infer_sessions
    }

    /// `--infer-sessions`: a row without a session gets the one its hash ids continue
    /// (`trace::pipeline::session::BlockSessions`), named `i<n>`; a row with a session (`session_id`,
    /// Bailian) keeps it, and a row without hash ids stays alone (both counted).
    fn infer(&mut self, raw: &mut RawRow, block: usize, stats: &mut TraceStats) {
        let Some(sessions) = self.infer.as_mut() else {
            return;
        };
        if raw.session_id.is_some() || raw.session.is_some() {
            stats.infer_had_session += 1;
            return;
        }
        let Some(ids) = raw.hash_ids.as_deref() else {
            stats.infer_without_ids += 1;
            return;
        };
        let (session, _turn) = sessions.assign(ids, raw.input_length, block, raw.timestamp_ms);
        raw.session_id = Some(format!("i{session}"));
        (
            stats.inferred_sessions,
            stats.inferred_multi_turn,
            stats.inferred_branches,
        ) = sessions.counts();
    }

    /// The rows one row becomes (none when sampled out); `block` tokens per hash id.
    pub(crate) fn expand(
        &mut self,
        line: usize,
        mut raw: RawRow,
        block: usize,
        stats: &mut TraceStats,
    ) -> Result<Vec<RawRow>, RowError> {
        self.infer(&mut raw, block, stats);
        let key = self.key(line, &raw);
        let r = &self.reshape;
        if !r.scales() {
            r.cap_input(&mut raw, block, stats);
        }
        if let Some(p) = r.sample_sessions {
            if unit(hash3(r.seed, key, Tag::Sample as u64)) >= p {
                stats.sampled_out += 1;
                return Ok(Vec::new());
            }
        }
        let Some(a) = r.amplify else {
            return Ok(vec![raw]);
        };
        let full = a.floor() as u64;
        let extra = unit(hash3(r.seed, key, Tag::Amplify as u64)) < a - a.floor();
        let copies = full + u64::from(extra);
        if copies > 1 {
            check_ids(&raw)?;
        }
        let mut out = Vec::with_capacity(copies as usize);
        for k in 0..copies {
            out.push(self.copy(&raw, k));
        }
        stats.amplified += out.len().saturating_sub(1);
        if out.is_empty() {
            stats.sampled_out += 1;
        }
        Ok(out)
    }

    /// Copy `k` of a row: ids moved into the copy's space, times shifted by its phase.
    fn copy(&self, raw: &RawRow, k: u64) -> RawRow {
        let mut c = raw.clone();
        if k == 0 {
            return c;
        }
        c.timestamp_ms += self.phase_ms(k);
        if let Some(ids) = c.hash_ids.as_mut() {
            for h in ids {
                *h += k << COPY_SHIFT;
            }
        }
        crate::trace::formats::images::shift(&mut c.images, k << COPY_SHIFT);
        if let Some(id) = c.session_id.as_mut() {
            id.push_str(&format!("#{k}"));
        }
        if let Some(s) = c.session.as_mut() {
            s.chat_id += (k as i64) << CHAT_SHIFT;
            if s.parent_chat_id >= 0 {
                s.parent_chat_id += (k as i64) << CHAT_SHIFT;
            }
        }
        c
    }

    /// Copy k's phase (copy 0 keeps the original times).
    pub(crate) fn phase_ms(&self, k: u64) -> f64 {
        if k == 0 {
            return 0.0;
        }
        // Whole milliseconds: a trace with times in whole ms keeps its gaps exactly.
        (unit(hash3(self.reshape.seed, k, Tag::Phase as u64)) * self.reshape.amplify_phase_ms)
            .floor()
    }

    /// The session key of a row in file order: its `session_id`, its Bailian chain's root as
    /// far as the rows read so far tell, else its line.
    fn key(&mut self, line: usize, raw: &RawRow) -> u64 {
        if let Some(s) = &raw.session_id {
            return str_hash(s);
        }
        if let Some(s) = &raw.session {
            let root = match self.roots.get(&s.parent_chat_id) {
                Some(&r) if s.parent_chat_id >= 0 => r,
                _ => s.chat_id,
            };
            self.roots.insert(s.chat_id, root);
            return mix64(root as u64 ^ Tag::Bailian as u64);
        }
        hash3(line as u64, Tag::Line as u64, 0)
    }
}

/// Amplified ids must fit below the copies' spaces.
fn check_ids(raw: &RawRow) -> Result<(), RowError> {
    if let Some(&h) = raw
        .hash_ids
        .iter()
        .flatten()
        .find(|&&h| h >= 1 << COPY_SHIFT)
    {
        return Err(RowError::Field {
            field: "hash_ids".into(),
            what: format!(
                "--amplify moves each copy's hash ids into its own space and needs ids below 2^{COPY_SHIFT}; {h} is not"
            ),
        });
    }
    if let Some(s) = &raw.session {
        if s.chat_id >= 1 << CHAT_SHIFT || s.parent_chat_id >= 1 << CHAT_SHIFT {
            return Err(RowError::Field {
                field: "chat_id".into(),
                what: format!(
                    "--amplify moves each copy's chat ids into its own space and needs ids below 2^{CHAT_SHIFT}"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_keeps_the_mean() {
        let n = 20_000u64;
        let total: u64 = (0..n).map(|h| rounded(1.5, 7, h)).sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 1.5).abs() < 0.02, "{mean}");
    }
}
