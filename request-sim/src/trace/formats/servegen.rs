//! ServeGen (`alibaba/ServeGen`, `data/<category>/<model>/`): not a trace of requests but a
//! workload to synthesize, a directory per category and model holding, per client `i`,
//! `chunk-i-trace.csv` and `chunk-i-dataset.json` (`docs/traces.md`, "ServeGen").
//!
//! - `chunk-i-trace.csv`, no header, one row per time window: `start_s,rate,cv,pattern,shape,
//!   scale` (`pattern` `Gamma` or `Weibull`, or empty: the client sends nothing then). A
//!   window lasts until the next row's start; the last one as long as the one before it
//!   (600 s in ServeGen's data; a client of one row: 600 s).
//! - `chunk-i-dataset.json`: `{"<start_s>": {"input_tokens": "<pmf>", "output_tokens": "<pmf>",
//!   "reason_ratio": "<pmf>"}}`, each PMF a Python dict literal `{value: probability, ...}`
//!   (token counts, or thinking shares in [0, 1]); a trace window takes the latest dataset
//!   window starting at or before it (one with an empty PMF is skipped, as ServeGen does).
//!
//! Synthesis, as ServeGen's `generate_workload` at the clients' own rates: in each window a
//! client with a pattern and rate `r` gets `n = ceil(r · len)` inter-arrival gaps drawn from
//! Gamma(shape, scale) or Weibull(shape, scale), scaled so they sum to the window's length;
//! their running sums after the window's start are its arrivals, the first `n - 1` kept (the
//! last is the window's end).
//! Each request draws one uniform `u` and takes every field at quantile `u` of its PMF (as
//! ServeGen does); a `reason` request's thinking length is `round(ratio · output)`. A
//! multimodal dataset (`multimodal/mm-image`: `text_tokens`, `image_count`, `image_tokens`,
//! and `audio_*`/`video_*`, ignored) gives `image_count` images at `u`, each with its own
//! `image_tokens` drawn apart (at least the smallest image's cost); the request's input is the
//! text plus the images' tokens, and each image is sized to its tokens (`docs/images.md`). The
//! clients' arrivals are merged in time order, one window at a time, each client's gaps drawn
//! twice from one saved random state (once for their sum, once to emit them), so memory holds
//! the PMFs and one state per client, never the requests. Random draws come from ChaCha8
//! seeded per window and client from `--seed` (`rand_distr` for the two distributions).

use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma, Weibull};

use super::images;
use super::unit::{Format, Reader};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::Reasoning;
use crate::trace::model::{FormatInfo, Timestamps};
use crate::trace::options::MAX_LENGTH_TOKENS;
use crate::trace::row::RawRow;

/// A window's length when a client's file has only one row.
const SINGLE_WINDOW_S: f64 = 600.0;

/// The `(client id, trace CSV)` files of `dir`, by client id; empty when it holds none (then
/// it is no ServeGen directory).
pub(crate) fn trace_files(dir: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let id = name.strip_prefix("chunk-")?.strip_suffix("-trace.csv")?;
            Some((id.parse().ok()?, path))
        })
        .collect();
    files.sort();
    files
}

/// A distribution of values given as a PMF: the values and their cumulative probabilities.
#[derive(Debug, Clone, PartialEq)]
struct Pmf {
    values: Vec<f64>,
    cum: Vec<f64>,
}

impl Pmf {
    /// The value at quantile `u` in [0, 1) (of the PMF's total mass).
    fn at(&self, u: f64) -> f64 {
        let target = u * self.cum.last().copied().unwrap_or(0.0);
        let i = self.cum.partition_point(|&c| c <= target);
        self.values[i.min(self.values.len() - 1)]
    }
}

