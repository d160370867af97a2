//! `permit train`: fits a trained head (`style = "head"`) on labeled calls.
//!
//! Features come from [`LocalBackend::head_features`], the code the head style runs at decision
//! time. The head is a standardised L2-regularised logistic regression, fitted with candle's
//! autograd and AdamW on the full batch: candle is already here for the model, while linfa
//! would add ndarray, argmin and about thirty crates for a convex fit of a few hundred weights.
//!
//! Regularisation is chosen by **grouped** cross-validation (a task or scenario never spans
//! two folds: AgentDojo by suite and user task, hand-written cases by `session_id`). The
//! out-of-fold P(allow) is written as a `results.jsonl` that `permit tune` reads, and the
//! threshold is picked the same way from it, over the calls a head may clear
//! ([`crate::classifier::eligibility`]), so it is chosen on data the head did not train on.
//! Leave-one-source-out figures (each AgentDojo suite, and the coding cases, held out in turn)
//! go into the head's receipt.
//!
//! Deterministic: the same files give the same head. On failure (an unreadable or invalid case
//! file, a model that cannot load, a call the model cannot read) it stops with the reason and
//! writes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::Optimizer;
use sha2::{Digest, Sha256};

use super::tune::{self, clopper_pearson_upper};
use super::{CallResult, CaseResult};
use crate::classifier::eligibility::{head_is_measured_on, head_may_clear};
use crate::config::{Config, ModelStyle, UnknownToolAction};
use crate::decision::{Decision, GateAction, Tier};
use crate::gate::{CallContext, Gate};
use crate::model::local::head::{self, HeadFile, HeldOut, ScreenInput, Training, TrainingFile};
use crate::model::local::{LocalBackend, LocalSettings, WeightFormat};
use crate::request::{EvalCase, KnownEvent, Label, PendingCall, Stage, TranscriptEvent};

/// The regularisation strengths tried (L2 penalty on the standardised weights).
pub const L2_GRID: [f64; 7] = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0];
/// The false-allow rate the shipped threshold must keep, over out-of-fold eligible calls.
pub const TARGET_FALSE_ALLOW: f64 = 0.01;
const STEPS: usize = 400;
const LEARNING_RATE: f64 = 0.05;

/// What `permit train` is asked.
pub struct TrainArgs {
    pub cases: Vec<PathBuf>,
    pub out: PathBuf,
    pub model: PathBuf,
    pub layer: usize,
    pub folds: usize,
    pub results: Option<PathBuf>,
    pub features_cache: Option<PathBuf>,
    pub command: String,
}

/// One labeled call, with what the head reads and how the gate judged it.
struct Example {
    case: String,
    category: Option<String>,
    call_id: String,
    label: Label,
    group: String,
    source: String,
    input: ScreenInput,
    gate_action: GateAction,
    tier: Tier,
    /// Measured on: a call the head may clear, or an unknown tool (see
    /// [`head_is_measured_on`]), read whole.
    eligible: bool,
    /// A call the head may clear in production.
    clearable: bool,
}

/// `evals/shell-commands.jsonl` lines (`command`, `label` benign/dangerous, `why`).
#[derive(serde::Deserialize)]
struct ShellLine {
    command: String,
    label: String,
}

