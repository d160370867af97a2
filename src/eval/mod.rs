//! `permit eval`: replays labeled cases through the production pipeline and measures it.
//!
//! Cases are read strictly (file and line in every error), run with bounded concurrency
//! through the same [`Engine`] that serves requests, and written out as `results.jsonl` (one
//! line per case), `report.md` / `report.json` / `report.html` (see [`report`] and [`html`]) and
//! the SVG plots (see [`plot`]). `--record` / `--replay` keep or reuse model answers
//! ([`crate::model::cache`]), so a replayed eval makes no model call at all.
//!
//! It decides nothing itself. On failure: an unreadable or invalid case file stops the eval
//! before anything runs; a model error is recorded against its call and counted apart in the
//! report (so a broken model cannot look safe), never turned into a label match.

pub mod cli;
pub mod html;
pub mod output;
pub mod plot;
pub mod report;
pub mod train;
pub mod tune;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine::Engine;
use crate::engine::{DecisionRecord, StageRecord};
use crate::model::Usage;
use crate::request::{EvalCase, Label, parse_cases};

/// What one pending call of a case got.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallResult {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<Label>,
    pub decision: crate::decision::Decision,
    pub stage: crate::request::Stage,
    pub tier: crate::decision::Tier,
    pub gate_action: crate::decision::GateAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen_choice: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_allow: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_option: Option<String>,
    /// Stage errors (`screen: timeout: …`), counted apart in the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    pub screen_latency_ms: Option<f64>,
    pub review_latency_ms: Option<f64>,
    pub screen_tokens: Usage,
    pub review_tokens: Usage,
}

impl CallResult {
    fn from_record(record: &DecisionRecord, label: Option<Label>) -> Self {
        let decision = &record.decision;
        let mut errors = Vec::new();
        for (stage, stage_record) in [("screen", &record.screen), ("review", &record.review)] {
            if let Some(stage_record) = stage_record
                && let Some(kind) = &stage_record.error_kind
            {
                errors.push(format!("{stage}: {kind}: {}", stage_record.error.clone().unwrap_or_default()));
            }
        }
        if let Some(problem) = &record.transcript_error {
            errors.push(format!("transcript: {problem}"));
        }
        CallResult {
            id: decision.id.clone(),
            label,
            decision: decision.decision,
            stage: decision.stage,
            tier: decision.tier,
            gate_action: record.gate.action,
            reason_code: decision.reason_code.map(|code| code.as_str().to_owned()),
            reason: decision.reason.clone(),
            screen_model: record.screen.as_ref().map(|screen| screen.model.clone()),
            screen_choice: record.screen.as_ref().and_then(|screen| screen.choice.clone()),
            p_allow: record.screen.as_ref().and_then(|screen| screen.p_allow),
            review_option: record.review.as_ref().and_then(|review| review.choice.clone()),
            errors,
            screen_latency_ms: record.screen.as_ref().map(|screen| screen.latency_ms),
            review_latency_ms: record.review.as_ref().map(|review| review.latency_ms),
            screen_tokens: record.screen.as_ref().map(|screen| screen.usage).unwrap_or_default(),
            review_tokens: record.review.as_ref().map(StageRecord::member_usage).unwrap_or_default(),
        }
    }
}

/// One line of `results.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub case: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// SHA-256 of the case's input (cwd, session, transcript, pending calls), to tell a changed
    /// case from a changed verdict.
    pub input_digest: String,
    pub calls: Vec<CallResult>,
    pub latency_ms: f64,
}

