//! permit decides whether an autonomous agent's pending tool call may run without a person:
//! **allow**, **deny** (with a fixed reason the agent sees) or **ask** (escalate to a human).
//!
//! The library API, for Rust agents: build an [`Engine`] from a [`Config`] and ask it about a
//! [`DecideRequest`]. The engine is the only way in; the types it takes and returns are
//! re-exported here.
//! ```
//! use permit::{Config, Decision, DecideRequest, Engine};
//!
//! let engine = Engine::new(Config::default()).unwrap();
//! let request = DecideRequest::from_json(
//!     r#"{"cwd": "/workspace", "pending": [{"id": "c1", "name": "Bash", "input": {"command": "git status"}}]}"#,
//! ).unwrap();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let response = runtime.block_on(engine.decide(&request));
//! assert_eq!(response.decisions[0].decision, Decision::Allow);
//! ```
//!
//! A host that brings its own model implements [`DecisionModel`] and passes it to
//! [`Engine::with_models`]; the `testing` feature adds a scripted one for its tests.

pub mod classifier;
pub mod config;
pub mod decision;
pub mod engine;
pub mod fact_check;
pub mod gate;
pub mod model;
pub mod request;
pub mod session_store;

// The binary's commands and services. Public only so that `main.rs` and the integration tests
// under `tests/` can reach them; they are not API and may change in any release.
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod eval;
#[doc(hidden)]
pub mod hook;
#[doc(hidden)]
pub mod server;

pub use config::{Config, ConfigError};
pub use decision::{Decision, GateAction, ReasonCode, Tier};
pub use engine::{DecisionRecord, Engine, EngineError, GatedRequest, StageRecord};
pub use model::{DecisionModel, ModelAnswer, ModelError, ModelRequest};
pub use request::{CallDecision, DecideRequest, DecideResponse, PendingCall, Stage};
