//! The output group of the settings ([`OutputConfig`]): the records file and the summary beside
//! it, the result files, the report's percentiles and goodput SLOs ([`report_config`], shared
//! with `request-sim report`), the console and the live metrics page.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{LiveMetricsFlags, OutputArgs, ReportFlags};
use crate::stats::ReportConfig;
use crate::{Error, Result};

/// Where the run's records, summary and files go, and what the console shows.
#[derive(Debug, Clone)]
pub struct OutputConfig {
    /// `--output-path`: the records JSONL.
    pub records_path: PathBuf,
    pub summary_path: PathBuf,
    pub result_dir: Option<PathBuf>,
    /// `--export`: other tools' result files written into `result_dir`.
    pub exports: Vec<crate::report::export::ExportKind>,
    /// `--save-prompts`: where the built prompts are saved as a `messages` trace.
    pub save_prompts: Option<PathBuf>,
    pub record_itl: bool,
    /// Percentiles and goodput SLOs of the summary.
    pub report: ReportConfig,
    pub quiet: bool,
    /// `--metrics-port`: the live client metrics page (`None`: not served).
    pub live_metrics: Option<LiveMetricsConfig>,
}

/// `--metrics-port`, `--metrics-host`, `--metrics-run-id`, `--metrics-linger`.
#[derive(Debug, Clone)]
pub struct LiveMetricsConfig {
    pub addr: std::net::SocketAddr,
    pub run_id: Option<String>,
    pub linger: Duration,
}

impl OutputConfig {
    /// The group from its flags, with the paths ([`output_paths`]), the report
    /// ([`report_settings`]) and the live metrics page ([`live_metrics`]) checked.
    pub(super) fn new(
        o: OutputArgs,
        (records_path, summary_path): (PathBuf, PathBuf),
        report: ReportConfig,
        live_metrics: Option<LiveMetricsConfig>,
    ) -> OutputConfig {
        OutputConfig {
            records_path,
            summary_path,
            result_dir: o.report.result_dir,
            exports: o.report.export,
            save_prompts: o.save_prompts,
            record_itl: o.record_itl,
            report,
            quiet: o.quiet,
            live_metrics,
        }
    }
}

/// The live metrics page's settings (`None` without `--metrics-port`).
pub(super) fn live_metrics(f: &LiveMetricsFlags) -> Result<Option<LiveMetricsConfig>> {
    let Some(port) = f.metrics_port else {
        return Ok(None);
    };
    let host: std::net::IpAddr = f.metrics_host.trim().parse().map_err(|_| {
        Error::config(format!(
            "--metrics-host {:?}: not an IP address (e.g. 127.0.0.1, or 0.0.0.0 for every interface)",
            f.metrics_host
        ))
    })?;
    if !(f.metrics_linger.is_finite() && (0.0..=3600.0).contains(&f.metrics_linger)) {
        return Err(Error::config(format!(
            "--metrics-linger {}: expected seconds from 0 to 3600",
            f.metrics_linger
        )));
    }
    if f.metrics_run_id
        .as_deref()
        .is_some_and(|r| r.trim().is_empty())
    {
        return Err(Error::config("--metrics-run-id: empty"));
    }
    Ok(Some(LiveMetricsConfig {
        addr: std::net::SocketAddr::new(host, port),
        run_id: f.metrics_run_id.clone(),
        linger: Duration::from_secs_f64(f.metrics_linger),
    }))
}

/// The default records file in `dir` for a run at `ts` (`crate::stats::file_stamp`): a new
/// file, `replay-<ts>.jsonl`, or the next free number (`-2`, `-3`, ...) when a run in the same
/// second (a sweep's points, a script) took it, never the other run's records. With `page`
/// (the demo, which writes its result directory beside its records,
/// [`demo_result_dir`]) the directory of that name must be free too.
fn default_records(dir: &Path, ts: &str, page: bool) -> PathBuf {
    let free = |p: &PathBuf| {
        !p.exists()
            && !PathBuf::from(format!("{}.summary.json", p.display())).exists()
            && (!page || !demo_result_dir(p).exists())
    };
    (1..)
        .map(|n| match n {
            1 => dir.join(format!("replay-{ts}.jsonl")),
            n => dir.join(format!("replay-{ts}-{n}.jsonl")),
        })
        .find(free)
        .unwrap_or_else(|| dir.join(format!("replay-{ts}.jsonl")))
}

/// The demo's result directory (its `report.html`, plots and tables): beside its default
/// records, of the same name without `.jsonl` (`results/replay-<time>/`).
pub(super) fn demo_result_dir(records: &Path) -> PathBuf {
    records.with_extension("")
}

/// The records file and the summary beside it. `demo_page`: the run is the demo (the built-in
/// simulator and trace, no `--output-path`, no `--result-dir`), whose records get a name whose
/// result directory is free too.
pub(super) fn output_paths(a: &OutputArgs, demo_page: bool) -> Result<(PathBuf, PathBuf)> {
    let output_path = match &a.output_path {
        Some(p) => p.clone(),
        None => default_records(Path::new("results"), &crate::stats::file_stamp(), demo_page),
    };
    let summary_path = a
        .summary_path
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.summary.json", output_path.display())));
    if summary_path == output_path {
        return Err(Error::config(
            "--summary-path must differ from --output-path",
        ));
    }
    Ok((output_path, summary_path))
}

