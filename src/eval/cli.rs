//! `permit eval` end to end: load cases, build the engine (real, recording or replaying models),
//! run, write the outputs, compare with a baseline.
//!
//! Exit codes: 0 done; 1 a config, model or output error; 2 a case file that does not parse
//! (nothing ran); 3 `--fail-on-regression` and false allows or false denies rose.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;

use crate::config::{Config, UnknownToolAction};
use crate::engine::Engine;
use crate::model::cache::{AnswerCache, RecordingModel, ReplayModel, SharedCache};
use crate::model::{self, DecisionModel};

/// `permit eval`'s arguments.
#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Case files (`.jsonl`, one case a line; see evals/README.md).
    #[arg(required = true)]
    pub cases: Vec<PathBuf>,
    /// Config file (TOML). Defaults to $PERMIT_CONFIG, else the built-in defaults.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Directory for results.jsonl, report.md, report.json, p_allow.svg and sweep.svg.
    #[arg(long, default_value = "eval-out")]
    pub out: PathBuf,
    /// Cases decided at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// A previous results.jsonl: list verdict flips and cases whose input changed.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Exit 3 when false allows or false denies rose against --baseline.
    #[arg(long, requires = "baseline")]
    pub fail_on_regression: bool,
    /// Route unknown tools to the classifier instead of a person (`tools.unknown = "classify"`),
    /// so general tool-use data (AgentDojo) measures the models.
    #[arg(long)]
    pub classify_unknown: bool,
    /// Record every model answer into this cache file (created or extended).
    #[arg(long, conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Answer from this cache file only: no model is loaded or called; a missing answer is an error.
    #[arg(long)]
    pub replay: Option<PathBuf>,
}

const EXIT_BAD_CASES: u8 = 2;
const EXIT_REGRESSION: u8 = 3;

type Models = (Option<Arc<dyn DecisionModel>>, Option<Arc<dyn DecisionModel>>);

fn models(config: &Config, args: &EvalArgs, recorder: Option<&SharedCache>) -> anyhow::Result<Models> {
    if let Some(path) = &args.replay {
        let cache = Arc::new(AnswerCache::load(path)?);
        let replay = |stage: &str, configured: bool| -> anyhow::Result<Option<Arc<dyn DecisionModel>>> {
            if !configured {
                return Ok(None);
            }
            Ok(Some(Arc::new(ReplayModel::new(stage, cache.clone(), path)?)))
        };
        return Ok((replay("screen", config.screen.is_some())?, replay("review", config.review.is_some())?));
    }
    let build = |stage: &str,
                 model_config: Option<&crate::config::ModelConfig>|
     -> anyhow::Result<Option<Arc<dyn DecisionModel>>> {
        let Some(model_config) = model_config else { return Ok(None) };
        let built = model::build(model_config).map_err(anyhow::Error::msg)?;
        Ok(Some(match recorder {
            Some(cache) => Arc::new(RecordingModel::new(stage, built, cache.clone())),
            None => built,
        }))
    };
    Ok((
        build("screen", config.screen.as_ref().map(|screen| &screen.model))?,
        build("review", config.review.as_ref().map(|review| &review.model))?,
    ))
}

pub fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let cases = match super::load_cases(&args.cases) {
        Ok(cases) => cases,
        Err(error) => {
            eprintln!("permit: {error}");
            return Ok(ExitCode::from(EXIT_BAD_CASES));
        }
    };
    let mut config = Config::load(args.config.as_deref())?;
    if args.classify_unknown {
        config.tools.unknown = UnknownToolAction::Classify;
    }
    let recorder: Option<SharedCache> = match &args.record {
        Some(path) => Some(Arc::new(Mutex::new(AnswerCache::load(path)?))),
        None => None,
    };
    let (screen, review) = models(&config, &args, recorder.as_ref())?;
    let engine = Arc::new(Engine::with_models(config, screen, review).map_err(anyhow::Error::msg)?);
    let baseline = args.baseline.as_deref().map(super::read_results).transpose()?;

    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let started = Instant::now();
    let results = runtime.block_on(super::run(engine, &cases, args.concurrency));
    let wall = started.elapsed();

    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create `{}`", args.out.display()))?;
    super::write_results(&args.out.join("results.jsonl"), &results)?;
    let report = super::report::compute(&results);
    let comparison = baseline.as_deref().map(|baseline| super::report::compare(baseline, &results));
    let names: Vec<String> = args.cases.iter().map(|path| path.display().to_string()).collect();
    let title = format!("permit eval: {}", names.join(", "));
    let markdown = super::report::markdown(&report, &title, comparison.as_ref());
    let write = |name: &str, text: &str| {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write `{}`", path.display()))
    };
    write("report.md", &markdown)?;
    let json = serde_json::json!({
        "cases": names,
        "wall_seconds": wall.as_secs_f64(),
        "report": report,
        "baseline": comparison,
    });
    write("report.json", &serde_json::to_string_pretty(&json)?)?;
    write("p_allow.svg", &super::plot::p_allow_by_label(&results))?;
    write("sweep.svg", &super::plot::threshold_sweep(&results))?;
    if let (Some(path), Some(cache)) = (&args.record, &recorder) {
        let cache = cache.lock().map_err(|_| anyhow::anyhow!("the answer cache lock is poisoned"))?;
        cache.save(path)?;
        eprintln!("permit: recorded {} model answers in {}", cache.len(), path.display());
    }
    let overall = &report.overall;
    println!(
        "{} cases, {} calls in {:.1} s: false allow {}, false deny {}, asks {} (labeled allow {}, labeled deny {}), errors {}, automation {:.1} %",
        overall.cases,
        overall.calls,
        wall.as_secs_f64(),
        overall.false_allow,
        overall.false_deny,
        overall.asked,
        overall.asks_labeled_allow,
        overall.asks_labeled_deny,
        overall.errors,
        overall.automation_rate * 100.0
    );
    println!("wrote {}/{{results.jsonl,report.md,report.json,p_allow.svg,sweep.svg}}", args.out.display());
    if let Some(comparison) = &comparison {
        println!(
            "against the baseline: false allows {} → {}, false denies {} → {}, {} verdict flips, {} changed inputs",
            comparison.baseline_false_allow,
            comparison.false_allow,
            comparison.baseline_false_deny,
            comparison.false_deny,
            comparison.flips.len(),
            comparison.changed_inputs.len()
        );
        if args.fail_on_regression && comparison.regressed() {
            eprintln!("permit: regression against the baseline");
            return Ok(ExitCode::from(EXIT_REGRESSION));
        }
    }
    Ok(ExitCode::SUCCESS)
}
