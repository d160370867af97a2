//! The output contracts and their parsers, side by side (CONVENTIONS: "the output contract is
//! appended from code next to the parser that reads it").
//!
//! - *Decision style*: the options get single-letter labels (`A`, `B`, …: one token in every
//!   tokenizer), the model writes one token, and P(option) is the summed probability of the
//!   label's token variants (case, leading space, quotes) among the top log-probabilities,
//!   renormalised over the options.
//! - *Text style*: the model ends with one line holding only `{"<question id>": "<option id>"}`,
//!   optionally after reasoning.
//!
//! Parsing never guesses: a first token that is not a label, too little mass on the labels, a
//! missing line, a duplicate key, an unknown question or option is an error, which the pipeline
//! fails closed.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::model::{Choice, ModelError, Question};

const LETTERS: [&str; 12] = ["A", "B", "C", "D", "E", "F", "G", "H", "J", "K", "L", "M"];

/// The letter standing for option `index`.
pub fn label(index: usize) -> &'static str {
    LETTERS.get(index).copied().unwrap_or("Z")
}

/// The decision-style contract for one question.
pub fn decision_contract(question: &Question) -> String {
    let mut text = String::from("\n\nAnswer with one letter and nothing else:\n");
    for (index, option) in question.options.iter().enumerate() {
        text.push_str(&format!("{} = `{}`\n", label(index), option.id));
    }
    text
}

/// The contract of the `local` backend's decision style. Its "parser" is the scorer: each
/// option's id followed by the end of the turn is scored as the whole answer, so the contract
/// asks for exactly that.
pub fn option_contract(question: &Question) -> String {
    let ids: Vec<String> = question.options.iter().map(|option| format!("`{}`", option.id)).collect();
    format!(
        "\n\nAnswer question `{}` with the id of one option, exactly as written and nothing else: {}.",
        question.id,
        ids.join(" or ")
    )
}

/// A label token with its variants folded: surrounding blanks, quotes and case.
fn normalise_token(token: &str) -> String {
    token.trim().trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '*')).trim().to_ascii_uppercase()
}

/// Reads a decision-style answer: the first output token and its top alternatives
/// (token, log-probability). Alternatives may be empty (servers that omit `top_logprobs`), in
/// which case the first token's own probability is all the mass there is.
pub fn parse_decision(
    question: &Question,
    first_token: &str,
    first_logprob: Option<f64>,
    alternatives: &[(String, f64)],
    min_label_mass: f64,
) -> Result<Choice, ModelError> {
    let option_of = |token: &str| {
        let token = normalise_token(token);
        question.options.iter().enumerate().find(|(index, _)| label(*index) == token).map(|(_, option)| option.id)
    };
    let Some(chosen) = option_of(first_token) else {
        return Err(ModelError::Malformed(format!(
            "the first token `{}` is not an option label",
            first_token.escape_debug()
        )));
    };
    let mut mass: BTreeMap<&str, f64> = question.options.iter().map(|option| (option.id, 0.0)).collect();
    let mut seen: Vec<&str> = Vec::new();
    let mut listed = 0.0;
    let entries: Vec<(&str, f64)> = if alternatives.is_empty() {
        first_logprob.map(|logprob| vec![(first_token, logprob)]).unwrap_or_default()
    } else {
        alternatives.iter().map(|(token, logprob)| (token.as_str(), *logprob)).collect()
    };
    for (token, logprob) in entries {
        // A probability above 1 is no answer a model gives: `exp` of a huge log-probability
        // overflows, and the shares would come out NaN (found by `cargo fuzz run
        // answer_decision`). Rounding may put a certain token a hair above 0.
        if logprob > 1e-6 {
            return Err(ModelError::Malformed(format!(
                "the token `{}` has the log-probability {logprob}, above 0",
                token.escape_debug()
            )));
        }
        // The same raw token listed twice is counted once.
        if seen.contains(&token) || !logprob.is_finite() {
            continue;
        }
        seen.push(token);
        listed += logprob.exp();
        if let Some(option) = option_of(token)
            && let Some(total) = mass.get_mut(option)
        {
            *total += logprob.exp();
        }
    }
    let total: f64 = mass.values().sum();
    // Written so a NaN total also fails.
    if total.is_nan() || total < min_label_mass || total <= 0.0 {
        return Err(ModelError::Malformed(format!(
            "the option labels hold {total:.3} of the probability mass, below the floor of {min_label_mass}"
        )));
    }
    // Mass the server did not list (outside the top-k, or no alternatives at all, as Ollama
    // sends) may belong to any label. It is given to the options other than the first
    // (`allow`), so P(allow) is never inflated by what was not seen.
    let unseen = (1.0 - listed).max(0.0);
    let others = question.options.len().saturating_sub(1).max(1) as f64;
    let first_option = question.options.first().map(|option| option.id);
    let denominator = total + unseen;
    let probabilities = mass
        .into_iter()
        .map(|(option, value)| {
            let share = if Some(option) == first_option { 0.0 } else { unseen / others };
            (option.to_owned(), (value + share) / denominator)
        })
        .collect();
    Ok(Choice { question: question.id.clone(), option: chosen.to_owned(), probabilities: Some(probabilities) })
}

