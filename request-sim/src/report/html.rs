//! `report.html`: one self-contained page per run (the charts first, throughput and latency at
//! the top, then the summary's tables and the servers' panels) and per sweep (its answer, its
//! chart, then its table with links to each point's page), for sharing a result. Nothing is
//! fetched when it opens: the CSS is inline and the charts are embedded as `data:` URIs
//! (base64 SVG, or PNG when that is smaller).
//!
//! The pages are minijinja templates (`html/*.html`, auto-escaped as HTML); the run's tables
//! are the console table's pieces ([`super::table::Item`]), so both always say the same.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use minijinja::{Environment, Value};
use serde::Serialize;

use super::console::console_items;
use super::format::{change, change_interval, wide_or_na};
use super::table::Item;
use crate::error::{Error, Result};
use crate::stats::compare::Comparison;
use crate::stats::repeats::RepeatSet;
use crate::stats::{now_rfc3339, Summary};

/// The page's file name, in a result directory and in a sweep directory.
pub const REPORT_HTML: &str = "report.html";

/// The chart shown apart, under "Server metrics over the run".
const SERVER_CHART: &str = "server_over_time";

/// The charts a reader needs first, in this order, at the top of a run's page (before the
/// tables): throughput and in-flight requests, the latency CDFs, TTFT and end-to-end latency
/// by send time.
const FIRST_CHARTS: [&str; 4] = [
    "throughput_inflight",
    "latency_cdf",
    "ttft_over_time",
    "e2el_over_time",
];

/// One summary section: a header of the console table and what follows it.
#[derive(Debug, Default, Serialize)]
struct Section {
    title: String,
    rows: Vec<(String, String)>,
    grids: Vec<Grid>,
    text: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Grid {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// An embedded chart.
#[derive(Debug, Serialize)]
struct Image {
    name: String,
    /// `data:image/...;base64,...` (marked safe: base64 needs no escaping).
    src: Value,
}

/// A sweep's page, as `request-sim sweep` describes it.
#[derive(Debug, Clone, Default)]
pub struct SweepPage {
    /// Facts shown under the title: (what, value).
    pub meta: Vec<(String, String)>,
    /// The answer in one line.
    pub answer: String,
    /// Whether the answer is a capacity found, or only a bound of it (shown as a warning).
    pub look: AnswerLook,
    /// What a bound means, in plain words, shown before the answer (empty for a capacity found).
    pub lead: String,
    /// Lines shown as warnings (interrupted, invalid points).
    pub notes: Vec<String>,
    /// Column names of the points' table.
    pub head: Vec<String>,
    pub points: Vec<SweepPagePoint>,
}

/// How a sweep's answer is shown: only a capacity found looks like a success.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AnswerLook {
    /// A capacity found: green.
    #[default]
    Found,
    /// A lower bound only (every point was carried): amber, as a warning.
    Bound,
    /// No point carried, or none judged: red, as an invalid run.
    Failed,
}

impl AnswerLook {
    /// The CSS class of the answer's box (`html/base.html`).
    fn class(self) -> &'static str {
        match self {
            AnswerLook::Found => "answer",
            AnswerLook::Bound => "answer-bound",
            AnswerLook::Failed => "answer-failed",
        }
    }
}

/// One row of a sweep's table.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepPagePoint {
    pub cells: Vec<String>,
    /// The point's `report.html`, relative to the sweep's page.
    pub link: Option<String>,
    /// Why the point's row is marked (`INVALID: ...`, `INTERRUPTED: ...`; empty: it is not).
    pub invalid: String,
}

fn environment() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    for (name, text) in [
        ("base.html", include_str!("html/base.html")),
        ("run.html", include_str!("html/run.html")),
        ("sweep.html", include_str!("html/sweep.html")),
        ("stats.html", include_str!("html/stats.html")),
    ] {
        env.add_template(name, text)
            .map_err(|e| Error::internal(format!("report template {name}: {e}")))?;
    }
    Ok(env)
}

fn render(name: &str, ctx: Value, out: &Path) -> Result<PathBuf> {
    let env = environment()?;
    let text = env
        .get_template(name)
        .and_then(|t| t.render(ctx))
        .map_err(|e| Error::internal(format!("report template {name}: {e:#}")))?;
    std::fs::write(out, text).map_err(|e| Error::write(out, e))?;
    Ok(out.to_path_buf())
}

