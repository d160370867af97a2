//! What the pipeline keeps of each call's decision: the record the audit log, the eval and the
//! metrics read. Data only; it decides nothing and cannot fail.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::gate::GateOutcome;
use crate::model::Usage;
use crate::request::CallDecision;

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

impl StageRecord {
    /// This call's share of the stage's token usage. A batched review reports the whole
    /// batch's tokens on every member, so each member gets `1 / batch_size` of them (whole
    /// tokens, rounded down); the eval's results and the service's token metrics both use it.
    pub fn member_usage(&self) -> Usage {
        let members = self.batch_size.max(1) as u64;
        let part = |count: Option<u64>| count.map(|count| count / members);
        Usage {
            prompt_tokens: part(self.usage.prompt_tokens),
            completion_tokens: part(self.usage.completion_tokens),
            cached_tokens: part(self.usage.cached_tokens),
        }
    }
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
