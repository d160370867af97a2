//! Fuzzes the shell analyser through the whole gate: any bytes as a Bash command. The gate must
//! not panic, and a command it cannot parse must never be allowed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use permit::config::Config;
use permit::decision::{GateAction, ReasonCode};
use permit::gate::{CallContext, Gate, call};

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
    let Ok(command) = std::str::from_utf8(data) else { return };
    let Ok(gate) = Gate::new(&Config::default()) else { return };
    let outcome = gate.evaluate(&call("Bash", serde_json::json!({ "command": command })), CallContext::at(Some("/workspace")));
    if outcome.reason_codes.contains(&ReasonCode::ShellParseError) {
        assert_ne!(outcome.action, GateAction::Allow, "an unparsable command was allowed: {command:?}");
    }
});
