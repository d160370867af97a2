//! The pipeline: gate → screen → review, combined strictest-wins with session policy.
//!
//! Decides every pending call of a request:
//! - the gate settles `allow` / `ask` / `deny` on its own; only `classify` reaches the models;
//! - the screen may skip the review: it allows only when the model chose `allow` **and** P(allow)
//!   ≥ the threshold (or, for a model without probabilities, its choice alone). A screen error,
//!   timeout or malformed answer escalates: the screen can skip a review but never deny;
//! - escalated calls go to one review (a batch of several gets one question per call). A review
//!   deny shows the agent the option's fixed description, never model text. A review error
//!   fails closed to `review.on_error` (`ask` or `deny`); a failed batch fails every member;
//! - `reviewer` mode's classifier may only veto (its deny becomes `ask`); an irreversible call
//!   is never allowed by a model (its allow becomes `ask`); a session with too many classifier
//!   denials sends further classified calls to a person.
//!
//! Session state (denial counts, costly budgets) lives in the session store: memory, or Redis
//! shared by replicas. When the store cannot answer, only the calls that need it change: a
//! costly call, and every classified call of the request, become `ask` with
//! `session_store_unavailable` (no model is asked); calls the gate settles alone are untouched.
//!
//! Model work is bounded: a request's first `classifier.max_calls_per_request` classified calls
//! are judged and the rest are `ask` (`model_call_limit`); model calls in flight share
//! `classifier.max_concurrent_model_calls` slots per process, and a stage's `timeout_ms` covers
//! waiting for a slot as well as the call (`model_busy` when no slot frees in time). Calls the
//! gate settles never wait for a slot.
//!
//! Fails closed everywhere: no error, timeout, malformed answer, busy or missing model ever
//! yields `allow`, and each failure carries a reason code saying which it was. Stage timeouts
//! cancel the model call (its future is dropped).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::sync::Semaphore;

use crate::classifier::budget::CostlyBudget;
use crate::classifier::finalize::{Budget, Classifier, Reviewed, Screened, SessionUpdate, finalize, session_update};
use crate::classifier::prompts::Prompts;
use crate::classifier::questions::ALLOW;
pub use crate::classifier::record::{DecisionRecord, StageRecord};
use crate::classifier::session::SessionPolicy;
use crate::classifier::transcript;
use crate::config::{Config, OnDeny, OnError, TranscriptConfig};
use crate::decision::GateAction;
use crate::fact_check::FactChecker;
use crate::gate::{CallContext, Gate, GateOutcome};
use crate::model::{DecisionModel, ModelAnswer, ModelError, ModelRequest, validate_answer};
use crate::request::{DecideRequest, PendingCall, Stage};
use crate::session_store::{SessionStore, StoreError, StoreMetrics};

pub struct ScreenStage {
    pub model: Arc<dyn DecisionModel>,
    /// P(allow) needed to skip the review, in 0.5..=1.
    pub threshold: f64,
    pub timeout: Duration,
}

pub struct ReviewStage {
    pub model: Arc<dyn DecisionModel>,
    pub timeout: Duration,
    pub on_error: OnError,
    pub on_deny: OnDeny,
}

pub struct Pipeline {
    gate: Arc<Gate>,
    /// `workspace.facts_in_service`: this process shares the agent's machine, so the facts a
    /// refusal names are checked here ([`crate::fact_check`]).
    facts_in_service: bool,
    costly_budget: CostlyBudget,
    sessions: SessionPolicy,
    store_metrics: StoreMetrics,
    prompts: Prompts,
    questionnaire_tools: Vec<String>,
    transcript_budget: TranscriptConfig,
    screen: Option<ScreenStage>,
    review: Option<ReviewStage>,
    /// Classified calls per request the models judge.
    max_calls_per_request: usize,
    /// Model calls in flight in this process, screens and reviews together.
    model_slots: Semaphore,
}

