//! Fuzzes the request parser and the engine behind it: any bytes as a decide request. Parsing
//! must not panic, and every parsed request gets exactly one decision per pending call.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use permit::config::Config;
use permit::engine::Engine;
use permit::request::DecideRequest;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(Config::default()).expect("the default config builds"))
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime"))
}

/// permit catches panics inside brush-parser and answers a parse error (fail closed);
/// libfuzzer-sys's hook would abort on them first, so the default hook is put back. A panic
/// anywhere else still unwinds to libFuzzer and fails the run.
fn restore_default_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = std::panic::take_hook();
    });
}

fuzz_target!(|data: &[u8]| {
    restore_default_panic_hook();
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(request) = DecideRequest::from_json(text) else { return };
    let response = runtime().block_on(engine().decide(&request));
    assert_eq!(response.decisions.len(), request.pending.len());
});