fn read_examples(paths: &[PathBuf], gate: &Gate) -> anyhow::Result<(Vec<Example>, Vec<TrainingFile>)> {
    let mut examples = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read `{}`", path.display()))?;
        let stem = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        let first = text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
        let cases: Vec<EvalCase> = if first.contains("\"command\"") && !first.contains("\"pending\"") {
            let mut cases = Vec::new();
            for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
                let line: ShellLine = serde_json::from_str(line)
                    .with_context(|| format!("`{}` line {}: not a shell-commands line", path.display(), number + 1))?;
                let label = match line.label.as_str() {
                    "benign" => Label::Allow,
                    "dangerous" => Label::Deny,
                    other => bail!(
                        "`{}` line {}: label `{other}` is neither benign nor dangerous",
                        path.display(),
                        number + 1
                    ),
                };
                let mut input = serde_json::Map::new();
                input.insert("command".to_owned(), serde_json::Value::String(line.command));
                cases.push(EvalCase {
                    id: format!("{stem}:{}", number + 1),
                    label: Some(label),
                    labels: None,
                    category: None,
                    note: None,
                    source: None,
                    session_id: None,
                    cwd: Some("/workspace".to_owned()),
                    // The set has commands only: a neutral request, so the head learns them as
                    // commands, not as answers to a request.
                    transcript: vec![TranscriptEvent::Known(KnownEvent::User {
                        text: "Help me work on this repository.".to_owned(),
                    })],
                    pending: vec![PendingCall {
                        id: "c1".to_owned(),
                        name: "Bash".to_owned(),
                        input,
                        annotations: None,
                    }],
                });
            }
            cases
        } else {
            crate::request::parse_cases(&path.display().to_string(), &text)?
        };
        let before = examples.len();
        for case in &cases {
            let (group, source) = group_and_source(case, &stem);
            for call in &case.pending {
                let label = match (&case.label, &case.labels) {
                    (Some(label), _) => *label,
                    (None, Some(labels)) => match labels.get(&call.id) {
                        Some(label) => *label,
                        None => continue,
                    },
                    (None, None) => continue,
                };
                let outcome = gate.evaluate(call, CallContext::at(case.cwd.as_deref()));
                examples.push(Example {
                    case: case.id.clone(),
                    category: case.category.clone(),
                    call_id: call.id.clone(),
                    label,
                    group: group.clone(),
                    source: source.clone(),
                    input: ScreenInput::of(&case.transcript, call),
                    gate_action: outcome.action,
                    tier: outcome.tier,
                    eligible: outcome.action == GateAction::Classify && head_is_measured_on(&outcome),
                    clearable: outcome.action == GateAction::Classify && head_may_clear(&outcome),
                });
            }
        }
        files.push(TrainingFile {
            path: path.display().to_string(),
            sha256: head::hex(&Sha256::digest(text.as_bytes())),
            calls: examples.len() - before,
        });
    }
    Ok((examples, files))
}

/// AgentDojo ids are `agentdojo/<model>/<suite>/<user task>/…`: grouped by suite and user task,
/// sourced by suite. Other cases are grouped by `session_id` (a scenario), else by case.
fn group_and_source(case: &EvalCase, stem: &str) -> (String, String) {
    let parts: Vec<&str> = case.id.split('/').collect();
    if parts.first() == Some(&"agentdojo") && parts.len() >= 4 {
        return (format!("agentdojo/{}/{}", parts[2], parts[3]), format!("agentdojo/{}", parts[2]));
    }
    let group = case.session_id.clone().unwrap_or_else(|| case.id.clone());
    (format!("{stem}/{group}"), stem.to_owned())
}

/// Features per example, read from and added to the cache file when one is given (keyed by
/// model, template, layer and input, so a stale entry is never reused).
fn features(
    model: &LocalBackend,
    examples: &[Example],
    layer: usize,
    model_sha256: &str,
    cache_path: Option<&Path>,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let template = head::template_sha256();
    let key = |input: &ScreenInput| {
        let text = serde_json::to_string(input).unwrap_or_default();
        head::hex(&Sha256::digest(format!("{model_sha256}\n{template}\n{layer}\n{text}").as_bytes()))
    };
    let mut cached: BTreeMap<String, Vec<f32>> = BTreeMap::new();
    if let Some(path) = cache_path
        && path.exists()
    {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read `{}`", path.display()))?;
        for line in text.lines() {
            if let Ok((key, values)) = serde_json::from_str::<(String, Vec<f32>)>(line) {
                cached.insert(key, values);
            }
        }
    }
    let mut appender = match cache_path {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot write `{}`", path.display()))?,
        ),
        None => None,
    };
    let started = Instant::now();
    let mut computed = 0usize;
    let mut out = Vec::with_capacity(examples.len());
    for (index, example) in examples.iter().enumerate() {
        let key = key(&example.input);
        let values = match cached.get(&key) {
            Some(values) => values.clone(),
            None => {
                let values = model
                    .head_features(&example.input, layer)
                    .map_err(|error| anyhow::anyhow!("case `{}` call `{}`: {error}", example.case, example.call_id))?;
                if let Some(file) = appender.as_mut() {
                    writeln!(file, "{}", serde_json::to_string(&(&key, &values))?)?;
                }
                cached.insert(key, values.clone());
                computed += 1;
                values
            }
        };
        out.push(values);
        if (index + 1) % 100 == 0 || index + 1 == examples.len() {
            let per = started.elapsed().as_secs_f64() / computed.max(1) as f64;
            let left = examples[index + 1..].len() as f64 * per;
            eprintln!(
                "features: {}/{} calls ({computed} computed, {:.0} ms each, about {:.0} s left)",
                index + 1,
                examples.len(),
                per * 1000.0,
                left
            );
        }
    }
    Ok(out)
}

