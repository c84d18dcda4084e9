//! Phase 4: what runs while requests are sent, started before the clock: producer threads
//! that build request bodies ahead of their time, the server-metrics scraper, the record
//! writer (which owns the summary's accumulator), the live metrics page (`--metrics-port`)
//! and the run control (Ctrl-C, early stop).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;

use super::build::{make_build_fn, ChatRows};
use super::control::{watch_signals, Control};
use super::load::Loaded;
use super::note::note;
use super::prompts::Prompts;
use super::server::Server;
use crate::config::ReplayConfig;
use crate::observe::export::{ExportConfig, ExportLabels, Exporter, LiveMetrics};
use crate::observe::{ScrapeConfig, Scraper};
use crate::record::{Annotate, Finished, Record, RecordWriter, SentBlocks, ServerAtSend};
use crate::report::export::inputs::InputsSink;
use crate::report::Progress;
use crate::schedule::sessions::{SessionGate, Timing};
use crate::schedule::{Feed, ProducerConfig, ProducerStats, Producers};
use crate::stats::Accumulator;
use crate::{Error, Result};

/// The running machinery of a replay.
pub(super) struct Pipeline {
    pub(super) producers: Producers,
    /// `--timing closed` with sessions: completion signals for the waiting turns.
    pub(super) gate: Option<Arc<SessionGate>>,
    pub(super) scraper: Option<Scraper>,
    pub(super) writer: RecordWriter<Accumulator>,
    /// Where finished requests go (the writer's channel).
    pub(super) tx: Sender<Finished>,
    pub(super) progress: Arc<Progress>,
    pub(super) control: Arc<Control>,
    /// Cores of this machine (the dispatcher takes the last one when there are two or more).
    pub(super) ncores: usize,
    /// `--metrics-port`: the page's server (taken by `replay`, which stops it after the run)
    /// and the metrics the run updates.
    pub(super) exporter: Option<Exporter>,
    pub(super) live: Option<Arc<LiveMetrics>>,
    /// `--model-map`: which served model each request names (its record says).
    pub(super) models: Option<Arc<crate::backend::SentModels>>,
}

pub(super) fn run(
    cfg: &ReplayConfig,
    trace: &Loaded,
    feed: Feed,
    server: &Server,
    prompts: &Prompts,
    inputs: Option<Arc<InputsSink>>,
) -> Result<Pipeline> {
    let ncores = core_affinity::get_core_ids().map(|c| c.len()).unwrap_or(1);
    let exporter = start_exporter(cfg, server, ncores)?;
    let live = exporter.as_ref().map(Exporter::metrics);
    let sessions = trace.sessions.clone();
    // A streamed trace's length is known when it ends.
    let progress = Arc::new(Progress::new(
        trace.planned.unwrap_or(0) as u64,
        !cfg.output.quiet,
    ));
    let feed = total_at_end(feed, progress.clone());
    let producers = start_producers(cfg, trace, feed, server, prompts, ncores, inputs)?;
    let gate = (cfg.requests.sessions.timing == Timing::Closed && sessions.any())
        .then(|| Arc::new(SessionGate::new(&sessions, sessions.turns.len())));
    // The records file first: a path that cannot be written is named as itself, not as the
    // server-metrics file beside it that the scraper opens before the writer starts.
    check_writable(&cfg.output.records_path)?;
    let scraper = start_scraper(cfg, server)?;
    let (writer, tx) = start_writer(
        cfg,
        trace.block_size,
        prompts.builder.clone(),
        scraper.as_ref(),
        progress.clone(),
        live.clone(),
    )?;
    let control = Arc::new(Control::default());
    server.rt.spawn(watch_signals(control.clone()));
    Ok(Pipeline {
        producers,
        gate,
        scraper,
        writer,
        tx,
        progress,
        control,
        ncores,
        exporter,
        live,
        models: prompts.models.clone(),
    })
}

/// Fails with the path when `path` cannot be created or written (checked by opening it; a file
/// this made is removed again, the writer creates it).
fn check_writable(path: &std::path::Path) -> Result<()> {
    let existed = path.exists();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| crate::Error::io(format!("cannot write {}", path.display()), e))?;
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| crate::Error::io(format!("cannot write {}", path.display()), e))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// `--metrics-port`: listen (a port in use stops the run here, before anything is sent) and
/// serve the live metrics from a thread kept off the dispatcher's (last) core.
fn start_exporter(cfg: &ReplayConfig, server: &Server, ncores: usize) -> Result<Option<Exporter>> {
    let Some(lm) = &cfg.output.live_metrics else {
        return Ok(None);
    };
    let run_id = lm
        .run_id
        .clone()
        .unwrap_or_else(|| match &cfg.schedule.start_at {
            Some(at) => at.rfc3339(),
            None => crate::stats::now_rfc3339(),
        });
    let shard = cfg.trace.shard.map_or((0, 1), |s| (s.index, s.count));
    let exporter = Exporter::start(ExportConfig {
        addr: lm.addr,
        labels: ExportLabels {
            run_id,
            shard: format!("{}/{}", shard.0, shard.1),
            api: server.ep.api().to_string(),
        },
        linger: lm.linger,
        // The first core this process may run on (the dispatcher takes the last).
        pin_core: (cfg.schedule.pin && ncores >= 2)
            .then(|| core_affinity::get_core_ids()?.first().map(|c| c.id))
            .flatten(),
    })?;
    note(format!(
        "live metrics: http://{}/metrics (served until {} s after the run, --metrics-linger)",
        exporter.addr(),
        lm.linger.as_secs_f64()
    ));
    Ok(Some(exporter))
}