/// A request the gate has judged: every call has a decision, the classified ones provisionally
/// (`ask`) until [`Pipeline::finish`] runs the models. Lets a host admit model-bound requests
/// separately from those the gate settles alone.
pub struct GatedRequest {
    /// The gate's own outcomes, and each call's costly-call budget.
    outcomes: Vec<GateOutcome>,
    budgets: Vec<Budget>,
    /// The calls the gate sent to the classifier (and no budget refused), in request order.
    classified: Vec<usize>,
    records: Vec<DecisionRecord>,
    needs_model: bool,
    started: Instant,
}

impl GatedRequest {
    /// Whether finishing the request may call a model: some call needs the classifier and one
    /// is configured. When `false`, [`Pipeline::finish`] returns at once.
    pub fn needs_model(&self) -> bool {
        self.needs_model
    }

    /// The gate's records, in request order.
    pub fn records(&self) -> &[DecisionRecord] {
        &self.records
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

/// Requests whose arguments add up to more than this are gated on the blocking pool.
const INLINE_GATE_BYTES: usize = 16 * 1024;

/// How long facts about the machine may take to check for a request with no deadline.
const FACT_CHECK_WITHOUT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// The bytes of the string values in a call's arguments (shallow: what the gate parses).
fn argument_bytes(input: &serde_json::Map<String, serde_json::Value>) -> usize {
    input
        .values()
        .map(|value| match value {
            serde_json::Value::String(text) => text.len(),
            serde_json::Value::Array(items) => items.iter().filter_map(|item| item.as_str()).map(str::len).sum(),
            _ => 0,
        })
        .sum()
}

/// A session store call bounded by the request's deadline as well as the store's own timeout
/// (`session.timeout_ms`, validated to be shorter than the deadline).
async fn bounded<T>(
    deadline: Option<tokio::time::Instant>,
    work: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match deadline {
        Some(deadline) => {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::timeout_at(deadline, work)
                .await
                .unwrap_or(Err(StoreError::Timeout(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX))))
        }
        None => work.await,
    }
}

/// A model call bounded by the stage timeout, validated against its questions. The timeout
/// covers waiting for a model slot too, so `timeout_ms` bounds the stage however busy the
/// process is; a call that gets no slot in time is `Busy` and never reaches the model.
async fn ask_model(
    model: &dyn DecisionModel,
    request: &ModelRequest,
    timeout: Duration,
    slots: &Semaphore,
) -> (Result<ModelAnswer, ModelError>, f64) {
    // tokio's clock, so the stage's timers and its latency follow a paused test clock.
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let timeout_ms = timeout.as_millis().try_into().unwrap_or(u64::MAX);
    // The permit is held until the model call ends or is cancelled (dropped with this future).
    let Ok(Ok(_slot)) = tokio::time::timeout_at(deadline, slots.acquire()).await else {
        return (Err(ModelError::Busy(timeout_ms)), millis(started.elapsed()));
    };
    // The backend's retries stop at the stage's deadline rather than being cut off mid-wait.
    let mut request = request.clone();
    request.deadline = Some(deadline.into_std());
    let request = &request;
    let result = match tokio::time::timeout_at(deadline, model.answer(request)).await {
        Ok(Ok(answer)) => validate_answer(&request.questions, &answer).map(|()| answer),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(ModelError::Timeout(timeout_ms)),
    };
    (result, millis(started.elapsed()))
}

fn error_record(model: &dyn DecisionModel, error: &ModelError, latency_ms: f64, batch_size: usize) -> StageRecord {
    StageRecord {
        model: model.name(),
        error_kind: Some(error.kind().to_owned()),
        error: Some(error.to_string()),
        latency_ms,
        batch_size,
        ..StageRecord::default()
    }
}

/// What the engine builds from the config for the pipeline: each part may fail to build, so
/// the engine builds them and reports why; the pipeline itself cannot fail.
pub struct Parts {
    pub gate: Gate,
    pub prompts: Prompts,
    pub store: Arc<dyn SessionStore>,
    pub store_metrics: StoreMetrics,
}

impl Pipeline {
    /// The pipeline around parts built from the same `config`.
    pub fn new(config: &Config, parts: Parts, screen: Option<ScreenStage>, review: Option<ReviewStage>) -> Self {
        let Parts { gate, prompts, store, store_metrics } = parts;
        Self {
            gate: Arc::new(gate),
            facts_in_service: config.workspace.facts_in_service,
            costly_budget: CostlyBudget::new(config.reversibility.costly_budget_per_session, Arc::clone(&store)),
            sessions: SessionPolicy::new(&config.session, store),
            store_metrics,
            prompts,
            questionnaire_tools: config.tools.questionnaire.clone(),
            transcript_budget: config.transcript,
            screen,
            review,
            max_calls_per_request: config.classifier.max_calls_per_request,
            model_slots: Semaphore::new(config.classifier.max_concurrent_model_calls),
        }
    }