/// The charts among `files` (their PNGs), embedded in the order given: the SVG beside a PNG
/// when it is the smaller file (line charts), else the PNG (scatter plots of many points).
fn images(files: &[PathBuf]) -> Result<Vec<Image>> {
    let mut out = Vec::new();
    for png in files {
        if png.extension().is_none_or(|e| e != "png") {
            continue;
        }
        let svg = png.with_extension("svg");
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
        let (path, mime) = match (size(&svg), size(png)) {
            (Some(s), Some(p)) if s < p => (svg, "image/svg+xml"),
            _ => (png.clone(), "image/png"),
        };
        let bytes = std::fs::read(&path).map_err(|e| Error::read(&path, e))?;
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        out.push(Image {
            name: png
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            src: Value::from_safe_string(format!("data:{mime};base64,{b64}")),
        });
    }
    Ok(out)
}

/// The console table's pieces grouped under their headers.
fn sections(items: Vec<Item>) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    for item in items {
        if let Item::Header { title } = item {
            out.push(Section {
                title,
                ..Section::default()
            });
            continue;
        }
        if out.is_empty() {
            out.push(Section::default());
        }
        let sec = out.last_mut().expect("a section was just pushed");
        match item {
            Item::Row { label, value } => sec.rows.push((label, value)),
            Item::Grid { head, rows } => sec.grids.push(Grid { head, rows }),
            Item::Text { text } => sec.text.push(text.trim_end().to_string()),
            Item::Header { .. } => {}
        }
    }
    out
}

/// What the page says about the run under its title.
fn meta(s: &Summary) -> Vec<(String, String)> {
    let r = &s.run;
    let mut m: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            m.push((k.to_string(), v));
        }
    };
    add("started", r.started_at.clone());
    add("endpoint", r.server.endpoint.clone());
    let (key, models) = served_models(s);
    add(key, models);
    add("API", r.server.api.map(|a| a.to_string()));
    add("trace", r.trace_path.clone());
    add("scale factor", r.scale_factor.map(|f| f.to_string()));
    add("seed", r.seed.map(|x| x.to_string()));
    add("requests scheduled", Some(s.scheduled.to_string()));
    m
}

/// The models the run's requests were served as, from its records (the summary's per-model
/// rows): `model: a` when one, `models: 2 served: a (n requests), b (m requests)` when
/// `--model-map` spread them; the run's one model setting when the records name none.
fn served_models(s: &Summary) -> (&'static str, Option<String>) {
    let served = s.models.as_ref().map_or(&[][..], |m| &m.served[..]);
    match served {
        [] => ("model", s.run.server.model.clone()),
        [one] => ("model", Some(one.model.clone())),
        many => {
            let each: Vec<String> = many
                .iter()
                .map(|r| format!("{} ({} requests)", r.model, r.requests))
                .collect();
            (
                "models",
                Some(format!("{} served: {}", many.len(), each.join(", "))),
            )
        }
    }
}

/// Write `report.html` into `dir`: the charts among `files` (PNGs embedded; [`FIRST_CHARTS`]
/// first), then the summary's tables, then the servers' chart under its own heading.
pub fn write_run_html(dir: &Path, s: &Summary, files: &[PathBuf]) -> Result<PathBuf> {
    let (server_plots, mut plots): (Vec<Image>, Vec<Image>) = images(files)?
        .into_iter()
        .partition(|i| i.name == SERVER_CHART);
    // Throughput and latency first, at the top of the page; the others in the order given.
    plots.sort_by_key(|i| {
        FIRST_CHARTS
            .iter()
            .position(|n| *n == i.name)
            .unwrap_or(FIRST_CHARTS.len())
    });
    let ctx = minijinja::context! {
        version => s.run.tool_version.clone(),
        generated => now_rfc3339(),
        started_at => s.run.started_at.clone(),
        meta => meta(s),
        invalid => s.invalid.clone(),
        warnings => s.warnings.clone(),
        sections => sections(console_items(s)),
        server_plots => server_plots,
        plots => plots,
    };
    render("run.html", ctx, &dir.join(REPORT_HTML))
}

/// Write a sweep's `report.html` into `dir`, with the charts among `files` embedded.
pub fn write_sweep_html(dir: &Path, page: &SweepPage, files: &[PathBuf]) -> Result<PathBuf> {
    let ctx = minijinja::context! {
        version => env!("CARGO_PKG_VERSION"),
        generated => now_rfc3339(),
        meta => page.meta.clone(),
        answer => page.answer.clone(),
        answer_class => page.look.class(),
        lead => page.lead.clone(),
        notes => page.notes.clone(),
        head => page.head.clone(),
        points => page.points.clone(),
        plots => images(files)?,
    };
    render("sweep.html", ctx, &dir.join(REPORT_HTML))
}

/// A table of a statistics page (a repeat set, a comparison).
#[derive(Debug, Serialize)]
struct StatsTable {
    title: String,
    text: String,
    head: Vec<String>,
    rows: Vec<StatsRow>,
}

#[derive(Debug, Serialize)]
struct StatsRow {
    cells: Vec<String>,
    /// `worse` (shown red), `better`, or empty.
    mark: &'static str,
    /// A link on the last cell.
    link: Option<String>,
}

