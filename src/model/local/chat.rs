//! The chat template: turns (system, user) messages into the prompt text a GGUF model expects.
//!
//! The template is the file's own `tokenizer.chat_template` (Hugging Face Jinja), rendered with
//! minijinja, the engine of permit's prompts, plus its Python-compatibility methods (`.strip()`,
//! `.startswith()`, …) that such templates call. No `strftime_now` is offered, so templates that
//! print a date fall back to their fixed default and prompts stay identical across days (which
//! keeps the prefix cache warm).
//!
//! On failure: a missing template, one that does not compile, raises, or loses a message in a
//! probe render at load is replaced by ChatML, and the reason is reported. A render error at
//! decision time is a [`ChatTemplateError`] (the caller fails closed).

use minijinja::{Environment, Error, ErrorKind, context};

/// ChatML, the format of SmolLM2, Qwen2 and many fine-tunes.
pub const CHATML: &str = "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// Why the chat template cannot be built or rendered; shows minijinja's message.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    /// The built-in fallback does not compile (a bug in this build).
    #[error("the ChatML template does not compile: {0}")]
    ChatMl(Error),
    /// The compiled template is not in the environment.
    #[error("{0}")]
    Missing(Error),
    #[error("the chat template does not render: {0}")]
    Render(Error),
}

pub struct ChatTemplate {
    environment: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// `gguf` or `chatml`, for the load report.
    pub source: &'static str,
    /// Why the file's template was not used, when it was not.
    pub fallback_reason: Option<String>,
}

fn environment(source: String) -> Result<Environment<'static>, Error> {
    let mut environment = Environment::new();
    environment.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    environment.add_function("raise_exception", |message: String| -> Result<String, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, format!("the template raised: {message}")))
    });
    environment.add_template_owned("chat", source)?;
    Ok(environment)
}

impl ChatTemplate {
    /// The file's template when it renders a probe conversation faithfully, else ChatML.
    pub fn new(template: Option<&str>, bos_token: String, eos_token: String) -> Result<Self, ChatTemplateError> {
        let fallback = |reason: String| -> Result<Self, ChatTemplateError> {
            let environment = environment(CHATML.to_owned()).map_err(ChatTemplateError::ChatMl)?;
            Ok(ChatTemplate {
                environment,
                bos_token: bos_token.clone(),
                eos_token: eos_token.clone(),
                source: "chatml",
                fallback_reason: Some(reason),
            })
        };
        let Some(template) = template else {
            return fallback("the model file has no chat template".to_owned());
        };
        let environment = match environment(template.to_owned()) {
            Ok(environment) => environment,
            Err(error) => return fallback(format!("its chat template does not compile: {error}")),
        };
        let candidate = ChatTemplate {
            environment,
            bos_token: bos_token.clone(),
            eos_token: eos_token.clone(),
            source: "gguf",
            fallback_reason: None,
        };
        const SYSTEM_PROBE: &str = "system probe 7Q";
        const USER_PROBE: &str = "user probe 9Z";
        match candidate.render(SYSTEM_PROBE, USER_PROBE) {
            Ok(text) => match (text.find(SYSTEM_PROBE), text.find(USER_PROBE)) {
                (Some(system), Some(user)) if system < user && text.len() > user + USER_PROBE.len() => Ok(candidate),
                _ => fallback("its chat template drops or reorders the messages".to_owned()),
            },
            Err(error) => fallback(format!("its chat template does not render: {error}")),
        }
    }

    /// The prompt for one system and one user message, ending where the assistant's answer starts.
    pub fn render(&self, system: &str, user: &str) -> Result<String, ChatTemplateError> {
        let template = self.environment.get_template("chat").map_err(ChatTemplateError::Missing)?;
        template
            .render(context! {
                messages => vec![
                    context! { role => "system", content => system },
                    context! { role => "user", content => user },
                ],
                add_generation_prompt => true,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(ChatTemplateError::Render)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's `tokenizer.chat_template`, as stored in its GGUF file.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn template(source: Option<&str>) -> ChatTemplate {
        ChatTemplate::new(source, "<s>".to_owned(), "</s>".to_owned()).unwrap()
    }

    #[test]
    fn the_smollm2_template_renders_chatml() {
        let chat = template(Some(SMOLLM2));
        assert_eq!(chat.source, "gguf");
        assert_eq!(
            chat.render("be strict", "rm -rf build?").unwrap(),
            "<|im_start|>system\nbe strict<|im_end|>\n<|im_start|>user\nrm -rf build?<|im_end|>\n<|im_start|>assistant\n"
        );
        // The fallback renders the same conversation identically.
        assert_eq!(
            template(None).render("be strict", "rm -rf build?").unwrap(),
            chat.render("be strict", "rm -rf build?").unwrap()
        );
    }

    #[test]
    fn python_methods_and_bos_work() {
        let chat = template(Some(
            "{{ bos_token }}{% for m in messages %}[{{ m.role.upper() }}] {{ m.content.strip() }}\n{% endfor %}[ASSISTANT]",
        ));
        assert_eq!(chat.source, "gguf");
        assert_eq!(chat.render("  s  ", " u ").unwrap(), "<s>[SYSTEM] s\n[USER] u\n[ASSISTANT]");
    }

    #[test]
    fn broken_templates_fall_back_to_chatml_with_a_reason() {
        for (source, reason) in [
            ("{% for m in messages %}", "does not compile"),
            ("{{ raise_exception('System role not supported') }}", "does not render"),
            ("{{ messages[1].content }}", "drops or reorders"),
            ("{{ undefined_function() }}", "does not render"),
        ] {
            let chat = template(Some(source));
            assert_eq!(chat.source, "chatml", "{source}");
            assert!(chat.fallback_reason.as_deref().unwrap().contains(reason), "{source}: {:?}", chat.fallback_reason);
        }
        assert!(template(None).fallback_reason.unwrap().contains("no chat template"));
    }
}