/// Parses a PMF written as a Python dict literal (`{45: 0.01, 46: 0.02}`); `Ok(None)` for
/// `{}`. Values must lie in `lo..=hi`, probabilities be >= 0 and sum to more than 0.
fn parse_pmf(text: &str, lo: f64, hi: f64) -> Result<Option<Pmf>, String> {
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| "expected a PMF written as {value: probability, ...}".to_owned())?;
    if inner.trim().is_empty() {
        return Ok(None);
    }
    let mut pairs = Vec::new();
    for (k, entry) in inner.split(',').enumerate() {
        let (v, p) = entry.split_once(':').ok_or_else(|| {
            format!(
                "entry {} ({:?}) is not `value: probability`",
                k + 1,
                entry.trim()
            )
        })?;
        let num = |s: &str| s.trim().parse::<f64>().ok().filter(|x| x.is_finite());
        let (Some(v), Some(p)) = (num(v), num(p)) else {
            return Err(format!(
                "entry {} ({:?}) is not two numbers",
                k + 1,
                entry.trim()
            ));
        };
        if !(lo..=hi).contains(&v) || p < 0.0 {
            return Err(format!(
                "entry {} ({:?}): the value must be in {lo}..={hi} and the probability >= 0",
                k + 1,
                entry.trim()
            ));
        }
        pairs.push((v, p));
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let (values, cum) = pairs
        .into_iter()
        .map(|(v, p)| {
            total += p;
            (v, total)
        })
        .unzip();
    if total <= 0.0 {
        return Err("the probabilities sum to 0".into());
    }
    Ok(Some(Pmf { values, cum }))
}

/// The request lengths of one dataset window.
#[derive(Debug, Clone, PartialEq)]
struct Lengths {
    /// `input_tokens`, or a multimodal dataset's `text_tokens`.
    input: Pmf,
    output: Pmf,
    /// `reason` data: the share of the output that is thinking.
    reason_ratio: Option<Pmf>,
    /// Multimodal data (`mm-image`): `image_count` and each image's `image_tokens`.
    images: Option<(Pmf, Pmf)>,
}

impl Lengths {
    /// A request's (input, output, thinking) at quantile `u` of every PMF.
    fn at(&self, u: f64) -> (u32, u32, Option<u32>) {
        let input = self.input.at(u) as u32;
        let output = self.output.at(u) as u32;
        let thinking = self
            .reason_ratio
            .as_ref()
            .map(|r| ((r.at(u) * f64::from(output)).round() as u32).min(output));
        (input, output, thinking)
    }
}

/// An arrival pattern of a window (gaps in seconds).
#[derive(Debug, Clone, Copy)]
enum Gaps {
    Gamma(Gamma<f64>),
    Weibull(Weibull<f64>),
}

impl Gaps {
    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Gaps::Gamma(d) => d.sample(rng),
            Gaps::Weibull(d) => d.sample(rng),
        }
    }
}

/// One time window of one client.
#[derive(Debug, Clone)]
struct Window {
    start_s: f64,
    len_s: f64,
    /// Requests in the window (`ceil(rate · len)` gaps, the last at the window's end) and
    /// their pattern; `None`: the client sends nothing.
    arrivals: Option<(u64, Gaps)>,
    lengths: Option<Arc<Lengths>>,
}

/// One client: its windows in time order.
#[derive(Debug, Clone)]
struct Client {
    id: u32,
    windows: Vec<Window>,
}

fn row_error(path: &Path, line: usize, field: &str, what: impl Into<String>) -> TraceError {
    TraceError::Row {
        path: path.display().to_string(),
        line,
        error: RowError::Field {
            field: field.into(),
            what: what.into(),
        },
    }
}

/// One data row of a trace CSV: (start s, rate, the pattern when it sends).
fn parse_csv_row(
    path: &Path,
    line: usize,
    text: &str,
) -> Result<(f64, f64, Option<Gaps>), TraceError> {
    let cols: Vec<&str> = text.split(',').map(str::trim).collect();
    if cols.len() != 6 {
        return Err(TraceError::Row {
            path: path.display().to_string(),
            line,
            error: RowError::Csv(format!(
                "expected 6 columns (start_s,rate,cv,pattern,shape,scale), found {}",
                cols.len()
            )),
        });
    }
    let names = ["start_s", "rate", "cv", "pattern", "shape", "scale"];
    let mut num = [0.0; 6];
    for i in [0, 1, 2, 4, 5] {
        num[i] = cols[i]
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| {
                row_error(
                    path,
                    line,
                    names[i],
                    format!("expected a number >= 0, found {:?}", cols[i]),
                )
            })?;
    }
    let (shape, scale) = (num[4], num[5]);
    let bad_params = || {
        row_error(
            path,
            line,
            "shape",
            format!(
                "{} needs shape and scale > 0, found {shape} and {scale}",
                cols[3]
            ),
        )
    };
    let gaps = match cols[3] {
        "" => None,
        _ if num[1] == 0.0 => None,
        "Gamma" => Some(Gaps::Gamma(
            Gamma::new(shape, scale).map_err(|_| bad_params())?,
        )),
        "Weibull" => Some(Gaps::Weibull(
            Weibull::new(scale, shape).map_err(|_| bad_params())?,
        )),
        other => {
            return Err(row_error(
                path,
                line,
                "pattern",
                format!("expected Gamma, Weibull or nothing, found {other:?}"),
            ))
        }
    };
    Ok((num[0], num[1], gaps))
}

