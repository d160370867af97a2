//! An instant OpenAI-compatible model server for `scripts/bench-service.sh`: every chat
//! completion answers the decision-style question with `A` (the first option) at P 0.99, the
//! way OpenAI's API shapes a `logprobs` answer. Usage: `fake_model 127.0.0.1:9999`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark helper: failing loudly is right")]

use axum::Router;
use axum::routing::post;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:9999".to_owned());
    let answer = json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "bench",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": "A" },
            "logprobs": { "content": [{ "token": "A", "logprob": (0.99f64).ln(), "bytes": [65],
                "top_logprobs": [{ "token": "A", "logprob": (0.99f64).ln(), "bytes": [65] },
                                 { "token": "B", "logprob": (0.01f64).ln(), "bytes": [66] }] }] },
            "finish_reason": "length"
        }],
        "usage": { "prompt_tokens": 900, "completion_tokens": 1, "total_tokens": 901 }
    })
    .to_string();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let answer = answer.clone();
            async move { ([("content-type", "application/json")], answer) }
        }),
    );
    let listener = tokio::net::TcpListener::bind(&address).await.expect("cannot bind");
    eprintln!("fake model on http://{address}/v1");
    axum::serve(listener, app).await.unwrap();
}
