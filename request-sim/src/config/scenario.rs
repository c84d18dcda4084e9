//! A scenario (`crate::scenario`: its rules and its stamp) applied to a replay's flags
//! ([`apply`]), before they are validated: each rule
//! either fills in a flag left at its default or, when a flag given breaks it, is a
//! [`Violation`] (refused, or with `--scenario-override` kept and stamped). The rules in the
//! order AgentX's validator applies them:
//!
//! - `timing` (agentic replay at the trace's own pace): no `--rate`, `--retime`,
//!   `--rate-series`, `--session-rate`, no `--scale-factor` other than 1;
//! - `streaming`: not `--no-stream`;
//! - `ignore_eos`: not `--no-exact-output` (request-sim's exact output sends `ignore_eos` and
//!   `min_tokens`), no `ignore_eos: false` in `--extra-body`;
//! - `input_truncation`: no `--max-input-length`, `--prompt-scale`, `--prefix-scale`;
//! - `loader`: the trace is a Weka corpus (a directory, a file, the published rows);
//! - `server_token_counts`: not `--allow-missing-usage`;
//! - `cache_bust`: every lane's conversation has its own blocks from the first turn on (a
//!   repeat is its own pass), the tools + system blocks shared (`--share-system-prefix`, set);
//! - `duration`: `--time-in-secs` at least the floor (default filled in);
//! - `trajectory_start`, `warmup`, `trace_idle_gap_cap`, `seed`, `grace`: defaults filled in,
//!   values given kept.

use crate::cli::{ReplayArgs, ScenarioArgs};
use crate::scenario::{Spec, Stamp, Violation};

/// The scenario `--scenario` names, applied to `a`: the stamp (valid when no rule is broken),
/// or, without `--scenario-override`, the violations as one message. `None` without
/// `--scenario`.
pub fn apply(a: &mut ReplayArgs) -> Result<Option<Stamp>, String> {
    let ScenarioArgs {
        scenario: Some(name),
        scenario_override,
    } = a.scenario.clone()
    else {
        return Ok(None);
    };
    let spec = Spec::named(&name)?;
    let mut v = Vec::new();
    let mut applied = Vec::new();
    timing(a, &mut v);
    applied.push("timing");
    locks(a, &mut v, &mut applied)?;
    a.trace.share_system_prefix = true;
    applied.push("cache_bust");
    let duration = *a
        .schedule
        .time_in_secs
        .get_or_insert(spec.default_duration_s);
    if duration < spec.min_duration_s {
        v.push(broken(
            "duration",
            "--time-in-secs",
            &format!("{duration} s"),
            &format!("at least {} s", spec.min_duration_s),
        ));
    }
    applied.push("duration");
    defaults(spec, a);
    applied.extend([
        "trajectory_start",
        "warmup",
        "trace_idle_gap_cap",
        "seed",
        "grace",
    ]);
    if !v.is_empty() && !scenario_override {
        let list: Vec<String> = v.iter().map(|x| format!("  - {x}")).collect();
        return Err(format!(
            "--scenario {}: {} rule{} broken:\n{}\npass --scenario-override to run anyway (the run is then stamped submission_valid: false)",
            spec.name,
            v.len(),
            if v.len() == 1 { "" } else { "s" },
            list.join("\n")
        ));
    }
    let (lo, hi) = a.trace.trajectory_start.unwrap_or(spec.start_ratios);
    Ok(Some(Stamp {
        scenario: spec.name.into(),
        applied: applied.into_iter().map(str::to_owned).collect(),
        duration_s: duration,
        start_ratios: (lo, hi),
        warmup_requests_per_lane: a.trace.warmup_requests_per_lane,
        max_idle_gap_s: a.trace.max_idle_gap,
        users: a.trace.users.first().copied().unwrap_or(1),
        overridden: scenario_override,
        submission_valid: v.is_empty(),
        violations: v,
        notes: vec![format!(
            "AgentX's system idle-gap cap ({} s of globally idle replay) is not applied: each user's gaps are capped by --max-idle-gap alone",
            spec.system_idle_gap_cap_s
        )],
    }))
}