/// A fitted head: standardisation and logistic weights.
#[derive(Clone, Debug)]
pub struct Fitted {
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub weights: Vec<f64>,
    pub bias: f64,
}

impl Fitted {
    pub fn p_allow(&self, features: &[f32]) -> f64 {
        head::p_allow(features, &self.mean, &self.scale, &self.weights, self.bias)
    }
}

/// Fits an L2-regularised logistic regression (label allow = 1) on standardised features.
/// Classes are weighted to equal total weight, so the larger class does not set the bias.
pub fn fit(features: &[&[f32]], labels: &[bool], l2: f64) -> anyhow::Result<Fitted> {
    let rows = features.len();
    let width = features.first().map_or(0, |row| row.len());
    if rows == 0 || width == 0 || labels.len() != rows {
        bail!("nothing to fit");
    }
    let positives = labels.iter().filter(|label| **label).count();
    if positives == 0 || positives == rows {
        bail!("both labels are needed to fit a head");
    }
    let mut mean = vec![0f64; width];
    for row in features {
        for (sum, value) in mean.iter_mut().zip(row.iter()) {
            *sum += f64::from(*value);
        }
    }
    mean.iter_mut().for_each(|sum| *sum /= rows as f64);
    let mut scale = vec![0f64; width];
    for row in features {
        for ((sum, value), mean) in scale.iter_mut().zip(row.iter()).zip(&mean) {
            *sum += (f64::from(*value) - mean).powi(2);
        }
    }
    scale.iter_mut().for_each(|sum| *sum = (*sum / rows as f64).sqrt().max(1e-6));
    let device = Device::Cpu;
    let standardised: Vec<f32> = features
        .iter()
        .flat_map(|row| {
            row.iter()
                .zip(mean.iter().zip(&scale))
                .map(|(value, (mean, scale))| ((f64::from(*value) - mean) / scale) as f32)
        })
        .collect();
    let inputs = Tensor::from_vec(standardised, (rows, width), &device)?;
    let targets = Tensor::from_vec(
        labels.iter().map(|label| if *label { 1f32 } else { 0f32 }).collect::<Vec<_>>(),
        (rows, 1),
        &device,
    )?;
    let (positive_weight, negative_weight) = (0.5 / positives as f32, 0.5 / (rows - positives) as f32);
    let sample_weights = Tensor::from_vec(
        labels.iter().map(|label| if *label { positive_weight } else { negative_weight }).collect::<Vec<_>>(),
        (rows, 1),
        &device,
    )?;
    let weights = Var::zeros((width, 1), DType::F32, &device)?;
    let bias = Var::zeros((1, 1), DType::F32, &device)?;
    let mut optimizer = candle_nn::AdamW::new(
        vec![weights.clone(), bias.clone()],
        candle_nn::ParamsAdamW { lr: LEARNING_RATE, weight_decay: 0.0, ..Default::default() },
    )?;
    for _ in 0..STEPS {
        let logits = inputs.matmul(weights.as_tensor())?.broadcast_add(bias.as_tensor())?;
        // Binary cross-entropy with logits, written stably: max(z, 0) - z·y + log(1 + e^-|z|).
        let losses = ((logits.relu()? - (&logits * &targets)?)? + (logits.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
        let data_loss = (losses * &sample_weights)?.sum_all()?;
        let penalty = (weights.as_tensor().sqr()?.sum_all()? * (l2 / 2.0))?;
        optimizer.backward_step(&(data_loss + penalty)?)?;
    }
    let weights: Vec<f64> = weights.as_tensor().flatten_all()?.to_vec1::<f32>()?.into_iter().map(f64::from).collect();
    let bias = f64::from(bias.as_tensor().flatten_all()?.to_vec1::<f32>()?[0]);
    if weights.iter().any(|weight| !weight.is_finite()) || !bias.is_finite() {
        bail!("the fit diverged");
    }
    Ok(Fitted { mean, scale, weights, bias })
}

/// Area under the ROC curve of P(allow) against the allow label (ties count half).
pub fn auroc(scores: &[f64], labels: &[bool]) -> f64 {
    let mut pairs: Vec<(f64, bool)> = scores.iter().copied().zip(labels.iter().copied()).collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = labels.iter().filter(|label| **label).count() as f64;
    let negatives = labels.len() as f64 - positives;
    if positives == 0.0 || negatives == 0.0 {
        return f64::NAN;
    }
    // Mann-Whitney U from average ranks.
    let mut rank_sum = 0.0;
    let mut index = 0;
    while index < pairs.len() {
        let mut end = index;
        while end + 1 < pairs.len() && pairs[end + 1].0 == pairs[index].0 {
            end += 1;
        }
        let average_rank = (index + end) as f64 / 2.0 + 1.0;
        rank_sum += pairs[index..=end].iter().filter(|(_, label)| *label).count() as f64 * average_rank;
        index = end + 1;
    }
    (rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives)
}

fn finite(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

/// Groups dealt to `folds` folds, largest group first into the emptiest fold (ties by name),
/// so folds are balanced and the assignment is deterministic.
pub fn assign_folds(groups: &[String], folds: usize) -> Vec<usize> {
    let mut sizes: BTreeMap<&str, usize> = BTreeMap::new();
    for group in groups {
        *sizes.entry(group.as_str()).or_default() += 1;
    }
    let mut order: Vec<(&str, usize)> = sizes.into_iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut load = vec![0usize; folds];
    let mut fold_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (group, size) in order {
        let fold = (0..folds).min_by_key(|fold| (load[*fold], *fold)).unwrap_or(0);
        load[fold] += size;
        fold_of.insert(group, fold);
    }
    groups.iter().map(|group| fold_of.get(group.as_str()).copied().unwrap_or(0)).collect()
}

/// Out-of-fold P(allow) for every example: each fold scored by a head fitted on the others.
fn out_of_fold(
    features: &[Vec<f32>],
    labels: &[bool],
    fold_of: &[usize],
    folds: usize,
    l2: f64,
) -> anyhow::Result<Vec<f64>> {
    let mut scores = vec![f64::NAN; features.len()];
    for fold in 0..folds {
        let train: Vec<usize> = (0..features.len()).filter(|index| fold_of[*index] != fold).collect();
        let fitted = fit(
            &train.iter().map(|index| features[*index].as_slice()).collect::<Vec<_>>(),
            &train.iter().map(|index| labels[*index]).collect::<Vec<_>>(),
            l2,
        )?;
        for index in (0..features.len()).filter(|index| fold_of[*index] == fold) {
            scores[index] = fitted.p_allow(&features[index]);
        }
    }
    Ok(scores)
}

/// Results in `permit eval`'s shape: the gate's verdict, and for calls a head may clear the
/// screen's answer (choice and P(allow)); other calls carry no P(allow), so `permit tune`
/// leaves them out.
fn results(examples: &[Example], scores: &[f64]) -> Vec<CaseResult> {
    let mut by_case: Vec<CaseResult> = Vec::new();
    for (example, score) in examples.iter().zip(scores) {
        let screened = example.eligible;
        let call = CallResult {
            id: example.call_id.clone(),
            label: Some(example.label),
            decision: match example.gate_action {
                GateAction::Allow => Decision::Allow,
                GateAction::Deny => Decision::Deny,
                _ => Decision::Ask,
            },
            stage: if screened { Stage::Screen } else { Stage::Gate },
            tier: example.tier,
            gate_action: example.gate_action,
            reason_code: None,
            reason: None,
            screen_model: screened.then(|| "head (out of fold)".to_owned()),
            screen_choice: screened.then(|| if *score > 0.5 { "allow" } else { "escalate" }.to_owned()),
            p_allow: screened.then_some(*score),
            review_option: None,
            errors: Vec::new(),
            screen_latency_ms: None,
            review_latency_ms: None,
            screen_tokens: Default::default(),
            review_tokens: Default::default(),
        };
        match by_case.last_mut() {
            Some(last) if last.case == example.case => last.calls.push(call),
            _ => by_case.push(CaseResult {
                case: example.case.clone(),
                category: example.category.clone(),
                input_digest: String::new(),
                calls: vec![call],
                latency_ms: 0.0,
            }),
        }
    }
    by_case
}

/// False allows and cleared allows at `threshold` (percent) over eligible examples.
fn at_threshold(examples: &[&Example], scores: &[f64], threshold: u8) -> (usize, usize, usize, usize) {
    let cut = f64::from(threshold) / 100.0;
    let (mut false_allows, mut denies, mut cleared, mut allows) = (0, 0, 0, 0);
    for (example, score) in examples.iter().zip(scores) {
        if !example.eligible {
            continue;
        }
        let clears = *score > 0.5 && *score >= cut;
        match example.label {
            Label::Deny => {
                denies += 1;
                false_allows += usize::from(clears);
            }
            Label::Allow => {
                allows += 1;
                cleared += usize::from(clears);
            }
        }
    }
    (false_allows, denies, cleared, allows)
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    if args.folds < 2 {
        bail!("`--folds` must be at least 2");
    }
    let mut config = Config::embedded_default();
    config.tools.unknown = UnknownToolAction::Classify;
    let gate = Gate::new(&config).map_err(|error| anyhow::anyhow!("cannot build the gate: {error}"))?;
    let (examples, files) = read_examples(&args.cases, &gate)?;
    if examples.is_empty() {
        bail!(
            "no labeled calls in {}",
            args.cases.iter().map(|path| format!("`{}`", path.display())).collect::<Vec<_>>().join(", ")
        );
    }
    eprintln!("read {} labeled calls from {} files", examples.len(), files.len());
    let model = LocalBackend::load(LocalSettings {
        path: args.model.clone(),
        threads: None,
        max_new_tokens: 1,
        style: ModelStyle::Decision,
        weights: WeightFormat::Auto,
        prefix_cache_mib: 0,
        head: None,
    })?;
    let shape = model.shape().clone();
    if args.layer == 0 || args.layer > shape.layers {
        bail!("`--layer` {} is not one of the model's 1..={} layers", args.layer, shape.layers);
    }
    // A call the head does not read whole is never cleared, so it is not measured either.
    let mut examples = examples;
    for example in &mut examples {
        let whole = model
            .head_reads_whole_call(&example.input)
            .map_err(|error| anyhow::anyhow!("case `{}` call `{}`: {error}", example.case, example.call_id))?;
        example.eligible &= whole;
        example.clearable &= whole;
    }
    eprintln!(
        "{} calls measured on (the head may clear {} of them; the rest are unknown tools)",
        examples.iter().filter(|example| example.eligible).count(),
        examples.iter().filter(|example| example.clearable).count()
    );
    let model_sha256 =
        head::file_sha256(&args.model).with_context(|| format!("cannot read `{}`", args.model.display()))?;
    let features = features(&model, &examples, args.layer, &model_sha256, args.features_cache.as_deref())?;
    let labels: Vec<bool> = examples.iter().map(|example| example.label == Label::Allow).collect();
    let groups: Vec<String> = examples.iter().map(|example| example.group.clone()).collect();
    let fold_of = assign_folds(&groups, args.folds);

    let mut grid = Vec::new();
    let mut best: Option<(f64, f64, Vec<f64>)> = None;
    for l2 in L2_GRID {
        let scores = out_of_fold(&features, &labels, &fold_of, args.folds, l2)?;
        let auc = auroc(&scores, &labels);
        eprintln!("cross-validation: l2 {l2}: out-of-fold AUROC {auc:.4}");
        grid.push(head::CvPoint { l2, auroc: auc });
        if best.as_ref().is_none_or(|(_, best_auc, _)| auc > *best_auc) {
            best = Some((l2, auc, scores));
        }
    }
    let Some((l2, auc, scores)) = best else { bail!("no regularisation was tried") };
    let mut auroc_by_source = BTreeMap::new();
    let sources: BTreeSet<&str> = examples.iter().map(|example| example.source.as_str()).collect();
    for source in &sources {
        let (source_scores, source_labels): (Vec<f64>, Vec<bool>) = examples
            .iter()
            .zip(&scores)
            .zip(&labels)
            .filter(|((example, _), _)| example.source == *source)
            .map(|((_, score), label)| (*score, *label))
            .unzip();
        auroc_by_source.insert((*source).to_owned(), finite(auroc(&source_scores, &source_labels)));
    }

    // The threshold, from the out-of-fold answers of eligible calls, as `permit tune` picks it.
    let oof = results(&examples, &scores);
    if let Some(path) = &args.results {
        super::write_results(path, &oof)?;
        eprintln!("wrote out-of-fold results to `{}` (read them with `permit tune`)", path.display());
    }
    let eligible_denies = examples.iter().filter(|example| example.eligible && example.label == Label::Deny).count();
    let max_false_allow = (TARGET_FALSE_ALLOW * eligible_denies as f64).floor() as usize;
    let threshold = match tune::recommend_with(&oof, max_false_allow, 1) {
        Ok(recommendation) => {
            let everything: Vec<&Example> = examples.iter().collect();
            let (false_allows, denies, cleared, allows) = at_threshold(&everything, &scores, recommendation.threshold);
            Some(head::ThresholdReceipt {
                threshold: f64::from(recommendation.threshold) / 100.0,
                chosen_by: format!(
                    "permit tune {} --max-false-allow {max_false_allow} --min-denies 1 (out-of-fold answers of the {} calls the head is measured on: those it may clear, and unknown tools)",
                    args.results.as_ref().map_or("<out-of-fold results>".to_owned(), |path| path.display().to_string()),
                    examples.iter().filter(|example| example.eligible).count()
                ),
                false_allows,
                eligible_denies: denies,
                false_allow_upper_95: clopper_pearson_upper(false_allows, denies, tune::CONFIDENCE),
                cleared_allow_share: cleared as f64 / allows.max(1) as f64,
            })
        }
        Err(error) => {
            eprintln!("no threshold: {error}");
            None
        }
    };

    // Leave one source out: fitted on the other sources, scored on the held-out one.
    let mut held_out = Vec::new();
    if let Some(receipt) = &threshold {
        let threshold_percent = (receipt.threshold * 100.0).round() as u8;
        for source in &sources {
            let train: Vec<usize> = (0..examples.len()).filter(|index| examples[*index].source != *source).collect();
            let test: Vec<usize> = (0..examples.len()).filter(|index| examples[*index].source == *source).collect();
            let fitted = fit(
                &train.iter().map(|index| features[*index].as_slice()).collect::<Vec<_>>(),
                &train.iter().map(|index| labels[*index]).collect::<Vec<_>>(),
                l2,
            )?;
            let test_scores: Vec<f64> = test.iter().map(|index| fitted.p_allow(&features[*index])).collect();
            let test_examples: Vec<&Example> = test.iter().map(|index| &examples[*index]).collect();
            let (false_allows, denies, cleared, allows) = at_threshold(&test_examples, &test_scores, threshold_percent);
            let row = HeldOut {
                source: (*source).to_owned(),
                auroc: finite(auroc(&test_scores, &test.iter().map(|index| labels[*index]).collect::<Vec<_>>())),
                eligible_denies: denies,
                false_allows,
                false_allow_upper_95: clopper_pearson_upper(false_allows, denies, tune::CONFIDENCE),
                eligible_allows: allows,
                cleared_allows: cleared,
            };
            eprintln!(
                "held out {}: AUROC {:.3?}; at {:.2}: {} of {} eligible denies allowed (95 % bound {:.3}), {} of {} eligible allows cleared",
                row.source,
                row.auroc,
                receipt.threshold,
                row.false_allows,
                row.eligible_denies,
                row.false_allow_upper_95,
                row.cleared_allows,
                row.eligible_allows
            );
            held_out.push(row);
        }
    }

    let all: Vec<&[f32]> = features.iter().map(Vec::as_slice).collect();
    let fitted = fit(&all, &labels, l2)?;
    let data_digest = head::hex(&Sha256::digest(
        files.iter().map(|file| file.sha256.as_str()).collect::<Vec<_>>().join("\n").as_bytes(),
    ));
    let head = HeadFile {
        format: head::HEAD_FORMAT,
        model_sha256,
        layer: args.layer,
        pooling: head::Pooling::MeanOverCall,
        template_sha256: head::template_sha256(),
        mean: fitted.mean,
        scale: fitted.scale,
        weights: fitted.weights,
        bias: fitted.bias,
        training: Training {
            command: args.command.clone(),
            data: files,
            data_digest,
            calls: examples.len(),
            allows: labels.iter().filter(|label| **label).count(),
            denies: labels.iter().filter(|label| !**label).count(),
            folds: args.folds,
            groups: groups.iter().collect::<BTreeSet<_>>().len(),
            grid,
            l2,
            auroc_by_source,
            auroc: auc,
            held_out,
        },
        threshold,
    };
    let text = serde_json::to_string_pretty(&head)? + "\n";
    std::fs::write(&args.out, text).with_context(|| format!("cannot write `{}`", args.out.display()))?;
    eprintln!("wrote `{}` in {:.0} s", args.out.display(), started.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auroc_counts_ties_half_and_orders() {
        assert_eq!(auroc(&[0.1, 0.9], &[false, true]), 1.0);
        assert_eq!(auroc(&[0.9, 0.1], &[false, true]), 0.0);
        assert_eq!(auroc(&[0.5, 0.5], &[false, true]), 0.5);
        assert!(auroc(&[0.5], &[true]).is_nan());
    }

    #[test]
    fn folds_keep_each_group_whole_and_balanced() {
        let groups: Vec<String> = ["a", "a", "a", "b", "b", "c", "d", "d", "e"].iter().map(|g| g.to_string()).collect();
        let folds = assign_folds(&groups, 3);
        for (index, group) in groups.iter().enumerate() {
            for (other, other_group) in groups.iter().enumerate() {
                if group == other_group {
                    assert_eq!(folds[index], folds[other]);
                }
            }
        }
        let mut sizes = [0; 3];
        folds.iter().for_each(|fold| sizes[*fold] += 1);
        assert!(sizes.iter().all(|size| (2..=4).contains(size)), "{sizes:?}");
    }

    #[test]
    fn the_fit_separates_separable_data() {
        let rows: Vec<Vec<f32>> = (0..40).map(|i| vec![i as f32, (i % 3) as f32]).collect();
        let labels: Vec<bool> = (0..40).map(|i| i >= 20).collect();
        let fitted = fit(&rows.iter().map(Vec::as_slice).collect::<Vec<_>>(), &labels, 0.001).unwrap();
        let scores: Vec<f64> = rows.iter().map(|row| fitted.p_allow(row)).collect();
        assert_eq!(auroc(&scores, &labels), 1.0);
        assert!(fitted.p_allow(&[39.0, 0.0]) > 0.9 && fitted.p_allow(&[0.0, 0.0]) < 0.1);
    }
}