/// A number of a statistics page: three decimals, none from 100,000 up.
fn num(v: Option<f64>) -> String {
    wide_or_na(v, 3)
}

/// Write a repeat set's `report.html` into `dir`: every headline metric's mean, 95% interval
/// and spread over the repeats, each repeat's value, and a link to each repeat's own page.
pub fn write_repeats_html(dir: &Path, set: &RepeatSet) -> Result<PathBuf> {
    let mut head: Vec<String> = [
        "metric",
        "mean",
        "95% CI low",
        "95% CI high",
        "std",
        "min",
        "max",
    ]
    .map(String::from)
    .to_vec();
    head.extend(set.repeats.iter().map(|r| format!("#{}", r.repeat)));
    let rows = set
        .metrics
        .iter()
        .map(|m| {
            let c = m.ci.as_ref();
            let mut cells = vec![
                m.label.clone(),
                num(c.map(|c| c.mean)),
                num(c.and_then(|c| c.ci_low)),
                num(c.and_then(|c| c.ci_high)),
                num(c.map(|c| c.std)),
                num(c.map(|c| c.min)),
                num(c.map(|c| c.max)),
            ];
            cells.extend(m.values.iter().map(|v| num(*v)));
            StatsRow {
                cells,
                mark: "",
                link: None,
            }
        })
        .collect();
    let runs = set
        .repeats
        .iter()
        .map(|r| {
            let page = Path::new(&r.dir).join(REPORT_HTML);
            let rel = Path::new(&r.dir)
                .file_name()
                .map(|d| Path::new(d).join(REPORT_HTML).display().to_string());
            StatsRow {
                cells: vec![
                    r.repeat.to_string(),
                    r.seed.to_string(),
                    r.cache.clone(),
                    r.exit_code.to_string(),
                    r.dir.clone(),
                ],
                mark: if r.exit_code == 0 { "" } else { "worse" },
                link: rel.filter(|_| page.is_file()),
            }
        })
        .collect();
    let ctx = minijinja::context! {
        version => env!("CARGO_PKG_VERSION"),
        generated => now_rfc3339(),
        title => format!("request-sim: {} repeats", set.repeats.len()),
        meta => vec![("confidence".to_string(), format!("{:.0}%, Student t over the repeats' values", set.level * 100.0))],
        notes => Vec::<String>::new(),
        tables => vec![
            StatsTable {
                title: "Headline metrics over the repeats".into(),
                text: "mean ± t·s/√n over the repeats (s: sample standard deviation); min and max are the spread".into(),
                head,
                rows,
            },
            StatsTable {
                title: "Repeats".into(),
                text: String::new(),
                head: ["repeat", "seed", "prefix cache before it", "exit status", "directory"].map(String::from).to_vec(),
                rows: runs,
            },
        ],
    };
    render("stats.html", ctx, &dir.join(REPORT_HTML))
}

/// A comparison's rows: each headline metric's A, B, change, 95% interval of the change and
/// verdict (worse rows red, better ones green).
fn verdict_rows(c: &Comparison) -> Vec<StatsRow> {
    c.verdicts
        .iter()
        .map(|v| StatsRow {
            cells: vec![
                v.label.clone(),
                num(v.a),
                num(v.b),
                change(v.change_pct()),
                change_interval(v.ci_pct()),
                v.verdict_text(),
            ],
            mark: match (v.worse(), v.significant()) {
                (Some(true), _) => "worse",
                (_, Some(true)) => "better",
                _ => "",
            },
            link: None,
        })
        .collect()
}

/// Write a comparison's page to `path`: each headline metric's A, B, change, 95% interval of
/// the change and verdict (worse rows red), the method, the settings that differ.
pub fn write_compare_html(path: &Path, a: &str, b: &str, c: &Comparison) -> Result<PathBuf> {
    let rows = verdict_rows(c);
    let mut notes: Vec<String> = c
        .differences
        .iter()
        .map(|(k, x, y)| format!("configurations differ: {k} {x} (A) vs {y} (B)"))
        .collect();
    notes.extend(c.notes.iter().cloned());
    let ctx = minijinja::context! {
        version => env!("CARGO_PKG_VERSION"),
        generated => now_rfc3339(),
        title => "request-sim: run comparison",
        meta => vec![("A".to_string(), a.to_string()), ("B".to_string(), b.to_string())],
        notes => notes,
        tables => vec![StatsTable {
            title: "Significance at 95%".into(),
            text: format!("method: {}", super::compare::method_words(c)),
            head: ["metric", "A", "B", "change", "95% CI of change", "verdict"].map(String::from).to_vec(),
            rows,
        }],
    };
    render("stats.html", ctx, path)
}

