//! Stages 1 and 2: the screen and review models, and what surrounds them (questions, the
//! reasoning-blind transcript, prompts, batches and session policy).

pub mod budget;
pub mod eligibility;
pub mod finalize;
pub(crate) mod pipeline;
pub mod prompts;
pub mod questions;
pub mod record;
pub mod session;
pub mod transcript;