/// The feed, telling the progress line its total when it ends.
fn total_at_end(feed: Feed, progress: Arc<Progress>) -> Feed {
    struct TotalAtEnd {
        feed: Feed,
        n: u64,
        progress: Arc<Progress>,
    }
    impl Iterator for TotalAtEnd {
        type Item = crate::Result<crate::trace::Planned>;
        fn next(&mut self) -> Option<Self::Item> {
            let item = self.feed.next();
            match item {
                Some(_) => self.n += 1,
                None => self.progress.set_total(self.n),
            }
            item
        }
    }
    Box::new(TotalAtEnd {
        feed,
        n: 0,
        progress,
    })
}

/// Producer threads below the sending threads. They keep off the dispatcher's (last) core
/// while there are enough other cores; with more producers than that they spread over all
/// cores instead of sharing one.
fn start_producers(
    cfg: &ReplayConfig,
    trace: &Loaded,
    feed: Feed,
    server: &Server,
    prompts: &Prompts,
    ncores: usize,
    inputs: Option<Arc<InputsSink>>,
) -> Result<Producers> {
    let cores: Vec<usize> = if ncores >= 2 && cfg.schedule.producers < ncores {
        (0..ncores - 1).collect()
    } else if ncores >= 2 {
        (0..ncores).collect()
    } else {
        vec![0]
    };
    let build = make_build_fn(
        prompts.builder.clone(),
        server.ep.kind,
        (prompts.params.clone(), prompts.models.clone()),
        prompts.shortening(),
        cfg.prompts.token_ids,
        ChatRows {
            session_user: cfg.requests.sessions.session_user,
            answer_spans: trace.answer_spans.clone(),
            counter: prompts.chat_counter.clone(),
            images: cfg.prompts.images,
        },
    );
    // `--export aiperf`: every body built is also kept for inputs.json.
    let build: Arc<crate::schedule::BuildFn> = match inputs {
        Some(sink) => Arc::new(
            move |p: &crate::trace::Planned, s: &mut crate::schedule::Scratch| {
                let built = build(p, s);
                sink.add(p.req.index, p.turn.as_ref().map(|t| &*t.id), &built.body);
                built
            },
        ),
        None => build,
    };
    let producers = Producers::spawn(
        feed,
        &ProducerConfig {
            threads: cfg.schedule.producers,
            capacity: lookahead_count(cfg, trace),
            pin: cfg.schedule.pin && ncores >= 2,
            cores,
            budget_bytes: cfg.schedule.lookahead_bytes,
            horizon: cfg.schedule.lookahead,
            scale_factor: cfg.schedule.scale_factor,
            nice: crate::schedule::priority::PRODUCER_NICE,
        },
        build,
    )?;
    note(producer_placement(
        cfg.schedule.producers,
        ncores,
        &producers.stats(),
    ));
    Ok(producers)
}

/// The server-metrics scraper. Its first round (the baseline of every counter) comes after
/// start-up's own requests (model lookup, calibration), so the run's deltas count only the
/// replay.
fn start_scraper(cfg: &ReplayConfig, server: &Server) -> Result<Option<Scraper>> {
    let Some(sm) = cfg
        .validity
        .server_metrics
        .as_ref()
        .filter(|_| !cfg.requests.dry_run)
    else {
        return Ok(None);
    };
    // Behind a router the listed instances are the servers; the router's origin (which may
    // forward /metrics to one of them) would count that instance twice.
    // An API whose transport is not HTTP (vLLM's gRPC engine) has no /metrics on its port.
    let http = server.ep.kind.transport() == crate::backend::Transport::HttpSse;
    let origin = (sm.urls.is_empty() && http)
        .then(|| server.ep.url.join("/metrics").ok())
        .flatten();
    let out = match &cfg.output.result_dir {
        Some(dir) => dir.join("server_metrics.jsonl"),
        None => {
            let mut p = cfg.output.records_path.as_os_str().to_owned();
            p.push(".server_metrics.jsonl");
            p.into()
        }
    };
    let started = Scraper::start(ScrapeConfig {
        urls: sm.urls.clone(),
        origin,
        origin_api_key: cfg.target.api_key.clone(),
        interval: sm.interval,
        out: Some(out),
        insecure: cfg.target.insecure,
    })?;
    for n in &started.notes {
        note(n);
    }
    let mut scraper = started.scraper;
    if !sm.kv_events.is_empty() {
        let Some(s) = scraper.as_mut() else {
            return Err(Error::config(
                "--kv-events: no instance is scraped, so there is nothing to place requests on (give the instances with --server-metrics)",
            ));
        };
        // Events are kept as long as a request can be in flight.
        let horizon = match cfg.requests.timeout {
            crate::config::TimeoutRule::Fixed(d) => d.min(Duration::from_secs(600)),
            crate::config::TimeoutRule::FromSlo { .. } => Duration::from_secs(600),
        } + Duration::from_secs(30);
        note(s.listen_kv_events(&sm.kv_events, horizon)?);
    }
    Ok(scraper)
}