/// One row of a trace CSV: (line, start s, rate, pattern).
type CsvRow = (usize, f64, f64, Option<Gaps>);

/// The rows of a trace CSV, starts increasing.
fn read_csv(path: &Path) -> Result<Vec<CsvRow>, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|error| TraceError::Open {
        path: path.display().to_string(),
        error,
    })?;
    let mut rows: Vec<CsvRow> = Vec::new();
    for (i, t) in text
        .lines()
        .enumerate()
        .filter(|(_, t)| !t.trim().is_empty())
    {
        let (start, rate, gaps) = parse_csv_row(path, i + 1, t)?;
        if rows.last().is_some_and(|r| r.1 >= start) {
            return Err(row_error(
                path,
                i + 1,
                "start_s",
                format!("{start} does not follow the row before it (starts must increase)"),
            ));
        }
        rows.push((i + 1, start, rate, gaps));
    }
    if rows.is_empty() {
        return Err(TraceError::Empty {
            path: path.display().to_string(),
        });
    }
    Ok(rows)
}

/// The 1-based line of `"field"` in dataset window `window` of `text` (for messages).
fn field_line(text: &str, window: &str, field: &str) -> usize {
    let from = text.find(&format!("\"{window}\"")).unwrap_or(0);
    let at = text[from..]
        .find(&format!("\"{field}\""))
        .map_or(from, |i| from + i);
    text[..at].matches('\n').count() + 1
}

/// A dataset JSON: its windows (start s, lengths) in time order, empty ones left out.
fn read_dataset(path: &Path) -> Result<Vec<(f64, Arc<Lengths>)>, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|error| TraceError::Open {
        path: path.display().to_string(),
        error,
    })?;
    let doc: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| TraceError::Row {
            path: path.display().to_string(),
            line: e.line(),
            error: RowError::Json(format!("not a ServeGen dataset ({e})")),
        })?;
    let mut windows = Vec::new();
    for (key, fields) in &doc {
        let line = field_line(&text, key, "");
        let start: f64 = key.parse().map_err(|_| {
            row_error(
                path,
                line,
                key,
                "a dataset window's key must be its start in seconds",
            )
        })?;
        let pmf = |name: &str,
                   lo: f64,
                   hi: f64,
                   required: bool|
         -> Result<Option<Pmf>, TraceError> {
            let line = field_line(&text, key, name);
            let field = format!("{key}.{name}");
            match fields.get(name) {
                Some(serde_json::Value::String(s)) => parse_pmf(s, lo, hi).map_err(|w| row_error(path, line, &field, w)),
                None if !required => Ok(None),
                None => Err(row_error(path, line, &field, "missing (a ServeGen language or reason dataset has input_tokens and output_tokens; a multimodal one text_tokens, image_count, image_tokens and output_tokens)")),
                Some(v) => Err(row_error(path, line, &field, format!("expected a PMF string, found {}", super::fields::describe_value(v)))),
            }
        };
        let max = MAX_LENGTH_TOKENS as f64;
        // A multimodal dataset (`mm-image`) gives the text and the images apart.
        let multimodal =
            fields.get("input_tokens").is_none() && fields.get("text_tokens").is_some();
        let input = match multimodal {
            true => pmf("text_tokens", 0.0, max, true)?,
            false => pmf("input_tokens", 1.0, max, true)?,
        };
        let images = match multimodal {
            true => match (
                pmf("image_count", 0.0, images::MAX_IMAGES as f64, true)?,
                pmf("image_tokens", 0.0, max, true)?,
            ) {
                (Some(c), Some(t)) => Some((c, t)),
                _ => None,
            },
            false => None,
        };
        let output = pmf("output_tokens", 0.0, max, true)?;
        let reason = fields
            .get("reason_ratio")
            .map(|_| pmf("reason_ratio", 0.0, 1.0, true))
            .transpose()?;
        // An empty PMF leaves the window out (ServeGen's loader does the same).
        if let (Some(input), Some(output), None | Some(Some(_))) = (input, output, &reason) {
            let reason_ratio = reason.flatten();
            windows.push((
                start,
                Arc::new(Lengths {
                    input,
                    output,
                    reason_ratio,
                    images,
                }),
            ));
        }
    }
    windows.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(windows)
}