    /// Model slots free right now, out of `classifier.max_concurrent_model_calls` (for metrics).
    pub fn model_slots_available(&self) -> usize {
        self.model_slots.available_permits()
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn sessions(&self) -> &SessionPolicy {
        &self.sessions
    }

    /// The session store's latency and error metrics, for the service to register.
    pub fn session_store_metrics(&self) -> &StoreMetrics {
        &self.store_metrics
    }

    pub fn has_classifier(&self) -> bool {
        self.screen.is_some() || self.review.is_some()
    }

    /// Runs the gate on every pending call. Small requests are judged inline (microseconds).
    /// Large ones (over [`INLINE_GATE_BYTES`] of arguments) run on the blocking pool under the
    /// request's deadline, so a worst-case command cannot stall a tokio worker; if the deadline
    /// passes first, every call is `ask` (fail closed).
    async fn gate_all(
        &self,
        request: &DecideRequest,
        deadline: Option<tokio::time::Instant>,
    ) -> (Vec<GateOutcome>, Vec<f64>) {
        let context_cwd = request.cwd.clone();
        // With a checker, a refusal that names facts about the machine is judged again with
        // those that hold ([`crate::fact_check`]).
        let evaluate = |gate: &Gate, pending: &[PendingCall], cwd: Option<&str>, checker: Option<&FactChecker>| {
            let _span = tracing::debug_span!("gate", calls = pending.len()).entered();
            let context = CallContext::at(cwd);
            pending
                .iter()
                .map(|call| {
                    let started = Instant::now();
                    let outcome = match checker {
                        Some(checker) => crate::fact_check::evaluate_checking_facts(gate, call, context, checker),
                        None => gate.evaluate(call, context),
                    };
                    (outcome, millis(started.elapsed()))
                })
                .unzip::<_, _, Vec<GateOutcome>, Vec<f64>>()
        };
        let size: usize = request.pending.iter().map(|call| argument_bytes(&call.input)).sum();
        // Facts only when the request shows its session and nothing the session started may
        // still be changing files (a request without a transcript hides what is running), and
        // for one pending call: the facts are checked before any runs, so a sibling that runs
        // first (`cp -r config src/`, then `grep -r KEY src/`) is an earlier part of the same
        // line (red-team round 67). The quiet-session check re-judges the transcript's shell
        // calls, so it runs only when a call needs facts.
        let may_use_facts = self.facts_in_service && request.pending.len() == 1 && !request.transcript.is_empty();
        let quiet = || {
            !crate::fact_check::work_may_still_run(&request.transcript, None, |call| {
                self.gate.evaluate(call, CallContext::at(request.cwd.as_deref())).action == GateAction::Allow
            })
        };
        let with_facts = if size <= INLINE_GATE_BYTES {
            let judged = evaluate(&self.gate, &request.pending, context_cwd.as_deref(), None);
            let needs_facts =
                judged.0.iter().any(|outcome| outcome.action != GateAction::Deny && !outcome.needs.is_empty());
            if !(may_use_facts && needs_facts && quiet()) {
                return judged;
            }
            true
        } else {
            may_use_facts && quiet()
        };
        // Checking facts reads files and runs git, so it runs on the blocking pool too.
        let checker = with_facts.then(|| {
            FactChecker::on_this_machine(deadline.map_or_else(
                || std::time::Instant::now() + FACT_CHECK_WITHOUT_DEADLINE,
                tokio::time::Instant::into_std,
            ))
        });
        let gate = Arc::clone(&self.gate);
        let pending = request.pending.clone();
        let blocking =
            tokio::task::spawn_blocking(move || evaluate(&gate, &pending, context_cwd.as_deref(), checker.as_ref()));
        let joined = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, blocking).await.ok(),
            None => Some(blocking.await),
        };
        match joined {
            Some(Ok(result)) => result,
            // The deadline passed, or the gate panicked: nobody has shown these calls are safe.
            _ => request.pending.iter().map(|call| (GateOutcome::unfinished(&call.name), 0.0)).unzip(),
        }
    }