/// Every file a replay writes, checked before anything is sent: none is a file it reads
/// (`inputs`: the trace, `--dataset-path`, and the run file, `--config`), and no two are one file (`-o rd/summary.json --result-dir rd` would
/// write the summary over the records). The one pair allowed: `--summary-path` at the result
/// directory's `summary.json` (the same summary twice; `--repeat` writes it so).
pub(super) fn check_output_files(
    a: &OutputArgs,
    (records, summary): (&Path, &Path),
    inputs: &[(&Path, &str)],
) -> Result<()> {
    if !a.overwrite {
        refuse_existing_records(records)?;
    }
    let outputs = output_files(a, records, summary);
    for (flag, path) in &outputs {
        for (input, what) in inputs {
            crate::util::refuse_input_as_output(path, flag, input, what)?;
        }
    }
    let result_summary = a.report.result_dir.as_ref().map(|d| d.join("summary.json"));
    for (i, (flag, path)) in outputs.iter().enumerate() {
        for (other_flag, other) in &outputs[..i] {
            let summary_twice = *other_flag == "--summary-path"
                && result_summary.as_deref() == Some(path.as_path());
            if !summary_twice && crate::util::same_output(path, other) {
                return Err(Error::config(format!(
                    "{}: {other_flag} ({}) and {flag} name the same file: the run would write one over the other; give them different paths",
                    path.display(),
                    other.display()
                )));
            }
        }
    }
    Ok(())
}

/// A records file already at `records` (or at a symbolic link's target) would be replaced, its
/// run's records lost: refused without `--overwrite`. `/dev/null` and other files that are not
/// regular files hold nothing to lose.
fn refuse_existing_records(records: &Path) -> Result<()> {
    if !std::fs::metadata(records).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let link = std::fs::read_link(records)
        .map(|t| format!(" (a symbolic link to {})", t.display()))
        .unwrap_or_default();
    Err(Error::config(format!(
        "{}{link}: --output-path names a file that exists: the run would replace it; give another path, remove it, or pass --overwrite to replace it",
        records.display()
    )))
}

/// The files a replay writes, each with the flag that names it: records, summary,
/// `--save-prompts`, the server metrics JSONL (beside the records, or in the result directory)
/// and the result directory's files (`report::files::result_dir_files`).
fn output_files(a: &OutputArgs, records: &Path, summary: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut out = vec![
        ("--output-path", records.to_path_buf()),
        ("--summary-path", summary.to_path_buf()),
    ];
    if let Some(p) = &a.save_prompts {
        out.push(("--save-prompts", p.clone()));
    }
    match &a.report.result_dir {
        Some(dir) => out.extend(
            crate::report::files::result_dir_files(dir, &a.report.export)
                .into_iter()
                .map(|p| ("--result-dir", p)),
        ),
        None => {
            let mut beside = records.as_os_str().to_owned();
            beside.push(".server_metrics.jsonl");
            out.push(("the server metrics (beside --output-path)", beside.into()));
        }
    }
    out
}

/// The report the report flags ask for (`replay` and `report`); `default_percentiles` when
/// none are given.
pub fn report_config(f: &ReportFlags, default_percentiles: &[f64]) -> Result<ReportConfig> {
    let percentiles =
        crate::stats::Percentiles::or_default(f.metric_percentile.clone(), default_percentiles)
            .map_err(Error::config)?;
    let slo = if f.goodput.is_empty() {
        crate::stats::Slo::default()
    } else {
        crate::stats::Slo::parse(&f.goodput).map_err(Error::config)?
    };
    if !f.export.is_empty() && f.result_dir.is_none() {
        return Err(Error::config(
            "--export writes its files into --result-dir: pass --result-dir DIR",
        ));
    }
    Ok(ReportConfig {
        percentiles,
        slo,
        window: f.measure_window,
    })
}

/// Percentiles and goodput SLOs (`--goodput`, or the anchor's `--ttft-slo`/`--tpot-slo`).
pub(super) fn report_settings(a: &OutputArgs) -> Result<ReportConfig> {
    let mut report = report_config(&a.report, &crate::stats::DEFAULT_PERCENTILES)?;
    if report.slo.ttft_ms.is_none() {
        report.slo.ttft_ms = a.ttft_slo.map(|s| s * 1e3);
    }
    if report.slo.tpot_ms.is_none() {
        report.slo.tpot_ms = a.tpot_slo.map(|s| s * 1e3);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_records_take_the_next_free_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ts = "20260101-000000";
        assert_eq!(
            default_records(d, ts, false),
            d.join(format!("replay-{ts}.jsonl"))
        );
        // Another run's summary at the name: the next number.
        std::fs::write(d.join(format!("replay-{ts}.jsonl.summary.json")), "{}").unwrap();
        assert_eq!(
            default_records(d, ts, false),
            d.join(format!("replay-{ts}-2.jsonl"))
        );
        // The demo's result directory of that name exists: the next number, for the demo only.
        std::fs::create_dir(d.join(format!("replay-{ts}-2"))).unwrap();
        assert_eq!(
            default_records(d, ts, false),
            d.join(format!("replay-{ts}-2.jsonl"))
        );
        let demo = default_records(d, ts, true);
        assert_eq!(demo, d.join(format!("replay-{ts}-3.jsonl")));
        assert_eq!(demo_result_dir(&demo), d.join(format!("replay-{ts}-3")));
    }
}
