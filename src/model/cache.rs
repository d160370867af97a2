//! Record, replay and read-through caching of model answers, for evals: every answer (or
//! error) is keyed by the model's name and a SHA-256 digest of the exact request it was asked
//! (system, transcript, question block, questions), and kept in one JSONL file: a header line
//! naming each stage's model, then one entry a line.
//!
//! - [`RecordingModel`] wraps a real backend and remembers what it answered; the file is written
//!   once, at the end of the run (`--record`).
//! - [`ReplayModel`] answers from the file alone, with no model and no network: the same eval
//!   gives the same results, deterministically and fast (`--replay`).
//! - [`CachingModel`] reads through a [`ReadThroughCache`] (`--cache`): a recorded answer is
//!   reused, any other request asks the real model and its answer is appended to the file the
//!   moment it arrives, so an eval over a paid API that is interrupted (Ctrl-C, a killed
//!   process, a crash) resumes without paying for an answer twice. Errors are never kept by
//!   it: a timeout or a transport error is asked again on the next run rather than frozen.
//!
//! It decides nothing and never turns a missing answer into a made-up one. On failure: a
//! request the file does not hold is, under replay, an error for that call (`unavailable`),
//! never a silent call to a real model; a file that cannot be read or holds a malformed line
//! stops the eval with the file and line named, except a cut-short last line (an append torn by
//! a crash), which is left out with a warning naming it; a read-through cache that cannot be
//! appended to keeps answering (the answers are real) and reports how many answers it could not
//! keep.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
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

/// One parsed line of a cache file.
enum Line {
    Header(CacheHeader),
    Entry(Entry),
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
    /// The 1-based number of a cut-short last line that loading left out.
    torn_line: Option<usize>,
}

impl AnswerCache {
    /// Loads `path`; a missing file is an empty cache (for recording).
    ///
    /// A last line with no final newline that does not parse is an append a crash cut short:
    /// it is left out (see [`AnswerCache::torn_line`]) rather than failing the run, because
    /// every complete line before it is still good. Any other malformed line is an error.
    pub fn load(path: &Path) -> Result<Self, CacheError> {
        let display = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(AnswerCache::default()),
            Err(error) => return Err(CacheError::Read { path: display, message: error.to_string() }),
        };
        // Every append ends with its newline, so only a line without one can have been cut.
        let unterminated = !bytes.is_empty() && !bytes.ends_with(b"\n");
        let lines: Vec<&[u8]> = bytes.strip_suffix(b"\n").unwrap_or(&bytes).split(|byte| *byte == b'\n').collect();
        let last = lines.len().saturating_sub(1);
        let mut cache = AnswerCache::default();
        for (index, raw) in lines.iter().enumerate() {
            let problem = |message: String| CacheError::Line { path: display.clone(), line: index + 1, message };
            // A cut can fall inside a multi-byte character, so UTF-8 is checked per line.
            let parsed = std::str::from_utf8(raw).map_err(|error| format!("not UTF-8: {error}")).and_then(|line| {
                if line.trim().is_empty() {
                    Ok(None)
                } else if index == 0 {
                    serde_json::from_str::<CacheHeader>(line)
                        .map(|header| Some(Line::Header(header)))
                        .map_err(|error| format!("not a cache header: {error}"))
                } else {
                    serde_json::from_str::<Entry>(line)
                        .map(|entry| Some(Line::Entry(entry)))
                        .map_err(|error| format!("not a cache entry: {error}"))
                }
            });
            match parsed {
                Ok(None) => {}
                Ok(Some(Line::Header(header))) => cache.header = header,
                Ok(Some(Line::Entry(entry))) => {
                    if entry.answer.is_some() == entry.error.is_some() {
                        return Err(problem("an entry holds exactly one of `answer` and `error`".to_owned()));
                    }
                    // A later line for the same request wins: a read-through cache appends a
                    // fresh answer after an error a recording kept.
                    cache.entries.insert(entry.key.clone(), entry);
                }
                Err(_) if index == last && unterminated => cache.torn_line = Some(index + 1),
                Err(message) => return Err(problem(message)),
            }
        }
        Ok(cache)
    }

    /// The 1-based number of the cut-short last line that [`AnswerCache::load`] left out.
    pub fn torn_line(&self) -> Option<usize> {
        self.torn_line
    }

    /// The warning to show for a cut-short last line, naming the file and the line.
    pub fn torn_line_warning(&self, path: &Path) -> Option<String> {
        self.torn_line.map(|line| {
            format!(
                "{}:{line}: the last line is cut short (a write interrupted by a crash?); it is left out, so that request has no recorded answer",
                path.display()
            )
        })
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

/// What a read-through cache did during a run, for the end-of-run line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Answers taken from the file: model calls not paid for again.
    pub reused: usize,
    /// New answers appended to the file.
    pub appended: usize,
    /// Model errors, which are not kept (the next run asks again).
    pub errors_not_kept: usize,
    /// New answers that could not be appended, and why the first one failed.
    pub not_kept: usize,
    pub write_error: Option<String>,
}

