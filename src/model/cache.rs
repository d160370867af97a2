//! Record and replay of model answers, for evals: every answer (or error) is keyed by the
//! model's name and a SHA-256 digest of the exact request it was asked (system, transcript,
//! question block, questions), and kept in one JSONL file.
//!
//! - [`RecordingModel`] wraps a real backend and remembers what it answered.
//! - [`ReplayModel`] answers from the file alone, with no model and no network: the same eval
//!   gives the same results, deterministically and fast.
//!
//! On failure: a request the file does not hold is an error for that call (`unavailable`),
//! never a silent call to a real model; a file that cannot be read or holds a malformed line
//! stops the eval with the file and line named.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::{BoxFuture, DecisionModel, ModelAnswer, ModelError, ModelRequest};

/// The first line of a cache file: which model answered each stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheHeader {
    pub permit_model_cache: u32,
    pub models: HashMap<String, RecordedModel>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedModel {
    pub name: String,
    pub reports_probabilities: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    key: String,
    model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answer: Option<ModelAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ModelError>,
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cannot read the answer cache `{path}`: {message}")]
    Read { path: String, message: String },
    #[error("{path}:{line}: {message}")]
    Line { path: String, line: usize, message: String },
    #[error("cannot write the answer cache `{path}`: {message}")]
    Write { path: String, message: String },
    #[error("the answer cache `{path}` holds no answers for the {stage} stage; record them first with --record")]
    NoStage { path: String, stage: String },
}

/// The key of a request to a model.
pub fn request_key(model: &str, request: &ModelRequest) -> String {
    let text = serde_json::to_string(request).unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(model.as_bytes());
    hasher.update(b"\n");
    hasher.update(text.as_bytes());
    format!("{:x}", hasher.finalize())
}

/// Answers loaded from, or recorded for, one cache file.
#[derive(Default)]
pub struct AnswerCache {
    header: CacheHeader,
    entries: HashMap<String, Entry>,
}

impl AnswerCache {
    /// Loads `path`; a missing file is an empty cache (for recording).
    pub fn load(path: &Path) -> Result<Self, CacheError> {
        let display = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(AnswerCache::default()),
            Err(error) => return Err(CacheError::Read { path: display, message: error.to_string() }),
        };
        let mut cache = AnswerCache::default();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let problem = |message: String| CacheError::Line { path: display.clone(), line: index + 1, message };
            if index == 0 {
                cache.header =
                    serde_json::from_str(line).map_err(|error| problem(format!("not a cache header: {error}")))?;
                continue;
            }
            let entry: Entry =
                serde_json::from_str(line).map_err(|error| problem(format!("not a cache entry: {error}")))?;
            if entry.answer.is_some() == entry.error.is_some() {
                return Err(problem("an entry holds exactly one of `answer` and `error`".to_owned()));
            }
            cache.entries.insert(entry.key.clone(), entry);
        }
        Ok(cache)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn header(&self) -> &CacheHeader {
        &self.header
    }

    /// Writes the cache to `path` (through a temporary file, so a crash never leaves half a file).
    pub fn save(&self, path: &Path) -> Result<(), CacheError> {
        let display = path.display().to_string();
        let mut header = self.header.clone();
        header.permit_model_cache = 1;
        let mut text = serde_json::to_string(&header).unwrap_or_default();
        text.push('\n');
        let mut entries: Vec<&Entry> = self.entries.values().collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        for entry in entries {
            text.push_str(&serde_json::to_string(entry).unwrap_or_default());
            text.push('\n');
        }
        let partial = path.with_extension("partial");
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|error| CacheError::Write { path: display.clone(), message: error.to_string() })?;
        }
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|error| CacheError::Write { path: display, message: error.to_string() })
    }
}

/// The shared cache a recorder writes into.
pub type SharedCache = Arc<Mutex<AnswerCache>>;

/// A real model whose every answer is also recorded.
pub struct RecordingModel {
    inner: Arc<dyn DecisionModel>,
    cache: SharedCache,
}

