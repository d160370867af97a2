//! The prompts: `prompts/*.md`, compiled in and overridable from the config, rendered by a
//! strict template engine (an undefined variable is an error, not an empty string).
//!
//! Decides the exact text the models see and its layout: system = the shared policy, first user
//! block = the transcript, second user block = the question(s). Screen and review of a request
//! share the first two, so providers can cache them as one prefix. Never renders model output or
//! anything unescaped from the request (the transcript arrives already escaped). A template that
//! fails to load or render stops start-up, or fails the decision closed.

use std::path::Path;

use minijinja::{Environment, UndefinedBehavior, context};
use serde::Serialize;

use crate::classifier::questions::{VERDICT_OPTIONS, batch_questions, screen_question, verdict_question};
use crate::config::PromptsConfig;
use crate::model::{ModelRequest, Question, QuestionOption};
use crate::request::PendingCall;

const POLICY: &str = include_str!("../../prompts/policy.md");
const SCREEN: &str = include_str!("../../prompts/screen.md");
const REVIEW: &str = include_str!("../../prompts/review.md");
const BATCH: &str = include_str!("../../prompts/batch.md");

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("cannot read prompt `{path}`: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("prompt `{name}` is not a valid template: {message}")]
    Template { name: String, message: String },
}

pub struct Prompts {
    environment: Environment<'static>,
}

#[derive(Serialize)]
struct CallView {
    id: String,
    tool: String,
}

impl CallView {
    /// Ids and names are validated as plain identifiers when a request is read; they are
    /// escaped here as well, since they sit outside the transcript's fence.
    fn of(call: &PendingCall) -> Self {
        let clean = |text: &str| crate::classifier::transcript::escape_attribute(text).replace(['`', '\n', '\r'], "_");
        CallView { id: clean(&call.id), tool: clean(&call.name) }
    }
}

#[derive(Serialize)]
struct QuestionView<'a> {
    id: &'a str,
    options: &'a [QuestionOption],
}

#[derive(Serialize)]
struct BatchQuestionView<'a> {
    id: &'a str,
    call: CallView,
}

fn template_error(name: &str, error: minijinja::Error) -> PromptError {
    PromptError::Template { name: name.to_owned(), message: format!("{error:#}") }
}

impl Prompts {
    /// The built-in prompts, with any overrides the config names.
    pub fn load(config: &PromptsConfig) -> Result<Self, PromptError> {
        let mut environment = Environment::new();
        environment.set_undefined_behavior(UndefinedBehavior::Strict);
        // Prompts are Markdown, not HTML: nothing is auto-escaped (the transcript is escaped
        // by the renderer that builds it).
        environment.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        environment.set_keep_trailing_newline(true);
        for (name, built_in, override_path) in [
            ("policy", POLICY, &config.policy),
            ("screen", SCREEN, &config.screen),
            ("review", REVIEW, &config.review),
            ("batch", BATCH, &config.batch),
        ] {
            let source = match override_path {
                Some(path) => read(path)?,
                None => built_in.to_owned(),
            };
            environment.add_template_owned(name, source).map_err(|error| template_error(name, error))?;
        }
        let prompts = Prompts { environment };
        prompts.check()?;
        Ok(prompts)
    }

    /// Renders every template once with sample values, so a template that names an unknown
    /// variable fails at start-up rather than on the first decision.
    fn check(&self) -> Result<(), PromptError> {
        let sample = PendingCall { id: "sample".to_owned(), name: "Bash".to_owned(), ..PendingCall::default() };
        self.system()?;
        self.screen("", &sample)?;
        self.review("", &sample)?;
        self.batch("", &[&sample, &sample])?;
        Ok(())
    }

    fn render(&self, name: &str, values: minijinja::Value) -> Result<String, PromptError> {
        let template = self.environment.get_template(name).map_err(|error| template_error(name, error))?;
        template.render(values).map_err(|error| template_error(name, error))
    }

    pub fn system(&self) -> Result<String, PromptError> {
        self.render("policy", context! {})
    }

    fn single(
        &self,
        name: &str,
        transcript: &str,
        call: &PendingCall,
        question: Question,
        reasoned: bool,
    ) -> Result<ModelRequest, PromptError> {
        let question_block = self.render(
            name,
            context! {
                call => CallView::of(call),
                question => QuestionView { id: &question.id, options: question.options },
            },
        )?;
        Ok(ModelRequest {
            system: self.system()?,
            transcript: transcript.to_owned(),
            question_block,
            questions: vec![question],
            reasoned,
            deadline: None,
            screen_input: None,
        })
    }

    /// The screen request for one pending call.
    pub fn screen(&self, transcript: &str, call: &PendingCall) -> Result<ModelRequest, PromptError> {
        self.single("screen", transcript, call, screen_question(&call.id), false)
    }

    /// The reasoned review request for one pending call.
    pub fn review(&self, transcript: &str, call: &PendingCall) -> Result<ModelRequest, PromptError> {
        self.single("review", transcript, call, verdict_question(&call.id), true)
    }