/// The locks that are not about time: streaming, ignore-EOS, inputs as recorded, the loader,
/// the server's token counts (each broken one into `v`, each checked one into `applied`).
fn locks(
    a: &mut ReplayArgs,
    v: &mut Vec<Violation>,
    applied: &mut Vec<&'static str>,
) -> Result<(), String> {
    if a.requests.no_stream {
        v.push(broken(
            "streaming",
            "--no-stream",
            "given",
            "streaming answers",
        ));
    }
    a.requests.stream = !a.requests.no_stream;
    applied.push("streaming");
    ignore_eos(a, v);
    applied.push("ignore_eos");
    let r = &a.trace.reshape;
    for (flag, given) in [
        (
            "--max-input-length",
            r.max_input_length.map(|x| x.to_string()),
        ),
        ("--prompt-scale", r.prompt_scale.map(|x| x.to_string())),
        ("--prefix-scale", r.prefix_scale.map(|x| x.to_string())),
    ] {
        if let Some(g) = given {
            v.push(broken(
                "input_truncation",
                flag,
                &g,
                "the trace's input lengths",
            ));
        }
    }
    applied.push("input_truncation");
    loader(a, v)?;
    applied.push("loader");
    if a.requests.allow_missing_usage {
        v.push(broken(
            "server_token_counts",
            "--allow-missing-usage",
            "given",
            "the server's token counts (usage)",
        ));
    }
    applied.push("server_token_counts");
    Ok(())
}

fn broken(rule: &str, flag: &str, got: &str, required: &str) -> Violation {
    Violation {
        rule: rule.into(),
        flag: flag.into(),
        got: got.into(),
        required: required.into(),
    }
}

/// `timing`: the trace's own pace, closed-loop users.
fn timing(a: &ReplayArgs, v: &mut Vec<Violation>) {
    let r = &a.trace.reshape;
    let pace = "the trace's own pace (closed-loop users)";
    if let Some(x) = r.rate {
        v.push(broken("timing", "--rate", &x.to_string(), pace));
    }
    if let Some(x) = &r.retime {
        v.push(broken("timing", "--retime", &format!("{x:?}"), pace));
    }
    if let Some(x) = &r.rate_series {
        v.push(broken(
            "timing",
            "--rate-series",
            &x.display().to_string(),
            pace,
        ));
    }
    if let Some(x) = a.trace.session_rate {
        v.push(broken("timing", "--session-rate", &x.to_string(), pace));
    }
    if a.schedule.scale_factor != 1.0 {
        v.push(broken(
            "timing",
            "--scale-factor",
            &a.schedule.scale_factor.to_string(),
            "1 (the trace's delays kept)",
        ));
    }
}

/// `ignore_eos`: exactly the recorded output lengths.
fn ignore_eos(a: &ReplayArgs, v: &mut Vec<Violation>) {
    if a.requests.no_exact_output {
        v.push(broken(
            "ignore_eos",
            "--no-exact-output",
            "given",
            "ignore_eos (exact output lengths)",
        ));
    }
    let falsy = a
        .requests
        .extra_body
        .as_ref()
        .and_then(|b| b.get("ignore_eos"))
        .is_some_and(|x| x == &serde_json::Value::Bool(false));
    if falsy {
        v.push(broken(
            "ignore_eos",
            "--extra-body ignore_eos",
            "false",
            "ignore_eos: true",
        ));
    }
}

/// `loader`: a Weka corpus (AgentX's `weka_trace` and `semianalysis_cc_traces_weka*`
/// loaders). No trace at all cannot be overridden (AgentX refuses a synthetic dataset even
/// with its override).
fn loader(a: &ReplayArgs, v: &mut Vec<Violation>) -> Result<(), String> {
    let Some(path) = &a.trace.dataset_path else {
        return Err(
            "--scenario needs --dataset-path: a Weka corpus (a directory of trace files, or the published cc-traces-weka rows); the built-in demo trace is not one, and --scenario-override does not change that".into(),
        );
    };
    let named = a.trace.format.dataset.map(|f| f.name().to_owned());
    let is_weka = match &named {
        Some(n) => n == "weka",
        None => crate::trace::formats::weka::is_corpus(path),
    };
    if !is_weka {
        v.push(broken(
            "loader",
            "--dataset-path",
            &named.unwrap_or_else(|| format!("{} (not a Weka corpus)", path.display())),
            "a Weka corpus (weka, cc-traces-weka rows)",
        ));
    }
    Ok(())
}

