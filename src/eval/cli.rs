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
use crate::model::cache::{AnswerCache, CachingModel, ReadThroughCache, RecordingModel, ReplayModel, SharedCache};
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
    /// Directory for results.jsonl, report.md, report.json, report.html and the plots (p_allow,
    /// sweep, roc, categories and latency, as SVG).
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
    /// Read-through answer cache (created when missing): answers it holds are reused, every
    /// other call asks the model and its answer is appended at once, so an interrupted run over
    /// a paid API resumes without paying twice. Model errors are not kept (asked again).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["record", "replay"])]
    pub cache: Option<PathBuf>,
}

const EXIT_BAD_CASES: u8 = 2;
const EXIT_REGRESSION: u8 = 3;

/// The screen and review models, and the read-through cache when `--cache` is given.
type Models = (Option<Arc<dyn DecisionModel>>, Option<Arc<dyn DecisionModel>>, Option<Arc<ReadThroughCache>>);

/// Loads a cache file for `--record` or `--replay`, warning about a cut-short last line.
fn load_cache(path: &std::path::Path) -> anyhow::Result<AnswerCache> {
    let cache = AnswerCache::load(path)?;
    if let Some(warning) = cache.torn_line_warning(path) {
        eprintln!("permit: warning: {warning}");
    }
    Ok(cache)
}

fn models(config: &Config, args: &EvalArgs, recorder: Option<&SharedCache>) -> anyhow::Result<Models> {
    if let Some(path) = &args.replay {
        let cache = Arc::new(load_cache(path)?);
        let replay = |stage: &str, configured: bool| -> anyhow::Result<Option<Arc<dyn DecisionModel>>> {
            if !configured {
                return Ok(None);
            }
            Ok(Some(Arc::new(ReplayModel::new(stage, cache.clone(), path)?)))
        };
        return Ok((replay("screen", config.screen.is_some())?, replay("review", config.review.is_some())?, None));
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
    let screen = build("screen", config.screen.as_ref().map(|screen| &screen.model))?;
    let review = build("review", config.review.as_ref().map(|review| &review.model))?;
    let Some(path) = &args.cache else { return Ok((screen, review, None)) };
    let stages: Vec<(&str, &dyn DecisionModel)> = [("screen", &screen), ("review", &review)]
        .into_iter()
        .filter_map(|(stage, model)| model.as_deref().map(|model| (stage, model)))
        .collect();
    let cache = Arc::new(ReadThroughCache::open(path, &stages)?);
    if let Some(warning) = cache.torn_line_warning() {
        eprintln!("permit: warning: {warning}");
    }
    let read_through = |model: Option<Arc<dyn DecisionModel>>| -> Option<Arc<dyn DecisionModel>> {
        model.map(|model| Arc::new(CachingModel::new(model, cache.clone())) as Arc<dyn DecisionModel>)
    };
    Ok((read_through(screen), read_through(review), Some(cache)))
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
        Some(path) => Some(Arc::new(Mutex::new(load_cache(path)?))),
        None => None,
    };
    let (screen, review, read_through) = models(&config, &args, recorder.as_ref())?;
    let origin = crate::config::config_origin(args.config.as_deref());
    let engine =
        Arc::new(crate::engine::build_engine(config, &origin, |config| Engine::with_models(config, screen, review))?);
    let baseline = args.baseline.as_deref().map(super::read_results).transpose()?;

    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let started = Instant::now();
    let results = runtime.block_on(super::run(engine, &cases, args.concurrency));
    let wall = started.elapsed();
    if let Some(cache) = &read_through {
        eprintln!("permit: {}", cache.summary());
    }

    let names: Vec<String> = args.cases.iter().map(|path| path.display().to_string()).collect();
    // The engine owns the config now; the threshold the run used comes from the same source.
    let configured_threshold = Config::load(args.config.as_deref())
        .ok()
        .and_then(|config| config.screen.map(|screen| screen.allow_threshold_percent));
    let run = super::report::Run {
        title: format!("permit eval: {}", names.join(", ")),
        notes: cases.iter().filter_map(|case| Some((case.id.clone(), case.note.clone()?))).collect(),
        case_files: names,
        wall_seconds: Some(wall.as_secs_f64()),
        configured_threshold,
        baseline: baseline.as_deref(),
    };
    let super::output::Written { report, comparison, files, .. } = super::output::write_all(&args.out, &results, &run)?;
    if let (Some(path), Some(cache)) = (&args.record, &recorder) {
        let cache = cache.lock().map_err(|_| anyhow::anyhow!("the answer cache lock is poisoned"))?;
        cache.save(path)?;
        eprintln!("permit: recorded {} model answers in {}", cache.len(), path.display());
    }
    println!("{}", super::report::summary(&report.overall, wall.as_secs_f64()));
    println!("wrote {}/{{{}}}", args.out.display(), files.join(","));
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