    /// One review request with a question per call (`request_1`, `request_2`, …).
    pub fn batch(&self, transcript: &str, calls: &[&PendingCall]) -> Result<ModelRequest, PromptError> {
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        let questions = batch_questions(&ids);
        let views: Vec<BatchQuestionView> = questions
            .iter()
            .zip(calls)
            .map(|(question, call)| BatchQuestionView { id: &question.id, call: CallView::of(call) })
            .collect();
        let question_block = self.render("batch", context! { questions => views, options => VERDICT_OPTIONS })?;
        Ok(ModelRequest {
            system: self.system()?,
            transcript: transcript.to_owned(),
            question_block,
            questions,
            reasoned: true,
            deadline: None,
            screen_input: None,
        })
    }
}

fn read(path: &Path) -> Result<String, PromptError> {
    std::fs::read_to_string(path).map_err(|source| PromptError::Read { path: path.display().to_string(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::transcript::render;
    use crate::config::TranscriptConfig;
    use crate::request::DecideRequest;

    fn sample() -> (String, DecideRequest) {
        let request = DecideRequest::from_json(
            r#"{"cwd": "/workspace", "transcript": [
                {"type": "user", "text": "free up some space in the repo"},
                {"type": "assistant", "text": "I'll look at what is large."},
                {"type": "tool_call", "id": "c1", "name": "Bash", "input": {"command": "du -sh *"}},
                {"type": "tool_result", "id": "c1", "content": "120M build\n4K src", "is_error": false},
                {"type": "tool_call", "id": "q1", "name": "AskUserQuestion", "input": {"questions": [{"question": "Delete build/ (120M)?", "header": "Cleanup", "options": [{"label": "Yes"}, {"label": "No"}], "multiSelect": false}]}},
                {"type": "tool_result", "id": "q1", "content": "User has answered your questions: \"Delete build/ (120M)?\"=\"Yes\""}
              ],
              "pending": [{"id": "c2", "name": "Bash", "input": {"command": "rm -rf build"}},
                          {"id": "c3", "name": "Bash", "input": {"command": "rm -rf src"}}]}"#,
        )
        .unwrap();
        let transcript = render(&request, &["AskUserQuestion".to_owned()], TranscriptConfig::default()).unwrap().text;
        (transcript, request)
    }

    fn show(request: &ModelRequest) -> String {
        format!(
            "=== system ===\n{}\n=== user block 1: transcript ===\n{}\n=== user block 2: questions ===\n{}\n=== questions ===\n{}",
            request.system,
            request.transcript,
            request.question_block,
            request
                .questions
                .iter()
                .map(|question| format!(
                    "{} (call {}): {}",
                    question.id,
                    question.call_id,
                    question.options.iter().map(|option| option.id).collect::<Vec<_>>().join(", ")
                ))
                .collect::<Vec<_>>()
                .join("\n")
        )
    }

    #[test]
    fn screen_request_snapshot() {
        let (transcript, request) = sample();
        let prompts = Prompts::load(&PromptsConfig::default()).unwrap();
        insta::assert_snapshot!(show(&prompts.screen(&transcript, &request.pending[0]).unwrap()));
    }

    #[test]
    fn review_request_snapshot() {
        let (transcript, request) = sample();
        let prompts = Prompts::load(&PromptsConfig::default()).unwrap();
        insta::assert_snapshot!(show(&prompts.review(&transcript, &request.pending[0]).unwrap()));
    }

    #[test]
    fn batch_request_snapshot() {
        let (transcript, request) = sample();
        let prompts = Prompts::load(&PromptsConfig::default()).unwrap();
        let calls: Vec<&PendingCall> = request.pending.iter().collect();
        insta::assert_snapshot!(show(&prompts.batch(&transcript, &calls).unwrap()));
    }

    #[test]
    fn screen_and_review_share_the_cacheable_prefix() {
        let (transcript, request) = sample();
        let prompts = Prompts::load(&PromptsConfig::default()).unwrap();
        let screen = prompts.screen(&transcript, &request.pending[0]).unwrap();
        let review = prompts.review(&transcript, &request.pending[0]).unwrap();
        assert_eq!((&screen.system, &screen.transcript), (&review.system, &review.transcript));
        assert_ne!(screen.question_block, review.question_block);
    }

    #[test]
    fn overrides_are_strict() {
        let directory = std::env::temp_dir().join(format!("permit-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let bad = directory.join("screen.md");
        std::fs::write(&bad, "Judge {{ call.id }} with {{ no_such_variable }}").unwrap();
        let config = PromptsConfig { screen: Some(bad.clone()), ..PromptsConfig::default() };
        let error = Prompts::load(&config).err().unwrap().to_string();
        assert!(error.contains("screen") && error.contains("undefined"), "{error}");
        let good = directory.join("policy.md");
        std::fs::write(&good, "Be careful.").unwrap();
        let config = PromptsConfig { policy: Some(good), ..PromptsConfig::default() };
        assert_eq!(Prompts::load(&config).unwrap().system().unwrap(), "Be careful.");
        let config = PromptsConfig { review: Some(directory.join("missing.md")), ..PromptsConfig::default() };
        assert!(Prompts::load(&config).err().unwrap().to_string().contains("cannot read prompt"));
        std::fs::remove_dir_all(directory).unwrap();
    }
}