/// The defaults the scenario fills in where the flags were left at theirs.
fn defaults(spec: &Spec, a: &mut ReplayArgs) {
    if a.trace.users.is_empty() {
        a.trace.users = vec![1];
    }
    if a.trace.trajectory_start.is_none() {
        a.trace.trajectory_start = Some(spec.start_ratios);
    }
    if a.trace.warmup_requests_per_lane == 0 {
        a.trace.warmup_requests_per_lane = spec.warmup_requests_per_lane;
    }
    if a.trace.max_idle_gap.is_none() {
        a.trace.max_idle_gap = spec.trace_idle_gap_cap_s;
    }
    if a.prompts.seed.is_none() {
        a.prompts.seed = spec.seed;
    }
    if (a.requests.grace_secs - crate::cli::DEFAULT_GRACE_SECS).abs() < 1e-9 {
        a.requests.grace_secs = spec.grace_s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> ReplayArgs {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("c.json");
        std::fs::write(
            &trace,
            r#"{"id":"c","block_size":64,"hash_id_scope":"local","requests":[{"t":0,"type":"s","in":64,"out":1,"hash_ids":[1]}]}"#,
        )
        .unwrap();
        let mut v = vec![
            "request-sim".to_string(),
            "replay".into(),
            "--dataset-path".into(),
            trace.display().to_string(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        let cli = crate::cli::Cli::try_parse_from(&v).unwrap();
        let _kept = dir.keep();
        match cli.command {
            crate::cli::Command::Replay(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_fill_in_and_values_given_stay() {
        let mut a = args(&["--scenario", "agentx", "--users", "8"]);
        let s = apply(&mut a).unwrap().unwrap();
        assert!(s.submission_valid);
        assert_eq!(a.schedule.time_in_secs, Some(3600.0));
        assert_eq!(a.trace.trajectory_start, Some((0.25, 0.75)));
        assert_eq!(a.trace.warmup_requests_per_lane, 10);
        assert_eq!(a.trace.max_idle_gap, Some(300.0));
        assert_eq!((a.prompts.seed, a.requests.grace_secs), (Some(42), 30.0));
        assert!(a.trace.share_system_prefix && a.requests.stream);
        let mut a = args(&[
            "--scenario",
            "inferencex-agentx-mvp",
            "--time-in-secs",
            "1000",
            "--max-idle-gap",
            "60",
        ]);
        let s = apply(&mut a).unwrap().unwrap();
        assert!(s.submission_valid);
        assert_eq!(a.trace.trajectory_start, Some((0.0, 1.0)));
        assert_eq!(a.trace.warmup_requests_per_lane, 0);
        assert_eq!(
            (s.duration_s, s.max_idle_gap_s, s.users),
            (1000.0, Some(60.0), 1)
        );
    }

    #[test]
    fn a_broken_rule_is_refused_or_stamped() {
        let e = apply(&mut args(&["--scenario", "agentx", "--time-in-secs", "60"])).unwrap_err();
        assert!(
            e.contains("1 rule broken")
                && e.contains(
                    "duration: --time-in-secs is 60 s, the scenario requires at least 900 s"
                ),
            "{e}"
        );
        let mut a = args(&[
            "--scenario",
            "agentx",
            "--scenario-override",
            "--time-in-secs",
            "60",
            "--no-stream",
            "--scale-factor",
            "2",
            "--max-input-length",
            "1000",
        ]);
        let s = apply(&mut a).unwrap().unwrap();
        assert!(!s.submission_valid && s.overridden);
        assert_eq!(
            s.violated_rules(),
            "timing, streaming, input_truncation, duration"
        );
        let mut a = args(&[
            "--scenario",
            "agentx",
            "--unsafe-override",
            "--no-exact-output",
        ]);
        assert_eq!(
            apply(&mut a).unwrap().unwrap().violated_rules(),
            "ignore_eos"
        );
    }
}