/// The record writer, owning the summary's accumulator; each record gets the server's state at
/// its send, on the writer's thread.
fn start_writer(
    cfg: &ReplayConfig,
    block_size: usize,
    builder: Arc<crate::prompt::PromptBuilder>,
    scraper: Option<&Scraper>,
    progress: Arc<Progress>,
    live: Option<Arc<LiveMetrics>>,
) -> Result<(RecordWriter<Accumulator>, Sender<Finished>)> {
    let annotate = scraper.map(|s| {
        let (series, clock) = (s.series(), s.clock());
        let placement = s.placement().map(|p| (p, builder.clone()));
        let mut prompt: Vec<u32> = Vec::new();
        Box::new(move |r: &mut Record, blocks: Option<&SentBlocks>| {
            let (Some(sent), Some(start)) = (r.sent_ms, clock.get()) else {
                return;
            };
            let at = *start + Duration::from_secs_f64(sent.max(0.0) / 1e3);
            let mut placed = None;
            if let (Some((p, builder)), Some(b)) = (&placement, blocks) {
                // The prompt as the builder made it, placed by the instances' KV events.
                prompt.clear();
                builder.write_token_ids_of(
                    &b.hash_ids.ids(),
                    r.index,
                    b.input_length as usize,
                    &mut prompt,
                );
                let done = *start
                    + Duration::from_secs_f64(r.done_ms.unwrap_or(sent).max(sent).max(0.0) / 1e3);
                r.kv_placement = p.place(at, done, &prompt);
                placed = r.kv_placement.as_ref().map(|k| k.instance);
                if let (Some(k), Some(named)) = (&r.kv_placement, r.served_by.as_ref()) {
                    if let Some(i) = series.instance_of(named) {
                        p.compared_with_response(i == k.instance);
                    }
                }
            }
            let st = match placed.filter(|_| r.served_by.is_none()) {
                Some(i) => series.instance_at(at, i).or_else(|| series.cluster_at(at)),
                None => series.state_at(at, r.served_by.as_ref()),
            };
            r.server = st.map(ServerAtSend::from);
        }) as Annotate
    });
    let mut acc = Accumulator::new(&cfg.output.report);
    acc.track_served_ideal(block_size);
    let writer = RecordWriter::spawn_annotated(
        Some(&cfg.output.records_path),
        cfg.output.record_itl,
        annotate,
        acc,
        move |acc: &mut Accumulator, fin: &Finished| {
            progress.on_done(fin.record.status);
            if let Some(l) = &live {
                l.on_record(&fin.record, &fin.itl_ms);
            }
            acc.add_finished(fin);
        },
    )
    .map_err(|e| Error::write(&cfg.output.records_path, e))?;
    note(format!("records: {}", cfg.output.records_path.display()));
    Ok(writer)
}

/// The start-up line saying where the producers run relative to the sending threads.
fn producer_placement(threads: usize, ncores: usize, st: &ProducerStats) -> String {
    let level = match st.nice {
        Some(n) => format!("at nice {n}, below the dispatcher and I/O threads"),
        None => "at the default nice level (it could not be lowered)".to_string(),
    };
    let place = if st.pinned_cores == 0 {
        format!("unpinned over {ncores} core(s)")
    } else if threads > st.pinned_cores {
        format!(
            "{threads} threads sharing {} core(s) ({:.1} per core)",
            st.pinned_cores,
            threads as f64 / st.pinned_cores as f64
        )
    } else {
        format!("pinned one per core on {} core(s)", st.pinned_cores)
    };
    format!("producers: {threads} thread(s) {level}; {place}")
}

/// How many built bodies may wait for the dispatcher: `--channel-capacity`, or the first burst
/// when it is larger (1,000 requests due at one instant are all built before the clock starts,
/// not by producers competing with the burst's own sends: docs/performance.md, "Measured on
/// the wire"). `--lookahead-mb` still bounds their bytes.
pub(super) fn lookahead_count(cfg: &ReplayConfig, trace: &Loaded) -> usize {
    cfg.schedule
        .channel_capacity
        .max(trace.first_burst(cfg.schedule.scale_factor))
}
