//! Fuzzes the request parser and the engine behind it: any bytes as a decide request. Parsing
//! must not panic, and every parsed request gets exactly one decision per pending call.
#![no_main]

use libfuzzer_sys::fuzz_target;
use permit::config::Config;
use permit::engine::Engine;
use permit::request::DecideRequest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(request) = DecideRequest::from_json(text) else { return };
    let Ok(engine) = Engine::new(Config::default()) else { return };
    let response = engine.decide(&request);
    assert_eq!(response.decisions.len(), request.pending.len());
});
