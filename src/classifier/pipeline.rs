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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::classifier::prompts::Prompts;
use crate::classifier::questions::{ALLOW, agent_reason};
use crate::classifier::session::SessionPolicy;
use crate::classifier::transcript::{self, TranscriptBudget};
use crate::config::{Config, OnDeny, OnError};
use crate::decision::{Decision, GateAction, ReasonCode};
use crate::gate::reversibility::CostlyBudget;
use crate::gate::{CallContext, Gate, GateOutcome};
use crate::model::{DecisionModel, ModelAnswer, ModelError, ModelRequest, Usage, validate_answer};
use crate::request::{CallDecision, DecideRequest, PendingCall, Stage};
use crate::session_store::{self, StoreError, StoreMetrics};

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

/// What one model stage did for one call, for the audit log and the eval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StageRecord {
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<BTreeMap<String, f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_allow: Option<f64>,
    /// The model's reasoning: internal only, never shown to the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: f64,
    pub usage: Usage,
    /// Calls answered by the same model request (1 unless batched).
    pub batch_size: usize,
}

/// Everything about one call's decision: what the audit log and the eval need.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DecisionRecord {
    pub decision: CallDecision,
    pub gate: GateOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen: Option<StageRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<StageRecord>,
    pub session_locked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_error: Option<String>,
    /// Time the gate took for this call.
    pub gate_latency_ms: f64,
    /// Time the whole request took (every call of a request shares it).
    pub latency_ms: f64,
}

