//! The `client` binary: request-sim with the command line of blitz-serving's trace-replayer
//! (the anchor). Its flags are those of `replay` ([`ReplayArgs`]); what differs is a few
//! defaults, set here before the settings are validated as for `replay`:
//!
//! - no streaming unless `--stream`;
//! - a 60 s run unless `--time-in-secs`;
//! - records in `./log/output.jsonl` unless `--output-path`;
//! - percentiles 90, 95, 99 unless `--metric-percentile`;
//! - without `--request-timeout`, the timeout max(15 s, ttft_slo + tpot_slo × output_length)
//!   with `--ttft-slo` 5 s and `--tpot-slo` 0.06 s when not given (the SLOs of the report
//!   stay those given).

use std::path::PathBuf;

use clap::Parser;

use crate::cli::ReplayArgs;
use crate::config::{ReplayConfig, TimeoutRule};
use crate::Result;

/// The `client` binary: the anchor's command line, with the anchor's defaults.
#[derive(Debug, Parser)]
#[command(
    name = "client",
    version,
    about = "request-sim with the blitz-serving trace-replayer command line"
)]
pub struct ClientCli {
    #[command(flatten)]
    pub args: ReplayArgs,
}

/// The anchor's run length without `--time-in-secs`, seconds.
const TIME_LIMIT_S: f64 = 60.0;
/// The anchor's records file without `--output-path`.
const OUTPUT_PATH: &str = "./log/output.jsonl";
/// The anchor's percentiles without `--metric-percentile`.
const PERCENTILES: [f64; 3] = [90.0, 95.0, 99.0];
/// The anchor's TTFT and TPOT SLOs (seconds) for the request timeout, when not given.
const TTFT_SLO_S: f64 = 5.0;
const TPOT_SLO_S: f64 = 0.06;

/// The settings of a `client` command line: `replay`'s, with the anchor's defaults.
pub fn config(mut a: ReplayArgs) -> Result<ReplayConfig> {
    // The anchor streams only with --stream (`replay` streams unless --no-stream).
    a.requests.no_stream |= !a.requests.stream;
    a.schedule.time_in_secs.get_or_insert(TIME_LIMIT_S);
    a.output
        .output_path
        .get_or_insert_with(|| PathBuf::from(OUTPUT_PATH));
    // The anchor writes its output file over the last run's.
    a.output.overwrite = true;
    let percentiles = &mut a.output.report.metric_percentile;
    if percentiles.as_ref().is_none_or(Vec::is_empty) {
        *percentiles = Some(PERCENTILES.to_vec());
    }
    // The timeout follows the SLOs, defaulted; the report's SLOs stay those given.
    let timeout = a
        .requests
        .request_timeout
        .is_none()
        .then(|| TimeoutRule::FromSlo {
            ttft_s: a.output.ttft_slo.unwrap_or(TTFT_SLO_S),
            tpot_s: a.output.tpot_slo.unwrap_or(TPOT_SLO_S),
        });
    // The summary re-runs the run with these defaults.
    let s = &mut a.run_file.settings;
    s.set("no-stream", a.requests.no_stream);
    s.set("time-in-secs", a.schedule.time_in_secs);
    s.set("overwrite", true);
    s.set_path("output-path", a.output.output_path.as_deref());
    s.set(
        "metric-percentile",
        a.output.report.metric_percentile.clone(),
    );
    let mut cfg = ReplayConfig::from_args(a)?;
    if let Some(t) = timeout {
        cfg.requests.timeout = t;
    }
    Ok(cfg)
}

/// Run the `client` binary's command line: validate, replay, the exit code.
pub fn run(cli: ClientCli) -> Result<u8> {
    crate::commands::run_replay(config(cli.args)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(args: &[&str]) -> ReplayConfig {
        let argv = std::iter::once("client").chain(args.iter().copied());
        config(ClientCli::try_parse_from(argv).unwrap().args).unwrap()
    }

    #[test]
    fn the_anchor_defaults_apply_only_when_not_given() {
        let c = client(&[]);
        assert!(!c.requests.stream);
        assert_eq!(
            c.schedule.time_limit,
            Some(std::time::Duration::from_secs(60))
        );
        assert_eq!(c.output.records_path, PathBuf::from(OUTPUT_PATH));
        assert_eq!(&*c.output.report.percentiles, &PERCENTILES);
        assert_eq!(
            c.requests.timeout,
            TimeoutRule::FromSlo {
                ttft_s: 5.0,
                tpot_s: 0.06
            }
        );
        // The defaulted SLOs set the timeout only, not the report's goodput.
        assert_eq!(c.output.report.slo.ttft_ms, None);
        let c = client(&["--stream", "--request-timeout", "30", "-t", "5"]);
        assert!(c.requests.stream);
        assert_eq!(
            c.requests.timeout,
            TimeoutRule::Fixed(std::time::Duration::from_secs(30))
        );
        assert_eq!(
            c.schedule.time_limit,
            Some(std::time::Duration::from_secs(5))
        );
    }
}
