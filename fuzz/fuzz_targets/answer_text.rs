//! Fuzzes the text-style answer parser (`permit::model::answer::parse_text`): any bytes as a
//! model's reply to the screen, the review and a batch of three. It must not panic, and an answer
//! it accepts names each asked question exactly once, with one of that question's options, so a
//! reply it cannot read strictly is an error the pipeline fails closed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use permit::classifier::questions::{batch_questions, screen_question, verdict_question};
use permit::model::answer::parse_text;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for questions in [vec![screen_question("c1")], vec![verdict_question("c1")], batch_questions(&["a", "b", "c"])] {
        let Ok((choices, reasoning)) = parse_text(text, &questions) else { continue };
        assert_eq!(choices.len(), questions.len(), "{text:?}");
        for question in &questions {
            let mut answers = choices.iter().filter(|choice| choice.question == question.id);
            let choice = answers.next().expect("every question is answered");
            assert!(answers.next().is_none(), "answered twice: {text:?}");
            assert!(question.options.iter().any(|option| option.id == choice.option), "{text:?}");
            assert!(choice.probabilities.is_none(), "the text style reports no probabilities");
        }
        if let Some(reasoning) = reasoning {
            // The reasoning is the reply's own lines before the answer, never invented text.
            assert!(!reasoning.trim().is_empty(), "{text:?}");
            assert!(reasoning.lines().all(|line| text.contains(line)), "{text:?}");
        }
    }
});