/// Write an experiment's page, `dir/report.html`: its points (linked to their own pages)
/// and each point's verdicts against the baseline.
pub fn write_experiment_html(
    dir: &Path,
    r: &super::experiment::ExperimentResult,
) -> Result<PathBuf> {
    let points = r
        .points
        .iter()
        .map(|p| {
            let page = Path::new(&p.dir).join(REPORT_HTML);
            StatsRow {
                cells: vec![
                    p.name.clone(),
                    p.repeats.to_string(),
                    p.exit_code.to_string(),
                    if p.overrides.is_empty() {
                        "(the base run)".into()
                    } else {
                        p.overrides.join(" ")
                    },
                    p.dir.clone(),
                ],
                mark: if p.exit_code == 0 { "" } else { "worse" },
                link: Path::new(&p.name)
                    .join(REPORT_HTML)
                    .to_str()
                    .map(String::from)
                    .filter(|_| page.is_file()),
            }
        })
        .collect();
    let mut tables = vec![StatsTable {
        title: "Points".into(),
        text: String::new(),
        head: [
            "point",
            "repeats",
            "exit status",
            "settings over the base",
            "directory",
        ]
        .map(String::from)
        .to_vec(),
        rows: points,
    }];
    let mut notes = Vec::new();
    for c in &r.comparisons {
        let Some(cmp) = &c.comparison else {
            notes.push(format!(
                "{} not compared with {}: {}",
                c.point,
                c.baseline,
                c.error.as_deref().unwrap_or("no comparison")
            ));
            continue;
        };
        let rows = verdict_rows(cmp);
        let differ: Vec<String> = cmp
            .differences
            .iter()
            .map(|(k, x, y)| format!("{k} {x} → {y}"))
            .collect();
        tables.push(StatsTable {
            title: format!("{} against {} (baseline)", c.point, c.baseline),
            text: format!(
                "method: {}{}",
                super::compare::method_words(cmp),
                if differ.is_empty() {
                    String::new()
                } else {
                    format!("; settings that differ: {}", differ.join(", "))
                }
            ),
            head: [
                "metric",
                c.baseline.as_str(),
                c.point.as_str(),
                "change",
                "95% CI of change",
                "verdict",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        });
    }
    let ctx = minijinja::context! {
        version => env!("CARGO_PKG_VERSION"),
        generated => now_rfc3339(),
        title => format!("request-sim: experiment of {} points", r.points.len()),
        meta => vec![("file".to_string(), r.file.clone()), ("started".to_string(), r.started_at.clone())],
        notes => notes,
        tables => tables,
    };
    render("stats.html", ctx, &dir.join(REPORT_HTML))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_group_under_their_headers() {
        let items = vec![
            Item::Header { title: "A".into() },
            Item::Row {
                label: "x".into(),
                value: "1".into(),
            },
            Item::Text {
                text: "free\n".into(),
            },
            Item::Header { title: "B".into() },
            Item::Grid {
                head: vec!["h".into()],
                rows: vec![vec!["2".into()]],
            },
        ];
        let s = sections(items);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].rows, vec![("x".to_string(), "1".to_string())]);
        assert_eq!(s[0].text, vec!["free".to_string()]);
        assert_eq!(s[1].grids[0].rows[0][0], "2");
    }

    #[test]
    fn text_is_escaped_and_images_are_embedded() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("chart.png");
        std::fs::write(&png, [0x89, b'P', b'N', b'G']).unwrap();
        let page = SweepPage {
            answer: "capacity: <b>scale 2</b>".into(),
            head: vec!["scale".into()],
            points: vec![SweepPagePoint {
                cells: vec!["2".into()],
                link: Some("scale-2/report.html".into()),
                invalid: String::new(),
            }],
            ..SweepPage::default()
        };
        // A smaller SVG beside a PNG is taken instead; a lone SVG is not a chart of the list.
        let png2 = dir.path().join("line.png");
        std::fs::write(&png2, [0u8; 64]).unwrap();
        std::fs::write(dir.path().join("line.svg"), "<svg/>").unwrap();
        std::fs::write(dir.path().join("x.svg"), "<svg/>").unwrap();
        let files = [png, png2, dir.path().join("x.svg")];
        let out = write_sweep_html(dir.path(), &page, &files).unwrap();
        let html = std::fs::read_to_string(out).unwrap();
        assert!(
            html.contains("capacity: &lt;b&gt;scale 2&lt;&#x2f;b&gt;"),
            "{html}"
        );
        assert!(
            html.contains("src=\"data:image/png;base64,iVBORw==\""),
            "{html}"
        );
        assert!(
            html.contains("src=\"data:image/svg+xml;base64,PHN2Zy8+\""),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"scale-2&#x2f;report.html\">"),
            "{html}"
        );
        assert_eq!(html.matches("data:image").count(), 2);
    }
}