    /// Decides every pending call, in order.
    pub async fn decide(&self, request: &DecideRequest) -> Vec<DecisionRecord> {
        self.decide_within(request, None).await
    }

    /// Like [`Pipeline::decide`], bounded by `deadline`: the gate always answers (it takes
    /// microseconds); calls still with the classifier when time runs out become `ask` with
    /// stage `timeout`, and the model work in flight is cancelled.
    pub async fn decide_within(
        &self,
        request: &DecideRequest,
        deadline: Option<tokio::time::Instant>,
    ) -> Vec<DecisionRecord> {
        let gated = self.gate_request(request, deadline).await;
        self.finish(request, gated, deadline).await
    }

    /// The first half of [`Pipeline::decide_within`]: runs the gate on every call (and charges
    /// the costly-call budget). Calls the gate routes to the classifier are provisionally `ask`.
    /// The first half of [`Pipeline::decide_within`]: runs the gate on every call and charges
    /// the costly-call budget. Calls the gate routes to the classifier are provisionally `ask`.
    pub async fn gate_request(&self, request: &DecideRequest, deadline: Option<tokio::time::Instant>) -> GatedRequest {
        let started = Instant::now();
        let session = request.session_id.as_deref();
        let (outcomes, gate_latencies) = self.gate_all(request, deadline).await;
        // Charged in request order; once the store fails, the request's other costly calls are
        // unreadable at once rather than each waiting out the store's timeout.
        let mut budgets = Vec::with_capacity(outcomes.len());
        let mut store_failure: Option<StoreError> = None;
        for outcome in &outcomes {
            let budget = match &store_failure {
                Some(error) => CostlyBudget::unread(session, outcome, error),
                None => match bounded(deadline, self.costly_budget.charge(session, outcome)).await {
                    Ok(budget) => budget,
                    // The store failed, or the deadline cut the charge short: unread either way.
                    Err(error) => {
                        let budget = CostlyBudget::unread(session, outcome, &error);
                        store_failure = Some(error);
                        budget
                    }
                },
            };
            budgets.push(budget);
        }
        let records: Vec<DecisionRecord> = request
            .pending
            .iter()
            .zip(outcomes.iter().zip(&budgets))
            .zip(&gate_latencies)
            .map(|((call, (outcome, budget)), gate_latency_ms)| DecisionRecord {
                decision: finalize(call, outcome, budget, &Classifier::NotConfigured),
                gate: budget.as_recorded(outcome),
                screen: None,
                review: None,
                session_locked: false,
                transcript_error: None,
                gate_latency_ms: *gate_latency_ms,
                latency_ms: 0.0,
            })
            .collect();
        let classified: Vec<usize> = (0..outcomes.len())
            .filter(|index| outcomes[*index].action == GateAction::Classify && budgets[*index].refusal().is_none())
            .collect();
        let needs_model = self.has_classifier() && !classified.is_empty();
        GatedRequest { outcomes, budgets, classified, records, needs_model, started }
    }