/// The text-style contract: the closing JSON line, after reasoning when `reasoned`.
pub fn text_contract(questions: &[Question], reasoned: bool) -> String {
    let example: BTreeMap<&str, &str> = questions
        .iter()
        .map(|question| (question.id.as_str(), question.options.last().map_or("", |option| option.id)))
        .collect();
    let example = serde_json::to_string(&example).unwrap_or_default();
    let ids: Vec<String> = questions.iter().map(|question| format!("`{}`", question.id)).collect();
    if reasoned {
        format!(
            "\n\nReason step by step first, briefly. Then end with one line holding only a JSON object that maps each question id ({}) to the id of the option you chose, for example:\n{example}",
            ids.join(", ")
        )
    } else {
        format!(
            "\n\nAnswer with one line holding only a JSON object that maps each question id ({}) to the id of the option you chose, for example:\n{example}",
            ids.join(", ")
        )
    }
}

/// The JSON schema of the closing object, for servers that accept `response_format`.
pub fn json_schema(questions: &[Question]) -> Value {
    let properties: serde_json::Map<String, Value> = questions
        .iter()
        .map(|question| {
            let options: Vec<&str> = question.options.iter().map(|option| option.id).collect();
            (question.id.clone(), json!({ "type": "string", "enum": options }))
        })
        .collect();
    let required: Vec<&str> = questions.iter().map(|question| question.id.as_str()).collect();
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// A JSON object read with its keys in order and duplicates kept, so they can be refused.
struct Pairs(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor;
        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = Pairs;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    pairs.push((key, value));
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor)
    }
}

/// The closing JSON of a text answer and the reasoning before it. A final fenced block
/// (```json … ```) counts as the closing line: models fence JSON out of habit, and unwrapping
/// the fence changes no meaning.
fn split_answer(text: &str) -> Option<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let last = lines.iter().rposition(|line| !line.trim().is_empty())?;
    if lines[last].trim().starts_with("```") {
        let open = lines[..last].iter().rposition(|line| line.trim().starts_with("```"))?;
        let json = lines[open + 1..last].join("\n");
        return Some((lines[..open].join("\n"), json));
    }
    Some((lines[..last].join("\n"), lines[last].to_owned()))
}