/// Client `id` from its two files.
fn read_client(id: u32, csv: &Path) -> Result<Client, TraceError> {
    let rows = read_csv(csv)?;
    let dataset = csv.with_file_name(format!("chunk-{id}-dataset.json"));
    let data = read_dataset(&dataset)?;
    let mut windows = Vec::with_capacity(rows.len());
    for (k, &(line, start, rate, gaps)) in rows.iter().enumerate() {
        let len = match (rows.get(k + 1), k.checked_sub(1).map(|j| rows[j].1)) {
            (Some(next), _) => next.1 - start,
            (None, Some(prev)) => start - prev,
            (None, None) => SINGLE_WINDOW_S,
        };
        let lengths = data
            .iter()
            .rev()
            .find(|(s, _)| *s <= start)
            .map(|(_, l)| l.clone());
        let arrivals = gaps.map(|g| ((rate * len).ceil() as u64, g));
        if arrivals.is_some() && lengths.is_none() {
            return Err(row_error(csv, line, "start_s", format!("the client sends in the window at {start} s but {} has no dataset window at or before it", dataset.display())));
        }
        windows.push(Window {
            start_s: start,
            len_s: len,
            arrivals,
            lengths,
        });
    }
    Ok(Client { id, windows })
}

/// A ServeGen workload read from a directory, ready to generate.
#[derive(Debug, Clone)]
pub(crate) struct Workload {
    clients: Vec<Client>,
    seed: u64,
}

impl Workload {
    /// Reads every client of `dir` (its `chunk-i-trace.csv` and `chunk-i-dataset.json`); all
    /// clients must have the same window starts (as ServeGen requires).
    pub(crate) fn open(dir: &Path, seed: u64) -> Result<Workload, TraceError> {
        let files = trace_files(dir);
        if files.is_empty() {
            return Err(TraceError::NoRequests {
                path: dir.display().to_string(),
                reason: "no chunk-<i>-trace.csv file: not a ServeGen directory".into(),
            });
        }
        let mut clients = Vec::with_capacity(files.len());
        for (id, csv) in &files {
            let c = read_client(*id, csv)?;
            if let Some(first) = clients.first().map(|f: &Client| &f.windows) {
                let same = first.len() == c.windows.len()
                    && first
                        .iter()
                        .zip(&c.windows)
                        .all(|(a, b)| a.start_s == b.start_s);
                if !same {
                    return Err(row_error(csv, 1, "start_s", format!("client {id}'s windows start at other times than client {}'s (ServeGen clients share one window grid)", clients[0].id)));
                }
            }
            clients.push(c);
        }
        Ok(Workload { clients, seed })
    }

    /// The requests, generated in time order (ms from the first window's start).
    pub(crate) fn rows(self) -> Rows {
        Rows {
            workload: self,
            window: 0,
            heap: BinaryHeap::new(),
        }
    }
}

/// One client's arrivals in the current window, drawn as they are emitted.
struct ClientGen {
    client: usize,
    next_s: f64,
    end_s: f64,
    left: u64,
    scale: f64,
    gaps: Gaps,
    rng: ChaCha8Rng,
    lengths: ChaCha8Rng,
}

impl ClientGen {
    /// The window's generator, with its first arrival drawn; `None` when it sends nothing.
    fn start(seed: u64, window: usize, client: usize, w: &Window) -> Option<ClientGen> {
        let (n, gaps) = w.arrivals?;
        let stream = |k: u64| {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            r.set_stream(((window as u64) << 32 | client as u64) << 1 | k);
            r
        };
        let rng = stream(0);
        // The gaps' sum from a copy of the same state: they are drawn again to be emitted.
        let mut first = rng.clone();
        let sum: f64 = (0..n).map(|_| gaps.sample(&mut first)).sum();
        let scale = if sum > 0.0 && sum.is_finite() {
            w.len_s / sum
        } else {
            0.0
        };
        let mut g = ClientGen {
            client,
            next_s: w.start_s,
            end_s: w.start_s + w.len_s,
            left: n,
            scale,
            gaps,
            rng,
            lengths: stream(1),
        };
        g.advance().then_some(g)
    }