    /// The first configured model stage: where a call that no model judged stopped.
    fn first_model_stage(&self) -> Stage {
        if self.screen.is_some() { Stage::Screen } else { Stage::Review }
    }

    /// Finishes a gated request without its model work, when the service has no model slot
    /// free: each call the gate sent to the classifier is `ask` (`model_busy`), the rest keep
    /// the gate's answer.
    pub fn shed(&self, request: &DecideRequest, gated: GatedRequest) -> Vec<DecisionRecord> {
        let evidence = Classifier::ServiceBusy { stage: self.first_model_stage() };
        let GatedRequest { outcomes, budgets, classified, mut records, started, .. } = gated;
        for index in classified {
            records[index].decision = finalize(&request.pending[index], &outcomes[index], &budgets[index], &evidence);
        }
        let latency = millis(started.elapsed());
        for record in &mut records {
            record.latency_ms = latency;
        }
        records
    }

    /// The second half of [`Pipeline::decide_within`]: the classifier stages for the calls the
    /// gate routed to them, bounded by `deadline`, then [`finalize`] for each. `gated` must come
    /// from [`Pipeline::gate_request`] for the same `request`.
    pub async fn finish(
        &self,
        request: &DecideRequest,
        gated: GatedRequest,
        deadline: Option<tokio::time::Instant>,
    ) -> Vec<DecisionRecord> {
        let GatedRequest { outcomes, budgets, classified, mut records, needs_model, started } = gated;
        let session = request.session_id.as_deref();
        let settle = |records: &mut [DecisionRecord], indices: &[usize], evidence: &Classifier<'_>| {
            for index in indices {
                records[*index].decision =
                    finalize(&request.pending[*index], &outcomes[*index], &budgets[*index], evidence);
            }
        };
        if needs_model {
            match bounded(deadline, self.sessions.is_locked(session)).await {
                Err(error) => settle(&mut records, &classified, &Classifier::SessionUnreadable { kind: error.kind() }),
                Ok(true) => {
                    for index in &classified {
                        records[*index].session_locked = true;
                    }
                    settle(&mut records, &classified, &Classifier::SessionLocked);
                }
                Ok(false) => {
                    // Past the per-request bound, calls go to a person rather than queue.
                    let judged_count = classified.len().min(self.max_calls_per_request);
                    let (judged, over_limit) = classified.split_at(judged_count);
                    let limit = Classifier::OverCallLimit {
                        limit: self.max_calls_per_request,
                        stage: self.first_model_stage(),
                    };
                    settle(&mut records, over_limit, &limit);
                    let classify = self.classify(request, &outcomes, &budgets, judged, &mut records);
                    let finished = match deadline {
                        Some(deadline) => tokio::time::timeout_at(deadline, classify).await.is_ok(),
                        None => {
                            classify.await;
                            true
                        }
                    };
                    if !finished {
                        settle(&mut records, judged, &Classifier::TimedOut);
                    }
                }
            }
        }
        let latency = millis(started.elapsed());
        for record in &mut records {
            record.latency_ms = latency;
        }
        records
    }

    /// Runs the stages for the judged calls, finalizes each, and applies the session updates
    /// the decisions call for. The caller bounds it by the request's deadline: if it is cut
    /// short, every judged call is finalized as timed out instead.
    async fn classify(
        &self,
        request: &DecideRequest,
        outcomes: &[GateOutcome],
        budgets: &[Budget],
        judged: &[usize],
        records: &mut [DecisionRecord],
    ) {
        let session = request.session_id.as_deref();
        let rendered = transcript::render(request, &self.questionnaire_tools, self.transcript_budget);
        let transcript = match &rendered {
            Ok(rendered) => Some(rendered.text.as_str()),
            Err(error) => {
                for index in judged {
                    records[*index].transcript_error = Some(error.to_string());
                }
                None
            }
        };

        // Stage 1: screens, concurrently. Irreversible calls skip it: a screen may only allow.
        // A trained head may clear only calls whose gate findings carry no signal of harm (its
        // measured weakness lies in the others); they go straight to the review.
        let mut escalated: Vec<usize> = Vec::new();
        if let Some(screen) = &self.screen {
            let trained_head = screen.model.is_trained_head();
            let screenable = |index: &usize| {
                outcomes[*index].model_may_allow
                    && (!trained_head || super::eligibility::head_may_clear(&outcomes[*index]))
            };
            let screened: Vec<usize> = judged.iter().copied().filter(screenable).collect();
            escalated.extend(judged.iter().copied().filter(|index| !screenable(index)));
            let answers = join_all(
                screened
                    .iter()
                    .map(|index| self.screen_one(screen, transcript, &request.transcript, &request.pending[*index])),
            )
            .await;
            for (index, record) in screened.into_iter().zip(answers) {
                let verdict = Screened {
                    record: &record,
                    threshold: screen.threshold,
                    reports_probabilities: screen.model.reports_probabilities(),
                };
                // A cleared call is settled; a busy screen goes to a person now, since the
                // review would wait for the same busy slots.
                let settled = verdict.clears() || record.error_kind.as_deref() == Some(ModelError::BUSY_KIND);
                records[index].screen = Some(record);
                if !settled {
                    escalated.push(index);
                }
            }
            escalated.sort_unstable();
        } else {
            escalated.extend_from_slice(judged);
        }

        // Stage 2: one review for everything the screen escalated.
        let mut options: Vec<Option<String>> = vec![None; records.len()];
        if let Some(review) = &self.review
            && !escalated.is_empty()
        {
            let calls: Vec<&PendingCall> = escalated.iter().map(|index| &request.pending[*index]).collect();
            let results = self.review_calls(review, transcript, &calls).await;
            for (index, (record, option)) in escalated.iter().zip(results) {
                records[*index].review = Some(record);
                options[*index] = option;
            }
        }

        // The decisions, then the session updates they call for, in the order the stages
        // answered (the screen's, then the review's). An update that fails leaves the streak
        // higher or a denial uncounted; it is logged and counted by the store's metrics, and
        // the call keeps its decision.
        for index in judged {
            let record = &records[*index];
            let screen = self.screen.as_ref().and_then(|screen| {
                Some(Screened {
                    record: record.screen.as_ref()?,
                    threshold: screen.threshold,
                    reports_probabilities: screen.model.reports_probabilities(),
                })
            });
            let review = self.review.as_ref().and_then(|review| {
                Some(Reviewed {
                    record: record.review.as_ref()?,
                    option: options[*index].as_deref(),
                    on_error: review.on_error,
                    on_deny: review.on_deny,
                })
            });
            let decision = finalize(
                &request.pending[*index],
                &outcomes[*index],
                &budgets[*index],
                &Classifier::Judged { screen, review },
            );
            records[*index].decision = decision;
        }
        let mut updates: Vec<(bool, usize, SessionUpdate)> = judged
            .iter()
            .filter_map(|index| {
                let decision = &records[*index].decision;
                Some((decision.stage != Stage::Screen, *index, session_update(decision)?))
            })
            .collect();
        updates.sort_unstable_by_key(|(after_screen, index, _)| (*after_screen, *index));
        for (_, _, update) in updates {
            let _ = match update {
                SessionUpdate::ClassifierAllowed => self.sessions.record_classifier_allow(session).await,
                SessionUpdate::ClassifierDenied => self.sessions.record_classifier_denial(session).await,
            };
        }
    }

    async fn screen_one(
        &self,
        screen: &ScreenStage,
        transcript: Option<&str>,
        events: &[crate::request::TranscriptEvent],
        call: &PendingCall,
    ) -> StageRecord {
        let Some(transcript) = transcript else {
            return error_record(screen.model.as_ref(), &ModelError::OverBudget, 0.0, 1);
        };
        let request = match self.prompts.screen(transcript, call) {
            // A trained head reads the user's latest words and the call, not the rendered prompt.
            Ok(request) if screen.model.is_trained_head() => crate::model::ModelRequest {
                screen_input: Some(crate::model::local::head::ScreenInput::of(events, call)),
                ..request
            },
            Ok(request) => request,
            Err(error) => {
                return error_record(screen.model.as_ref(), &ModelError::Malformed(error.to_string()), 0.0, 1);
            }
        };
        let span = tracing::info_span!("screen", call = %call.id, model = %screen.model.name());
        let (result, latency_ms) = tracing::Instrument::instrument(
            ask_model(screen.model.as_ref(), &request, screen.timeout, &self.model_slots),
            span,
        )
        .await;
        match result {
            Ok(answer) => {
                let choice = answer.choices.into_iter().next().unwrap_or_else(|| crate::model::Choice {
                    question: String::new(),
                    option: String::new(),
                    probabilities: None,
                });
                let p_allow = choice.probabilities.as_ref().and_then(|probabilities| probabilities.get(ALLOW).copied());
                StageRecord {
                    model: screen.model.name(),
                    choice: Some(choice.option),
                    probabilities: choice.probabilities,
                    p_allow,
                    reasoning: answer.reasoning,
                    latency_ms,
                    usage: answer.usage,
                    batch_size: 1,
                    ..StageRecord::default()
                }
            }
            Err(error) => error_record(screen.model.as_ref(), &error, latency_ms, 1),
        }
    }

    /// Reviews the escalated calls: one request for one call, one batched request for several.
    /// Returns, per call, its record and the chosen option (`None` on any failure).
    async fn review_calls(
        &self,
        review: &ReviewStage,
        transcript: Option<&str>,
        calls: &[&PendingCall],
    ) -> Vec<(StageRecord, Option<String>)> {
        let batch_size = calls.len();
        let failed = |error: ModelError, latency_ms: f64| {
            calls.iter().map(|_| (error_record(review.model.as_ref(), &error, latency_ms, batch_size), None)).collect()
        };
        let Some(transcript) = transcript else { return failed(ModelError::OverBudget, 0.0) };
        let request = match calls {
            [single] => self.prompts.review(transcript, single),
            several => self.prompts.batch(transcript, several),
        };
        let request = match request {
            Ok(request) => request,
            Err(error) => return failed(ModelError::Malformed(error.to_string()), 0.0),
        };
        let span = tracing::info_span!("review", calls = calls.len(), model = %review.model.name());
        let (result, latency_ms) = tracing::Instrument::instrument(
            ask_model(review.model.as_ref(), &request, review.timeout, &self.model_slots),
            span,
        )
        .await;
        let answer = match result {
            Ok(answer) => answer,
            // A failed batched review fails every member closed.
            Err(error) => return failed(error, latency_ms),
        };
        request
            .questions
            .iter()
            .map(|question| {
                let choice = answer.choices.iter().find(|choice| choice.question == question.id);
                let record = StageRecord {
                    model: review.model.name(),
                    choice: choice.map(|choice| choice.option.clone()),
                    probabilities: choice.and_then(|choice| choice.probabilities.clone()),
                    p_allow: choice.and_then(|choice| choice.probabilities.as_ref()?.get(ALLOW).copied()),
                    reasoning: answer.reasoning.clone(),
                    latency_ms,
                    usage: answer.usage,
                    batch_size,
                    ..StageRecord::default()
                };
                (record, choice.map(|choice| choice.option.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