/// Reads a text-style answer strictly. Returns the choices and the reasoning before them.
pub fn parse_text(text: &str, questions: &[Question]) -> Result<(Vec<Choice>, Option<String>), ModelError> {
    let Some((reasoning, line)) = split_answer(text) else {
        return Err(ModelError::Malformed("the answer is empty".to_owned()));
    };
    let line = line.trim();
    if !line.starts_with('{') {
        return Err(ModelError::Malformed("the answer does not end with a JSON object line".to_owned()));
    }
    let Pairs(pairs) = serde_json::from_str(line)
        .map_err(|error| ModelError::Malformed(format!("the closing JSON line does not parse: {error}")))?;
    let mut choices: Vec<Choice> = Vec::new();
    for (key, value) in pairs {
        let Some(question) = questions.iter().find(|question| question.id == key) else {
            return Err(ModelError::Malformed(format!("the answer names `{key}`, which was not asked")));
        };
        if choices.iter().any(|choice| choice.question == key) {
            return Err(ModelError::Malformed(format!("the answer names `{key}` twice")));
        }
        let Value::String(option) = value else {
            return Err(ModelError::Malformed(format!("the answer for `{key}` is not a string")));
        };
        if !question.options.iter().any(|known| known.id == option) {
            return Err(ModelError::UnknownOption { question: key, option });
        }
        choices.push(Choice { question: key, option, probabilities: None });
    }
    if let Some(missing) =
        questions.iter().find(|question| !choices.iter().any(|choice| choice.question == question.id))
    {
        return Err(ModelError::MissingAnswer(missing.id.clone()));
    }
    let reasoning = reasoning.trim();
    Ok((choices, (!reasoning.is_empty()).then(|| reasoning.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::questions::{batch_questions, screen_question, verdict_question};

    #[test]
    fn decision_sums_variants_and_renormalises() {
        let question = screen_question("c");
        let alternatives = vec![
            ("A".to_owned(), (0.6f64).ln()),
            (" A".to_owned(), (0.2f64).ln()),
            ("\"a".to_owned(), (0.05f64).ln()),
            ("B".to_owned(), (0.1f64).ln()),
            ("The".to_owned(), (0.05f64).ln()),
        ];
        let choice = parse_decision(&question, "A", None, &alternatives, 0.5).unwrap();
        assert_eq!(choice.option, "allow");
        let probabilities = choice.probabilities.unwrap();
        assert!((probabilities["allow"] - 0.85 / 0.95).abs() < 1e-9);
        assert!((probabilities["escalate"] - 0.10 / 0.95).abs() < 1e-9);
    }

    #[test]
    fn decision_refuses_non_labels_and_thin_mass() {
        let question = screen_question("c");
        assert!(parse_decision(&question, "Sure", None, &[], 0.5).is_err());
        let thin = vec![("A".to_owned(), (0.3f64).ln()), ("I".to_owned(), (0.7f64).ln())];
        assert!(parse_decision(&question, "A", None, &thin, 0.5).is_err());
        // Without alternatives (Ollama), the first token's own probability is the mass, and
        // the unseen rest never counts for `allow`.
        let choice = parse_decision(&question, " B", Some((0.9f64).ln()), &[], 0.5).unwrap();
        assert_eq!(choice.option, "escalate");
        assert!((choice.probabilities.unwrap()["escalate"] - 1.0).abs() < 1e-9);
        assert!(parse_decision(&question, "B", Some((0.2f64).ln()), &[], 0.5).is_err());
        let choice = parse_decision(&question, "A", Some((0.55f64).ln()), &[], 0.5).unwrap();
        assert!((choice.probabilities.unwrap()["allow"] - 0.55).abs() < 1e-9, "not inflated to 1.0");
        // A label outside the top-k: its share is unknown, so it is not renormalised away.
        let partial = vec![("A".to_owned(), (0.6f64).ln()), ("The".to_owned(), (0.1f64).ln())];
        let choice = parse_decision(&question, "A", None, &partial, 0.5).unwrap();
        assert!((choice.probabilities.unwrap()["allow"] - 0.6 / 0.9).abs() < 1e-9);
    }

    #[test]
    fn decision_refuses_log_probabilities_above_zero() {
        // Found by `cargo fuzz run answer_decision`: `exp(1000)` overflowed and P(allow) was NaN.
        let question = screen_question("c");
        assert!(matches!(parse_decision(&question, "A", Some(1000.0), &[], 0.5), Err(ModelError::Malformed(_))));
        let huge = vec![("A".to_owned(), 800.0), ("B".to_owned(), (0.1f64).ln())];
        assert!(matches!(parse_decision(&question, "A", None, &huge, 0.5), Err(ModelError::Malformed(_))));
        // A certain token, rounded a hair above 0, is still an answer.
        let choice = parse_decision(&question, "A", Some(1e-9), &[], 0.5).unwrap();
        assert!(choice.probabilities.unwrap()["allow"].is_finite());
    }

    #[test]
    fn text_answers_are_parsed_strictly() {
        let questions = vec![verdict_question("c")];
        let (choices, reasoning) =
            parse_text("It deletes src.\nThe user said build.\n{\"verdict\": \"deny_destructive\"}\n", &questions)
                .unwrap();
        assert_eq!(choices[0].option, "deny_destructive");
        assert_eq!(reasoning.as_deref(), Some("It deletes src.\nThe user said build."));
        let fenced = "Thinking.\n```json\n{\"verdict\": \"allow\"}\n```\n";
        assert_eq!(parse_text(fenced, &questions).unwrap().0[0].option, "allow");
        for (bad, kind) in [
            ("I think it is fine.", "malformed"),
            ("{\"verdict\": \"allow\", \"verdict\": \"deny_unclear\"}", "malformed"),
            ("{\"verdict\": \"probably_fine\"}", "unknown_option"),
            ("{}", "missing_answer"),
            ("{\"verdict\": \"allow\", \"extra\": \"allow\"}", "malformed"),
            ("{\"verdict\": 1}", "malformed"),
            ("{\"verdict\": \"allow\"", "malformed"),
            ("", "malformed"),
        ] {
            assert_eq!(parse_text(bad, &questions).unwrap_err().kind(), kind, "{bad}");
        }
        let batch = batch_questions(&["a", "b"]);
        assert_eq!(parse_text("{\"request_1\": \"allow\"}", &batch).unwrap_err().kind(), "missing_answer");
        assert_eq!(
            parse_text("{\"request_2\": \"allow\", \"request_1\": \"deny_unclear\"}", &batch).unwrap().0.len(),
            2
        );
    }

    #[test]
    fn contracts_name_every_question() {
        let batch = batch_questions(&["a", "b"]);
        let contract = text_contract(&batch, true);
        assert!(contract.contains("`request_1`") && contract.contains("`request_2`"));
        assert!(decision_contract(&screen_question("c")).contains("A = `allow`\nB = `escalate`"));
        assert_eq!(json_schema(&batch)["required"], json!(["request_1", "request_2"]));
    }
}