    /// Draws the next arrival; false when the window has no more. The last of the `n` gaps
    /// ends at the window's end by construction and is never kept (ServeGen keeps `t < end`,
    /// which rounding may or may not meet there).
    fn advance(&mut self) -> bool {
        if self.left <= 1 {
            return false;
        }
        self.left -= 1;
        self.next_s += self.gaps.sample(&mut self.rng) * self.scale;
        self.next_s < self.end_s
    }
}

impl PartialEq for ClientGen {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for ClientGen {}
impl PartialOrd for ClientGen {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ClientGen {
    /// Reversed (a min-heap): the earliest arrival first, ties by client.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .next_s
            .total_cmp(&self.next_s)
            .then(other.client.cmp(&self.client))
    }
}

/// The requests of a [`Workload`] in time order.
pub(crate) struct Rows {
    workload: Workload,
    /// The next window to start.
    window: usize,
    heap: BinaryHeap<ClientGen>,
}

impl Iterator for Rows {
    type Item = Result<RawRow, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let w = &self.workload;
        while self.heap.is_empty() {
            let k = self.window;
            if k >= w.clients.first()?.windows.len() {
                return None;
            }
            self.window += 1;
            for (c, client) in w.clients.iter().enumerate() {
                self.heap
                    .extend(ClientGen::start(w.seed, k, c, &client.windows[k]));
            }
        }
        let mut g = self.heap.pop()?;
        let lengths = w.clients[g.client].windows[self.window - 1]
            .lengths
            .as_ref()?;
        let u = g.lengths.random::<f64>();
        let (mut input, output, thinking) = lengths.at(u);
        // A multimodal request: the count at the same quantile, each image's tokens drawn
        // apart (as ServeGen does), at least the smallest image's cost.
        let images = lengths.images.as_ref().map(|(count, tokens)| {
            let n = count.at(u) as u32;
            let min = images::min_image_cost() as u32;
            let t: Vec<u32> = (0..n)
                .map(|_| (tokens.at(g.lengths.random::<f64>()) as u32).max(min))
                .collect();
            input = input.saturating_add(t.iter().sum::<u32>()).max(1);
            t
        });
        let mut row = RawRow::lengths(g.next_s * 1e3, input.min(MAX_LENGTH_TOKENS as u32), output);
        row.images = images.and_then(|t| images::fresh_sized(&t));
        row.reasoning = Reasoning {
            tokens: thinking,
            budget: None,
        };
        if g.advance() {
            self.heap.push(g);
        }
        Some(Ok(row))
    }
}