/// A cache file that answers what it holds and grows by one line per new answer (`--cache`).
pub struct ReadThroughCache {
    path: PathBuf,
    /// Reusable answers by request key. Recorded errors are not here: they are asked again.
    answers: Mutex<HashMap<String, ModelAnswer>>,
    /// The file, open for appending; `None` after a failed write, so a broken file is not
    /// written to again (a partial line followed by more lines would be a malformed middle line).
    file: Mutex<Option<std::fs::File>>,
    stats: Mutex<CacheStats>,
    torn_line_warning: Option<String>,
}

impl ReadThroughCache {
    /// Opens `path` (created when missing) for the models of `stages` (`("screen", model)` …).
    ///
    /// The file is first rewritten whole through a temporary file (see [`AnswerCache::save`]):
    /// that records the stages' models in the header (so `--replay` can use the file later) and
    /// drops a cut-short last line, which an append would otherwise turn into a malformed line
    /// in the middle of the file. From then on it is only appended to.
    pub fn open(path: &Path, stages: &[(&str, &dyn DecisionModel)]) -> Result<Self, CacheError> {
        let mut cache = AnswerCache::load(path)?;
        let torn_line_warning = cache.torn_line_warning(path);
        for (stage, model) in stages {
            cache.header.models.insert(
                (*stage).to_owned(),
                RecordedModel { name: model.name(), reports_probabilities: model.reports_probabilities() },
            );
        }
        cache.save(path)?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|error| CacheError::Write { path: path.display().to_string(), message: error.to_string() })?;
        let answers =
            cache.entries.into_iter().filter_map(|(key, entry)| entry.answer.map(|answer| (key, answer))).collect();
        Ok(ReadThroughCache {
            path: path.to_owned(),
            answers: Mutex::new(answers),
            file: Mutex::new(Some(file)),
            stats: Mutex::default(),
            torn_line_warning,
        })
    }

    /// The warning for a cut-short last line found when the file was opened.
    pub fn torn_line_warning(&self) -> Option<&str> {
        self.torn_line_warning.as_deref()
    }

    /// Reusable answers the cache holds now.
    pub fn len(&self) -> usize {
        self.answers.lock().map(|answers| answers.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> CacheStats {
        self.stats.lock().map(|stats| stats.clone()).unwrap_or_default()
    }

    /// One line for the end of a run.
    pub fn summary(&self) -> String {
        let stats = self.stats();
        let mut text = format!(
            "answer cache `{}`: {} reused, {} new {} appended",
            self.path.display(),
            stats.reused,
            stats.appended,
            plural(stats.appended, "answer", "answers")
        );
        if stats.errors_not_kept > 0 {
            text.push_str(&format!(
                "; {} model {} not kept (asked again next run)",
                stats.errors_not_kept,
                plural(stats.errors_not_kept, "error", "errors")
            ));
        }
        if let Some(error) = &stats.write_error {
            text.push_str(&format!(
                "; {} {} could not be appended ({error}): a rerun pays for {} again",
                stats.not_kept,
                plural(stats.not_kept, "answer", "answers"),
                plural(stats.not_kept, "it", "them")
            ));
        }
        text
    }

    fn reuse(&self, key: &str) -> Option<ModelAnswer> {
        let answer = self.answers.lock().ok()?.get(key).cloned()?;
        if let Ok(mut stats) = self.stats.lock() {
            stats.reused += 1;
        }
        Some(answer)
    }

    /// Appends one answer as one line and flushes it, so it survives the process being killed
    /// right after.
    fn keep(&self, key: String, model: String, answer: &ModelAnswer) {
        use std::io::Write;
        let entry = Entry { key: key.clone(), model, answer: Some(answer.clone()), error: None };
        let mut line = serde_json::to_string(&entry).unwrap_or_default();
        line.push('\n');
        let written = match self.file.lock() {
            Ok(mut file) => match file.as_mut() {
                // One write of the whole line: a crash can cut only this line, never interleave
                // it with another (the lock also keeps concurrent answers apart).
                Some(handle) => match handle.write_all(line.as_bytes()).and_then(|()| handle.flush()) {
                    Ok(()) => Ok(()),
                    Err(error) => {
                        *file = None;
                        Err(error.to_string())
                    }
                },
                None => Err("an earlier write failed".to_owned()),
            },
            Err(_) => Err("the cache file lock is poisoned".to_owned()),
        };
        if let Ok(mut answers) = self.answers.lock() {
            answers.insert(key, answer.clone());
        }
        if let Ok(mut stats) = self.stats.lock() {
            match written {
                Ok(()) => stats.appended += 1,
                Err(error) => {
                    stats.not_kept += 1;
                    // The first failure says why; later ones only follow from it.
                    stats.write_error.get_or_insert(error);
                }
            }
        }
    }

    fn error_not_kept(&self) {
        if let Ok(mut stats) = self.stats.lock() {
            stats.errors_not_kept += 1;
        }
    }
}

fn plural<'a>(count: usize, one: &'a str, many: &'a str) -> &'a str {
    if count == 1 { one } else { many }
}

/// A real model behind a [`ReadThroughCache`]: a request the cache holds is answered from it
/// without calling the model; any other goes to the model, and its answer is appended.
pub struct CachingModel {
    inner: Arc<dyn DecisionModel>,
    cache: Arc<ReadThroughCache>,
}

impl CachingModel {
    pub fn new(inner: Arc<dyn DecisionModel>, cache: Arc<ReadThroughCache>) -> Self {
        CachingModel { inner, cache }
    }
}

impl DecisionModel for CachingModel {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn reports_probabilities(&self) -> bool {
        self.inner.reports_probabilities()
    }

    fn describe(&self) -> Option<String> {
        self.inner.describe()
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        self.inner.ready()
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        Box::pin(async move {
            let name = self.inner.name();
            let key = request_key(&name, request);
            if let Some(answer) = self.cache.reuse(&key) {
                return Ok(answer);
            }
            // If the stage's timeout drops this future while the model is still answering,
            // nothing is appended: a half-received answer is never kept.
            let result = self.inner.answer(request).await;
            match &result {
                Ok(answer) => self.cache.keep(key, name, answer),
                Err(_) => self.cache.error_not_kept(),
            }
            result
        })
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
            screen_input: None,
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

    fn scratch(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("permit-cache-{}-{name}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    const HEADER: &str = "{\"permit_model_cache\":1,\"models\":{}}\n";
    const ENTRY: &str = r#"{"key":"k1","model":"m","answer":{"choices":[],"usage":{}}}"#;

    #[test]
    fn a_cut_short_last_line_is_left_out_with_its_line_named_and_other_bad_lines_are_errors() {
        let path = scratch("torn");
        // A crash in the middle of an append: the last line has no newline and does not parse,
        // here cut inside a multi-byte character.
        let mut bytes = format!("{HEADER}{ENTRY}\n").into_bytes();
        let cut = "{\"key\":\"k2\",\"model\":\"é".as_bytes();
        bytes.extend_from_slice(&cut[..cut.len() - 1]);
        assert!(std::str::from_utf8(&bytes).is_err(), "the cut falls inside `é`");
        std::fs::write(&path, &bytes).unwrap();
        let loaded = AnswerCache::load(&path).unwrap();
        assert_eq!((loaded.len(), loaded.torn_line()), (1, Some(3)));
        let warning = loaded.torn_line_warning(&path).unwrap();
        assert!(warning.contains(&format!("{}:3:", path.display())) && warning.contains("cut short"), "{warning}");

        // The same bad line with its newline is not a cut: it is an error naming file and line.
        bytes.push(b'\n');
        std::fs::write(&path, &bytes).unwrap();
        let error = AnswerCache::load(&path).err().unwrap().to_string();
        assert!(error.starts_with(&format!("{}:3: not UTF-8", path.display())), "{error}");
        // A malformed line in the middle is an error even when the last line is cut.
        std::fs::write(&path, format!("{HEADER}{{\"key\": 3}}\n{ENTRY}\n{{\"key\"")).unwrap();
        let error = AnswerCache::load(&path).err().unwrap().to_string();
        assert!(error.starts_with(&format!("{}:2: not a cache entry", path.display())), "{error}");
        // A complete last line without a newline is a good line.
        std::fs::write(&path, format!("{HEADER}{ENTRY}")).unwrap();
        let loaded = AnswerCache::load(&path).unwrap();
        assert_eq!((loaded.len(), loaded.torn_line()), (1, None));
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test]
    async fn the_read_through_cache_reuses_answers_appends_new_ones_and_never_keeps_errors() {
        let path = scratch("read-through");
        let model = || {
            Arc::new(
                ScriptedModel::new("m", ScriptedModel::answer_with("allow", &[("allow", 0.9), ("escalate", 0.1)]))
                    .when_contains("fail", Behaviour::Fail(ModelError::Timeout(5))),
            )
        };
        let first_model = model();
        let cache = Arc::new(ReadThroughCache::open(&path, &[("screen", first_model.as_ref())]).unwrap());
        let caching = CachingModel::new(first_model.clone(), cache.clone());
        let answer = caching.answer(&request("one")).await.unwrap();
        caching.answer(&request("two")).await.unwrap();
        assert_eq!(caching.answer(&request("one")).await.unwrap(), answer, "asked again within the run");
        caching.answer(&request("fail")).await.unwrap_err();
        assert_eq!(first_model.calls(), 3);
        let stats = cache.stats();
        assert_eq!((stats.reused, stats.appended, stats.errors_not_kept, stats.not_kept), (1, 2, 1, 0));
        assert!(
            cache.summary().contains("1 reused, 2 new answers appended; 1 model error not kept"),
            "{}",
            cache.summary()
        );

        // Every answer is on disk already, without any save: a run killed now loses nothing.
        let on_disk = AnswerCache::load(&path).unwrap();
        assert_eq!(on_disk.len(), 2);
        assert_eq!(on_disk.header().models["screen"].name, "scripted/m", "replayable with --replay");

        // A crash cut the next append short. Reopening warns, drops the cut line, and goes on
        // appending after the good lines.
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, b"{\"key\":\"cut").unwrap();
        drop(file);
        let second_model = model();
        let cache = Arc::new(ReadThroughCache::open(&path, &[("screen", second_model.as_ref())]).unwrap());
        assert!(cache.torn_line_warning().unwrap().contains(":4:"), "{:?}", cache.torn_line_warning());
        let caching = CachingModel::new(second_model.clone(), cache.clone());
        assert_eq!(caching.answer(&request("one")).await.unwrap(), answer);
        caching.answer(&request("two")).await.unwrap();
        caching.answer(&request("fail")).await.unwrap_err();
        caching.answer(&request("three")).await.unwrap();
        assert_eq!(second_model.calls(), 2, "only the error and the new request reach the model");
        let on_disk = AnswerCache::load(&path).unwrap();
        assert_eq!((on_disk.len(), on_disk.torn_line()), (3, None));

        // --replay reads the same file.
        let replay = ReplayModel::new("screen", Arc::new(on_disk), &path).unwrap();
        assert_eq!(replay.answer(&request("one")).await.unwrap(), answer);
        std::fs::remove_file(&path).unwrap();
    }

    /// A full disk: answers still come back (they are real and paid for), and the run's summary
    /// says how many could not be kept.
    #[tokio::test]
    async fn a_cache_that_cannot_be_appended_to_still_answers_and_says_what_was_lost() {
        let model = Arc::new(ScriptedModel::new("m", ScriptedModel::answer_all("allow")));
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let cache = Arc::new(ReadThroughCache {
            path: PathBuf::from("answers.jsonl"),
            answers: Mutex::default(),
            file: Mutex::new(Some(full)),
            stats: Mutex::default(),
            torn_line_warning: None,
        });
        let caching = CachingModel::new(model.clone(), cache.clone());
        caching.answer(&request("one")).await.unwrap();
        caching.answer(&request("two")).await.unwrap();
        caching.answer(&request("one")).await.unwrap();
        assert_eq!(model.calls(), 2);
        let stats = cache.stats();
        assert_eq!((stats.reused, stats.appended, stats.not_kept), (1, 0, 2));
        let summary = cache.summary();
        assert!(
            summary.contains("2 answers could not be appended (") && summary.contains("a rerun pays for them again"),
            "{summary}"
        );
        assert!(stats.write_error.unwrap().contains("No space left"), "the first failure says why");
    }
}
