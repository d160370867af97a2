//! A deterministic model for tests, keyed on request content: it answers from rules over the
//! text it is shown, or fails in a chosen way. It never calls anything.
//!
//! Used by unit and integration tests of the pipeline; not selectable from a config.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::model::{BoxFuture, Choice, DecisionModel, ModelAnswer, ModelError, ModelRequest, Usage};

/// How the scripted model behaves for one request.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// Answer every question with this option and these probabilities (option id, P) if given.
    Answer { option: String, probabilities: Option<Vec<(String, f64)>> },
    /// Answer with exactly these choices (for malformed answers).
    Raw(Vec<Choice>),
    /// Fail with this error.
    Fail(ModelError),
    /// Never answer in time: sleep this long first (the pipeline's timeout should fire).
    Stall(Duration),
}

/// Picks a behaviour from the text of the request (transcript and question block).
type Rule = Box<dyn Fn(&ModelRequest) -> Option<Behaviour> + Send + Sync>;

pub struct ScriptedModel {
    name: String,
    rules: Vec<Rule>,
    fallback: Behaviour,
    calls: AtomicUsize,
    seen: Mutex<Vec<ModelRequest>>,
}

impl ScriptedModel {
    pub fn new(name: &str, fallback: Behaviour) -> Self {
        Self {
            name: name.to_owned(),
            rules: Vec::new(),
            fallback,
            calls: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// When the request text contains `needle`, behave as `behaviour`.
    pub fn when_contains(mut self, needle: &str, behaviour: Behaviour) -> Self {
        let needle = needle.to_owned();
        self.rules.push(Box::new(move |request| {
            (request.transcript.contains(&needle) || request.question_block.contains(&needle))
                .then(|| behaviour.clone())
        }));
        self
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every request the model was shown, in order.
    pub fn seen(&self) -> Vec<ModelRequest> {
        self.seen.lock().map(|seen| seen.clone()).unwrap_or_default()
    }

    pub fn answer_all(option: &str) -> Behaviour {
        Behaviour::Answer { option: option.to_owned(), probabilities: None }
    }

    pub fn answer_with(option: &str, probabilities: &[(&str, f64)]) -> Behaviour {
        Behaviour::Answer {
            option: option.to_owned(),
            probabilities: Some(probabilities.iter().map(|(id, p)| ((*id).to_owned(), *p)).collect()),
        }
    }
}

impl DecisionModel for ScriptedModel {
    fn name(&self) -> String {
        format!("scripted/{}", self.name)
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(request.clone());
            }
            let behaviour = self.rules.iter().find_map(|rule| rule(request)).unwrap_or_else(|| self.fallback.clone());
            let usage = Usage { prompt_tokens: Some(100), completion_tokens: Some(1), cached_tokens: None };
            match behaviour {
                Behaviour::Answer { option, probabilities } => Ok(ModelAnswer {
                    choices: request
                        .questions
                        .iter()
                        .map(|question| Choice {
                            question: question.id.clone(),
                            option: option.clone(),
                            probabilities: probabilities.clone().map(|pairs| pairs.into_iter().collect()),
                        })
                        .collect(),
                    reasoning: request.reasoned.then(|| "scripted reasoning".to_owned()),
                    usage,
                }),
                Behaviour::Raw(choices) => Ok(ModelAnswer { choices, reasoning: None, usage }),
                Behaviour::Fail(error) => Err(error),
                Behaviour::Stall(duration) => {
                    tokio::time::sleep(duration).await;
                    Err(ModelError::Transport("stalled".to_owned()))
                }
            }
        })
    }
}
