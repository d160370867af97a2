//! permit decides whether an autonomous agent's pending tool call may run without a person:
//! **allow**, **deny** (with a fixed reason the agent sees) or **ask** (escalate to a human).
//!
//! The library API, for Rust agents:
//! ```
//! use permit::{config::Config, engine::Engine, request::DecideRequest};
//!
//! let engine = Engine::new(Config::default()).unwrap();
//! let request = DecideRequest::from_json(
//!     r#"{"cwd": "/workspace", "pending": [{"id": "c1", "name": "Bash", "input": {"command": "git status"}}]}"#,
//! ).unwrap();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let response = runtime.block_on(engine.decide(&request));
//! assert_eq!(response.decisions[0].decision, permit::decision::Decision::Allow);
//! ```

pub mod classifier;
pub mod cli;
pub mod config;
pub mod decision;
pub mod engine;
pub mod eval;
pub mod gate;
pub mod hook;
pub mod model;
pub mod request;
pub mod server;
pub mod session_store;