pub struct Pipeline {
    gate: Arc<Gate>,
    costly_budget: CostlyBudget,
    sessions: SessionPolicy,
    store_metrics: StoreMetrics,
    prompts: Prompts,
    questionnaire_tools: Vec<String>,
    transcript_budget: TranscriptBudget,
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
    outcomes: Vec<GateOutcome>,
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

/// The decision for a call the gate settled on its own.
pub fn gate_decision(call: &PendingCall, outcome: &GateOutcome) -> CallDecision {
    let (decision, reason_code, reason) = match outcome.action {
        GateAction::Allow => (Decision::Allow, outcome.primary, None),
        GateAction::Ask => (Decision::Ask, outcome.primary, outcome.reason()),
        GateAction::Deny => (Decision::Deny, outcome.primary, outcome.reason()),
        GateAction::Classify => {
            let why = outcome.reason().unwrap_or_default();
            let why = why.strip_prefix("this call needs review: ").unwrap_or(&why).to_owned();
            (
                Decision::Ask,
                ReasonCode::NoClassifier,
                Some(format!(
                    "permit needs a person to approve this call: it needs the classifier ({why}) and none is configured"
                )),
            )
        }
    };
    decision_for(call, outcome, decision, Stage::Gate, reason_code.as_str(), reason)
}

fn decision_for(
    call: &PendingCall,
    outcome: &GateOutcome,
    decision: Decision,
    stage: Stage,
    reason_code: &str,
    reason: Option<String>,
) -> CallDecision {
    CallDecision {
        id: call.id.clone(),
        decision,
        stage,
        tier: outcome.tier,
        reason,
        reason_code: Some(reason_code.to_owned()),
        p_allow: None,
        rules: outcome.rules.clone(),
    }
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

/// The screen's verdict for one call: `true` to skip the review.
fn screen_allows(record: &StageRecord, threshold: f64, reports_probabilities: bool) -> bool {
    match (record.choice.as_deref(), record.p_allow) {
        (Some(ALLOW), Some(p_allow)) => p_allow >= threshold,
        // A model without probabilities decides by its choice; one that should have reported
        // them but did not has given no usable answer.
        (Some(ALLOW), None) => !reports_probabilities,
        _ => false,
    }
}

const MODEL_BUSY_REASON: &str =
    "permit needs a person to approve this call: every model slot stayed busy, so no model judged it in time";

/// Why a call the screen did not clear goes to a person when no review model is configured:
/// the code names what happened (the screen escalated, timed out or failed, or the call is
/// irreversible and no model may allow it), never just that a review is missing.
fn unreviewed(screen: Option<&StageRecord>, model_may_allow: bool) -> (ReasonCode, String) {
    let person = "permit needs a person to approve this call";
    if !model_may_allow {
        return (ReasonCode::Irreversible, format!("{person}: it is irreversible, so no model may allow it"));
    }
    match screen.and_then(|screen| screen.error_kind.as_deref()) {
        Some(ModelError::TIMEOUT_KIND) => (
            ReasonCode::ScreenTimeout,
            format!("{person}: the screen model did not answer in time and no review model is configured"),
        ),
        Some(kind) => (
            ReasonCode::ScreenError,
            format!("{person}: the screen model could not judge it ({kind}) and no review model is configured"),
        ),
        None => (
            ReasonCode::NoReviewModel,
            format!("{person}: the screen did not clear it and no review model is configured"),
        ),
    }
}

impl Pipeline {
    pub fn new(config: &Config, screen: Option<ScreenStage>, review: Option<ReviewStage>) -> Result<Self, String> {
        let gate = Gate::new(config)?;
        let prompts = Prompts::load(&config.prompts).map_err(|error| error.to_string())?;
        let (store, store_metrics) = session_store::build(&config.session)?;
        Ok(Self {
            gate: Arc::new(gate),
            costly_budget: CostlyBudget::new(config.reversibility.costly_budget_per_session, Arc::clone(&store)),
            sessions: SessionPolicy::new(&config.session, store),
            store_metrics,
            prompts,
            questionnaire_tools: config.tools.questionnaire.clone(),
            transcript_budget: TranscriptBudget {
                max_tokens: config.transcript.max_tokens,
                argument_chars: config.transcript.argument_chars,
            },
            screen,
            review,
            max_calls_per_request: config.classifier.max_calls_per_request,
            model_slots: Semaphore::new(config.classifier.max_concurrent_model_calls),
        })
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
        let evaluate = |gate: &Gate, pending: &[PendingCall], cwd: Option<&str>| {
            let _span = tracing::debug_span!("gate", calls = pending.len()).entered();
            let context = CallContext { cwd };
            pending
                .iter()
                .map(|call| {
                    let started = Instant::now();
                    let outcome = gate.evaluate(call, context);
                    (outcome, millis(started.elapsed()))
                })
                .unzip::<_, _, Vec<GateOutcome>, Vec<f64>>()
        };
        let size: usize = request.pending.iter().map(|call| argument_bytes(&call.input)).sum();
        if size <= INLINE_GATE_BYTES {
            return evaluate(&self.gate, &request.pending, context_cwd.as_deref());
        }
        let gate = Arc::clone(&self.gate);
        let pending = request.pending.clone();
        let blocking = tokio::task::spawn_blocking(move || evaluate(&gate, &pending, context_cwd.as_deref()));
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
    pub async fn gate_request(&self, request: &DecideRequest, deadline: Option<tokio::time::Instant>) -> GatedRequest {
        let started = Instant::now();
        let session = request.session_id.as_deref();
        let (mut outcomes, gate_latencies) = self.gate_all(request, deadline).await;
        // Charged in request order; once the store fails, the request's other costly calls are
        // `ask` at once rather than each waiting out the store's timeout.
        let mut store_failure: Option<StoreError> = None;
        for outcome in &mut outcomes {
            match &store_failure {
                Some(error) => self.costly_budget.refuse_unread(session, outcome, error),
                None => {
                    if let Err(error) = bounded(deadline, self.costly_budget.charge(session, outcome)).await {
                        // When the deadline cut the charge short, the outcome is still the
                        // gate's: refuse it here (a no-op when the charge already did).
                        self.costly_budget.refuse_unread(session, outcome, &error);
                        store_failure = Some(error);
                    }
                }
            }
        }
        let records: Vec<DecisionRecord> = request
            .pending
            .iter()
            .zip(&outcomes)
            .zip(&gate_latencies)
            .map(|((call, outcome), gate_latency_ms)| DecisionRecord {
                decision: gate_decision(call, outcome),
                gate: outcome.clone(),
                screen: None,
                review: None,
                session_locked: false,
                transcript_error: None,
                gate_latency_ms: *gate_latency_ms,
                latency_ms: 0.0,
            })
            .collect();
        let needs_model =
            self.has_classifier() && outcomes.iter().any(|outcome| outcome.action == GateAction::Classify);
        GatedRequest { outcomes, records, needs_model, started }
    }

    /// The second half of [`Pipeline::decide_within`]: the classifier stages for the calls the
    /// gate routed to them, bounded by `deadline`. `gated` must come from
    /// [`Pipeline::gate_request`] for the same `request`.
    pub async fn finish(
        &self,
        request: &DecideRequest,
        gated: GatedRequest,
        deadline: Option<tokio::time::Instant>,
    ) -> Vec<DecisionRecord> {
        let GatedRequest { outcomes, mut records, needs_model, started } = gated;
        let session = request.session_id.as_deref();
        let classified: Vec<usize> =
            (0..outcomes.len()).filter(|index| outcomes[*index].action == GateAction::Classify).collect();
        if needs_model {
            let locked = bounded(deadline, self.sessions.is_locked(session)).await;
            if let Err(error) = &locked {
                for index in &classified {
                    records[*index].decision = decision_for(
                        &request.pending[*index],
                        &outcomes[*index],
                        Decision::Ask,
                        Stage::Session,
                        ReasonCode::SessionStoreUnavailable.as_str(),
                        // The kind only: a store's own message (Redis's error text) stays in
                        // the service's log.
                        Some(format!(
                            "permit needs a person to approve this call: the session's state could not be read ({}), so no model judged it",
                            error.kind()
                        )),
                    );
                }
            } else if locked == Ok(true) {
                for index in &classified {
                    let record = &mut records[*index];
                    record.session_locked = true;
                    record.decision = decision_for(
                        &request.pending[*index],
                        &outcomes[*index],
                        Decision::Ask,
                        Stage::Session,
                        ReasonCode::SessionDenialLimit.as_str(),
                        Some("permit needs a person to approve this call: the classifier has denied too many calls in this session, so a person decides from here".to_owned()),
                    );
                }
            } else {
                // Past the per-request bound, calls go to a person rather than queue: a request
                // cannot buy more model calls by holding more calls.
                let judged_count = classified.len().min(self.max_calls_per_request);
                let (judged, over_limit) = classified.split_at(judged_count);
                let stage = if self.screen.is_some() { Stage::Screen } else { Stage::Review };
                for index in over_limit {
                    records[*index].decision = decision_for(
                        &request.pending[*index],
                        &outcomes[*index],
                        Decision::Ask,
                        stage,
                        ReasonCode::ModelCallLimit.as_str(),
                        Some(format!(
                            "permit needs a person to approve this call: the request holds more calls for the classifier than the {} it judges per request",
                            self.max_calls_per_request
                        )),
                    );
                }
                let classify = self.classify(request, &outcomes, judged, &mut records);
                let finished = match deadline {
                    Some(deadline) => tokio::time::timeout_at(deadline, classify).await.is_ok(),
                    None => {
                        classify.await;
                        true
                    }
                };
                if !finished {
                    for index in judged {
                        records[*index].decision = decision_for(
                            &request.pending[*index],
                            &outcomes[*index],
                            Decision::Ask,
                            Stage::Timeout,
                            ReasonCode::DecisionTimeout.as_str(),
                            Some(
                                "permit needs a person to approve this call: the classifier did not decide in time"
                                    .to_owned(),
                            ),
                        );
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

    async fn classify(
        &self,
        request: &DecideRequest,
        outcomes: &[GateOutcome],
        classified: &[usize],
        records: &mut [DecisionRecord],
    ) {
        let session = request.session_id.as_deref();
        let rendered = transcript::render(request, &self.questionnaire_tools, self.transcript_budget);
        let transcript = match &rendered {
            Ok(rendered) => Some(rendered.text.as_str()),
            Err(error) => {
                for index in classified {
                    records[*index].transcript_error = Some(error.to_string());
                }
                None
            }
        };

        // Stage 1: screens, concurrently. Irreversible calls skip it: a screen may only allow.
        let mut escalated: Vec<usize> = Vec::new();
        if let Some(screen) = &self.screen {
            // A trained head may clear only calls whose gate findings carry no signal of harm
            // (its measured weakness lies in the others); they go straight to the review.
            let trained_head = screen.model.is_trained_head();
            let screenable = |index: &usize| {
                outcomes[*index].model_may_allow
                    && (!trained_head || super::eligibility::head_may_clear(&outcomes[*index]))
            };
            let screened: Vec<usize> = classified.iter().copied().filter(screenable).collect();
            escalated.extend(classified.iter().copied().filter(|index| !screenable(index)));
            let answers = join_all(
                screened
                    .iter()
                    .map(|index| self.screen_one(screen, transcript, &request.transcript, &request.pending[*index])),
            )
            .await;
            for (index, record) in screened.into_iter().zip(answers) {
                let allowed = record.error_kind.is_none()
                    && screen_allows(&record, screen.threshold, screen.model.reports_probabilities());
                let p_allow = record.p_allow;
                let busy = record.error_kind.as_deref() == Some(ModelError::BUSY_KIND);
                records[index].screen = Some(record);
                if allowed {
                    let mut decision = decision_for(
                        &request.pending[index],
                        &outcomes[index],
                        Decision::Allow,
                        Stage::Screen,
                        ReasonCode::ScreenAllow.as_str(),
                        None,
                    );
                    decision.p_allow = p_allow;
                    records[index].decision = decision;
                    // A reset that fails leaves the streak higher: stricter, never looser.
                    let _ = self.sessions.record_classifier_allow(session).await;
                } else if busy {
                    // The review would wait for the same busy slots: a person decides now
                    // rather than after a second timeout.
                    records[index].decision = decision_for(
                        &request.pending[index],
                        &outcomes[index],
                        Decision::Ask,
                        Stage::Screen,
                        ReasonCode::ModelBusy.as_str(),
                        Some(MODEL_BUSY_REASON.to_owned()),
                    );
                } else {
                    escalated.push(index);
                }
            }
            escalated.sort_unstable();
        } else {
            escalated.extend_from_slice(classified);
        }
        if escalated.is_empty() {
            return;
        }

        // Stage 2: one review for everything the screen escalated.
        let Some(review) = &self.review else {
            for index in escalated {
                let screen = records[index].screen.as_ref();
                let (code, reason) = unreviewed(screen, outcomes[index].model_may_allow);
                let p_allow = screen.and_then(|screen| screen.p_allow);
                let mut decision = decision_for(
                    &request.pending[index],
                    &outcomes[index],
                    Decision::Ask,
                    Stage::Screen,
                    code.as_str(),
                    Some(reason),
                );
                decision.p_allow = p_allow;
                records[index].decision = decision;
            }
            return;
        };
        let calls: Vec<&PendingCall> = escalated.iter().map(|index| &request.pending[*index]).collect();
        let results = self.review_calls(review, transcript, &calls).await;
        for (index, (record, option)) in escalated.into_iter().zip(results) {
            let p_allow = records[index].screen.as_ref().and_then(|screen| screen.p_allow);
            let mut decision = self
                .review_decision(review, &request.pending[index], &outcomes[index], option.as_deref(), &record, session)
                .await;
            decision.p_allow = p_allow;
            records[index].decision = decision;
            records[index].review = Some(record);
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

    /// Turns a review's option into the call's decision, fail closed.
    async fn review_decision(
        &self,
        review: &ReviewStage,
        call: &PendingCall,
        outcome: &GateOutcome,
        option: Option<&str>,
        record: &StageRecord,
        session: Option<&str>,
    ) -> CallDecision {
        match option {
            // A review error: fail closed as configured.
            None => {
                let kind = record.error_kind.as_deref().unwrap_or("error");
                // A review that got no model slot is told apart from one that failed, but
                // `on_error` governs both: neither judged the call.
                let (code, why) = if kind == ModelError::BUSY_KIND {
                    (
                        ReasonCode::ModelBusy,
                        "every model slot stayed busy, so the review could not judge it in time".to_owned(),
                    )
                } else {
                    (ReasonCode::ReviewError, format!("the review model could not judge it ({kind})"))
                };
                let (decision, reason) = match review.on_error {
                    OnError::Ask => (Decision::Ask, format!("permit needs a person to approve this call: {why}")),
                    OnError::Deny => (
                        Decision::Deny,
                        format!(
                            "permit blocked this call: {why}, and this deployment blocks what it cannot review. Find a safer way to do what the user asked."
                        ),
                    ),
                };
                decision_for(call, outcome, decision, Stage::Review, code.as_str(), Some(reason))
            }
            Some(ALLOW) => {
                if outcome.model_may_allow {
                    // A reset that fails leaves the streak higher: stricter, never looser.
                    let _ = self.sessions.record_classifier_allow(session).await;
                    decision_for(call, outcome, Decision::Allow, Stage::Review, ReasonCode::ReviewAllow.as_str(), None)
                } else {
                    // The reversibility ladder: no model may allow an irreversible call alone.
                    decision_for(call, outcome, Decision::Ask, Stage::Review, ReasonCode::Irreversible.as_str(), Some("permit needs a person to approve this call: it is irreversible, so the review's approval is not enough".to_owned()))
                }
            }
            Some(deny_option) => {
                // A denial that cannot be recorded is logged and counted by the store's metrics;
                // this call is denied all the same.
                let _ = self.sessions.record_classifier_denial(session).await;
                let reason = agent_reason(deny_option).unwrap_or_else(|| {
                    // Unreachable after validation; still never model text.
                    "permit blocked this call. Find a safer way to do what the user asked, and do not try to get around this block.".to_owned()
                });
                // `reviewer` mode: the classifier may only veto, so its deny asks a person; and
                // an operator may turn review denials into questions.
                let decision =
                    if outcome.veto_only || review.on_deny == OnDeny::Ask { Decision::Ask } else { Decision::Deny };
                decision_for(call, outcome, decision, Stage::Review, deny_option, Some(reason))
            }
        }
    }
}

#[cfg(test)]
mod tests;