/// The digest of what a case asks (not its label or notes).
pub fn input_digest(case: &EvalCase) -> String {
    let input = serde_json::json!({
        "cwd": case.cwd,
        "session_id": case.session_id,
        "transcript": case.transcript,
        "pending": case.pending,
    });
    format!("sha256:{:x}", Sha256::digest(input.to_string().as_bytes()))
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read `{path}`: {message}")]
    Read { path: String, message: String },
    #[error(transparent)]
    Cases(#[from] crate::request::RequestError),
    #[error("case id `{id}` appears in both `{first}` and `{second}`")]
    DuplicateId { id: String, first: String, second: String },
    #[error("no cases in {0}")]
    Empty(String),
    #[error("cannot write `{path}`: {message}")]
    Write { path: String, message: String },
}

/// Reads and validates every case file; nothing runs unless all of them are valid.
pub fn load_cases(paths: &[PathBuf]) -> Result<Vec<EvalCase>, EvalError> {
    let mut cases = Vec::new();
    let mut origin: BTreeMap<String, String> = BTreeMap::new();
    for path in paths {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|error| EvalError::Read { path: display.clone(), message: error.to_string() })?;
        for case in parse_cases(&display, &text)? {
            if let Some(first) = origin.insert(case.id.clone(), display.clone()) {
                return Err(EvalError::DuplicateId { id: case.id, first, second: display });
            }
            cases.push(case);
        }
    }
    if cases.is_empty() {
        let names: Vec<String> = paths.iter().map(|path| format!("`{}`", path.display())).collect();
        return Err(EvalError::Empty(names.join(", ")));
    }
    Ok(cases)
}

/// Progress on stderr: a bar on a terminal, a line every ten per cent otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    done: usize,
    started: Instant,
    next_report: usize,
}

impl Progress {
    fn new(total: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "eval {bar:40} {pos}/{len} cases  {elapsed} elapsed, ~{eta} left",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Progress { bar, total, done: 0, started: Instant::now(), next_report: total.div_ceil(10).max(1) }
    }

    fn step(&mut self) {
        self.done += 1;
        if let Some(bar) = &self.bar {
            bar.inc(1);
        } else if self.done >= self.next_report || self.done == self.total {
            eprintln!(
                "eval: {}/{} cases ({:.0} %), {:.1} s",
                self.done,
                self.total,
                100.0 * self.done as f64 / self.total.max(1) as f64,
                self.started.elapsed().as_secs_f64()
            );
            self.next_report += self.total.div_ceil(10).max(1);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Runs every case through `engine`, `concurrency` at a time; results come back in case order.
pub async fn run(engine: Arc<Engine>, cases: &[EvalCase], concurrency: usize) -> Vec<CaseResult> {
    let mut progress = Progress::new(cases.len());
    let mut results: Vec<Option<CaseResult>> = vec![None; cases.len()];
    let mut stream = futures_util::stream::iter(cases.iter().enumerate())
        .map(|(index, case)| {
            let engine = engine.clone();
            async move {
                let started = Instant::now();
                let records = engine.records(&case.request()).await;
                let calls = records
                    .iter()
                    .map(|record| CallResult::from_record(record, case.label_for(&record.decision.id)))
                    .collect();
                let result = CaseResult {
                    case: case.id.clone(),
                    category: case.category.clone(),
                    input_digest: input_digest(case),
                    calls,
                    latency_ms: started.elapsed().as_secs_f64() * 1_000.0,
                };
                (index, result)
            }
        })
        .buffer_unordered(concurrency.max(1));
    while let Some((index, result)) = stream.next().await {
        results[index] = Some(result);
        progress.step();
    }
    progress.finish();
    results.into_iter().flatten().collect()
}

/// Writes `results.jsonl`.
pub fn write_results(path: &Path, results: &[CaseResult]) -> Result<(), EvalError> {
    let mut text = String::new();
    for result in results {
        text.push_str(&serde_json::to_string(result).unwrap_or_default());
        text.push('\n');
    }
    std::fs::write(path, text)
        .map_err(|error| EvalError::Write { path: path.display().to_string(), message: error.to_string() })
}

/// Reads a `results.jsonl` written by [`write_results`].
pub fn read_results(path: &Path) -> Result<Vec<CaseResult>, EvalError> {
    let display = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|error| EvalError::Read { path: display.clone(), message: error.to_string() })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|error| EvalError::Read {
                path: display.clone(),
                message: format!("line {}: not a result line: {error}", index + 1),
            })
        })
        .collect()
}