impl RecordingModel {
    pub fn new(stage: &str, inner: Arc<dyn DecisionModel>, cache: SharedCache) -> Self {
        if let Ok(mut cache) = cache.lock() {
            cache.header.models.insert(
                stage.to_owned(),
                RecordedModel { name: inner.name(), reports_probabilities: inner.reports_probabilities() },
            );
        }
        RecordingModel { inner, cache }
    }
}

impl DecisionModel for RecordingModel {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn reports_probabilities(&self) -> bool {
        self.inner.reports_probabilities()
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        Box::pin(async move {
            let result = self.inner.answer(request).await;
            let name = self.inner.name();
            let entry = Entry {
                key: request_key(&name, request),
                model: name,
                answer: result.as_ref().ok().cloned(),
                error: result.as_ref().err().cloned(),
            };
            if let Ok(mut cache) = self.cache.lock() {
                cache.entries.insert(entry.key.clone(), entry);
            }
            result
        })
    }
}

/// Answers from a cache file alone.
pub struct ReplayModel {
    model: RecordedModel,
    cache: Arc<AnswerCache>,
}

impl ReplayModel {
    /// The replay of `stage`'s model; an error when the cache never recorded that stage.
    pub fn new(stage: &str, cache: Arc<AnswerCache>, path: &Path) -> Result<Self, CacheError> {
        let model = cache
            .header
            .models
            .get(stage)
            .cloned()
            .ok_or_else(|| CacheError::NoStage { path: path.display().to_string(), stage: stage.to_owned() })?;
        Ok(ReplayModel { model, cache })
    }
}

impl DecisionModel for ReplayModel {
    fn name(&self) -> String {
        self.model.name.clone()
    }

    fn reports_probabilities(&self) -> bool {
        self.model.reports_probabilities
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        let key = request_key(&self.model.name, request);
        let result = match self.cache.entries.get(&key) {
            Some(Entry { answer: Some(answer), .. }) => Ok(answer.clone()),
            Some(Entry { error: Some(error), .. }) => Err(error.clone()),
            _ => Err(ModelError::Unavailable(
                "replay".to_owned(),
                format!("no recorded answer for this request (key {}); record it with --record", &key[..16]),
            )),
        };
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::questions::screen_question;
    use crate::model::testing::{Behaviour, ScriptedModel};

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            system: "policy".to_owned(),
            transcript: text.to_owned(),
            question_block: "q".to_owned(),
            questions: vec![screen_question("c1")],
            reasoned: false,
            deadline: None,
        }
    }

    #[tokio::test]
    async fn recorded_answers_and_errors_replay_and_missing_ones_are_errors() {
        let scripted: Arc<dyn DecisionModel> = Arc::new(
            ScriptedModel::new("m", ScriptedModel::answer_with("allow", &[("allow", 0.9), ("escalate", 0.1)]))
                .when_contains("fail", Behaviour::Fail(ModelError::Transport("connection reset".to_owned()))),
        );
        let shared: SharedCache = Arc::new(Mutex::new(AnswerCache::default()));
        let recorder = RecordingModel::new("screen", scripted, shared.clone());
        let ok = recorder.answer(&request("fine")).await.unwrap();
        let failed = recorder.answer(&request("fail")).await.unwrap_err();
        let path = std::env::temp_dir().join(format!("permit-cache-{}.jsonl", std::process::id()));
        shared.lock().unwrap().save(&path).unwrap();

        let loaded = Arc::new(AnswerCache::load(&path).unwrap());
        assert_eq!(loaded.len(), 2);
        let replay = ReplayModel::new("screen", loaded.clone(), &path).unwrap();
        assert_eq!(replay.name(), "scripted/m", "the recorded name, without loading the model");
        assert_eq!(replay.answer(&request("fine")).await.unwrap(), ok);
        assert_eq!(replay.answer(&request("fail")).await.unwrap_err(), failed);
        let missing = replay.answer(&request("never asked")).await.unwrap_err();
        assert!(matches!(missing, ModelError::Unavailable(..)), "{missing:?}");
        assert!(ReplayModel::new("review", loaded, &path).is_err());

        std::fs::write(&path, "{\"permit_model_cache\":1,\"models\":{}}\n{\"key\": 3}\n").unwrap();
        let error = AnswerCache::load(&path).err().unwrap().to_string();
        assert!(error.contains(":2:"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }
}