/// ServeGen: a directory holding `chunk-<i>-trace.csv` files.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo::rows(
        "servegen",
        512,
        Timestamps::Generated,
        "ServeGen (alibaba/ServeGen): a directory of per-client arrival patterns and length PMFs, a workload generated from --seed (give the directory)",
    ),
    recognise: |p| p.dir.is_some_and(|d| !trace_files(d).is_empty()),
    read: Reader::Dir(|dir, opts| {
        let workload = Workload::open(dir, opts.reshape.seed)?;
        Ok(Box::new(workload.rows()))
    }),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::options::LoadOptions;
    use crate::trace::pipeline::{Planned, ReorderWindow, TraceStream};

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/servegen")
            .join(name)
    }

    fn requests(name: &str, seed: u64) -> Vec<Planned> {
        let mut opts = LoadOptions::default();
        opts.reshape.seed = seed;
        let s = TraceStream::open(&fixture(name), &opts, ReorderWindow::default()).unwrap();
        assert_eq!(s.format(), FORMAT.handle());
        s.map(Result::unwrap).collect()
    }

    #[test]
    fn a_directory_of_chunk_traces_is_servegen_not_weka() {
        let dir = fixture("reason");
        let servegen = Some(FORMAT.handle());
        assert_eq!(super::super::open::recognise_path(&dir), servegen);
        assert_ne!(
            super::super::open::recognise_path(&dir.join("chunk-0-trace.csv")),
            servegen
        );
        assert_eq!(super::super::agents::agent_format(&dir, None), None);
        let ids: Vec<u32> = trace_files(&dir).into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![0, 1]);
    }

    #[test]
    fn multimodal_requests_carry_their_images_and_count_them_in_the_input() {
        let reqs = requests("multimodal", 3);
        assert!(reqs.len() > 5, "{}", reqs.len());
        for p in &reqs {
            let images = p
                .req
                .images
                .as_deref()
                .expect("every request has 1 or 2 images");
            assert!((1..=2).contains(&images.len()));
            // Each image's own count (at least the smallest image's 6), plus the text.
            let sum: u32 = images.iter().map(|i| i.tokens).sum();
            assert!(
                images.iter().all(|i| [6, 66, 258].contains(&i.tokens)),
                "{images:?}"
            );
            assert!(
                [41, 50].contains(&(p.req.input_length - sum)),
                "{:?}",
                p.req
            );
        }
        let ids: std::collections::HashSet<u64> = reqs
            .iter()
            .flat_map(|p| p.req.images.as_deref().unwrap().iter().map(|i| i.id))
            .collect();
        let n: usize = reqs.iter().map(|p| p.req.image_count()).sum();
        assert_eq!(ids.len(), n, "every image is new");
    }

    #[test]
    fn the_workload_is_the_same_for_a_seed() {
        let a = requests("reason", 7);
        let b = requests("reason", 7);
        // Window 0: client 0 draws ceil(0.5 · 10) = 5 gaps; window 1 (10 s, as long as the
        // one before): client 0 ceil(0.3 · 10) = 3, client 1 10. Each window's last gap ends
        // at the window's end, which is not kept (ServeGen keeps t < end).
        assert_eq!(a.len(), 15);
        let times = |r: &[Planned]| r.iter().map(|p| p.req.timestamp_ms).collect::<Vec<_>>();
        assert_eq!(times(&a), times(&b));
        assert!(times(&a).windows(2).all(|w| w[0] <= w[1]));
        assert!(times(&a).iter().all(|&t| (0.0..20_000.0).contains(&t)));
        assert_ne!(times(&a), times(&requests("reason", 8)));
    }

    #[test]
    fn lengths_come_from_the_pmfs_and_thinking_from_the_ratio() {
        let rows = requests("reason", 7);
        for p in &rows {
            let r = &p.req;
            let thinking = r.reasoning.tokens.unwrap();
            assert!(thinking <= r.output_length, "{r:?}");
            match r.input_length {
                // Client 0 (its empty window 10 takes the dataset window at 0).
                10 | 20 => {
                    assert!([100, 200].contains(&r.output_length), "{r:?}");
                    let half = r.output_length / 2;
                    assert!([0, half, r.output_length].contains(&thinking), "{r:?}");
                }
                // Client 1: a ratio of 0.25 of 50 or 60 tokens.
                30 => assert!(
                    [(50, 13), (60, 15)].contains(&(r.output_length, thinking)),
                    "{r:?}"
                ),
                other => panic!("input {other} is not in any PMF's support"),
            }
        }
        let language = requests("language", 1);
        assert!(!language.is_empty());
        for p in &language {
            assert!([7, 9].contains(&p.req.input_length) && p.req.output_length == 3);
            assert_eq!(p.req.reasoning.tokens, None);
        }
    }

    #[test]
    fn bad_files_are_named_with_their_line() {
        let err = |name: &str| {
            let dir = fixture(name);
            match TraceStream::open(&dir, &LoadOptions::default(), ReorderWindow::default()) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{name} opened"),
            }
        };
        let e = err("bad-csv");
        assert!(
            e.ends_with("bad-csv/chunk-0-trace.csv:2: field `pattern`: expected Gamma, Weibull or nothing, found \"Poisson\""),
            "{e}"
        );
        let e = err("bad-pmf");
        assert!(
            e.ends_with("bad-pmf/chunk-0-dataset.json:4: field `0.output_tokens`: entry 2 (\"200 0.75\") is not `value: probability`"),
            "{e}"
        );
    }

    #[test]
    fn pmfs_are_python_dict_literals() {
        let p = parse_pmf("{45: 0.25, 46: 0.75}", 1.0, 10.0).unwrap_err();
        assert!(p.contains("entry 1"), "{p}");
        let p = parse_pmf("{5: 0.25, 3: 0.75}", 1.0, 10.0).unwrap().unwrap();
        assert_eq!(
            (p.values.clone(), p.cum.clone()),
            (vec![3.0, 5.0], vec![0.75, 1.0])
        );
        assert_eq!(
            (p.at(0.0), p.at(0.74), p.at(0.76), p.at(0.999)),
            (3.0, 3.0, 5.0, 5.0)
        );
        assert_eq!(parse_pmf(" {} ", 0.0, 1.0), Ok(None));
        assert!(parse_pmf("{0.5: -1}", 0.0, 1.0).is_err());
        assert!(parse_pmf("[1, 2]", 0.0, 1.0).is_err());
    }
}
