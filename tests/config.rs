//! Every way `Config::from_toml_str` refuses a config, as one table: each parse error class
//! (bad TOML, an unknown key in every table, an unknown variant, a wrong type, a missing field, a
//! bad listen address) and every branch of the field checks, one row per condition, so a check
//! that stops firing or a message that loses its field name fails here. The rules' examples
//! are checked where the gate is compiled, not by loading (see `src/gate/tests.rs` and
//! `check_config_rejects_bad_configs_with_a_fix` in `tests/cli.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use permit::config::{Config, ModelConfig};

/// A screen on an OpenAI-compatible server, with `extra` lines at the end of its model table.
fn openai_screen(extra: &str) -> String {
    format!("[screen]\n[screen.model]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n{extra}")
}

/// A review on Anthropic, with `extra` lines at the end of its model table.
fn anthropic_review(extra: &str) -> String {
    format!("[review]\n[review.model]\nbackend = \"anthropic\"\nmodel = \"claude\"\n{extra}")
}

/// A screen run locally, with `extra` lines at the end of its model table.
fn local_screen(extra: &str) -> String {
    format!("[screen]\n[screen.model]\nbackend = \"local\"\npath = \"m.gguf\"\n{extra}")
}

/// A rule that passes every field check, with `extra` lines in its table.
fn rule(id: &str, extra: &str) -> String {
    format!("[[rules]]\nid = \"{id}\"\ntool = \"Bash\"\ndecision = \"ask\"\nreason = \"r\"\nmatch = [\"ls\"]\n{extra}")
}

#[test]
fn every_config_error_names_what_to_fix() {
    let long_prefix = "p".repeat(65);
    let cases: Vec<(String, &str)> = vec![
        // Parse errors: not TOML at all.
        ("mode = \n".into(), "config `t.toml` is not valid TOML for permit"),
        ("[server\n".into(), "config `t.toml` is not valid TOML for permit"),
        // An unknown key in every table.
        ("moed = \"auto\"\n".into(), "unknown field `moed`"),
        ("[workspace]\nroot = []\n".into(), "unknown field `root`"),
        ("[tools]\npreset = []\n".into(), "unknown field `preset`"),
        ("[[tools.define]]\nname = \"x\"\nreadonly = true\n".into(), "readonly"),
        (
            "[[tools.define]]\nname = \"x\"\n[tools.define.arguments]\ncommand = \"c\"\n".into(),
            "unknown field `command`",
        ),
        (rule("r", "comand_prefix = \"ls\"\n"), "unknown field `comand_prefix`"),
        ("[reversibility]\nenable = false\n".into(), "unknown field `enable`"),
        (
            "[screen]\nthreshold = 90\n[screen.model]\nbackend = \"local\"\npath = \"m.gguf\"\n".into(),
            "unknown field `threshold`",
        ),
        (openai_screen("api_key = \"k\"\n"), "unknown field `api_key`"),
        (anthropic_review("base = \"x\"\n"), "unknown field `base`"),
        (local_screen("context = 4096\n"), "unknown field `context`"),
        (openai_screen("[screen.model.http]\ntimeout_ms = 1\n"), "unknown field `timeout_ms`"),
        (
            anthropic_review("thinking = { type = \"enabled\", budget_tokens = 2048, budget = 1 }\n"),
            "unknown field `budget`",
        ),
        (
            "[review]\ntimeout = 1\n[review.model]\nbackend = \"local\"\npath = \"m.gguf\"\n".into(),
            "unknown field `timeout`",
        ),
        ("[classifier]\nmax_calls = 1\n".into(), "unknown field `max_calls`"),
        ("[session]\nttl = 1\n".into(), "unknown field `ttl`"),
        ("[transcript]\ntokens = 1000\n".into(), "unknown field `tokens`"),
        ("[prompts]\nsystem = \"s.md\"\n".into(), "unknown field `system`"),
        ("[server]\nport = 8787\n".into(), "unknown field `port`"),
        // An unknown variant, a wrong type, a missing field.
        ("mode = \"yolo\"\n".into(), "unknown variant `yolo`"),
        ("[tools]\npresets = [\"cursor\"]\n".into(), "unknown variant `cursor`"),
        ("[screen]\n[screen.model]\nbackend = \"gemini\"\n".into(), "unknown variant `gemini`"),
        (local_screen("weights = \"q4\"\n"), "unknown variant `q4`"),
        ("[session]\nstore = \"etcd\"\n".into(), "unknown variant `etcd`"),
        ("[server]\naudit_sync = \"always\"\n".into(), "unknown variant `always`"),
        ("mode = 1\n".into(), "wanted string or table"),
        ("[reversibility]\nenabled = \"yes\"\n".into(), "invalid type: string \"yes\", expected a boolean"),
        ("[server]\nbind = 8787\n".into(), "invalid type: integer `8787`, expected a string"),
        ("[transcript]\nmax_tokens = -1\n".into(), "invalid value: integer `-1`"),
        ("[[rules]]\ntool = \"Bash\"\ndecision = \"ask\"\nreason = \"r\"\n".into(), "missing field `id`"),
        ("[screen]\nallow_threshold_percent = 90\n".into(), "missing field `model`"),
        ("[screen]\n[screen.model]\nbackend = \"local\"\n".into(), "missing field `path`"),
        (anthropic_review("thinking = { type = \"enabled\" }\n"), "missing field `budget_tokens`"),
        // `server.bind` is parsed with the config, and the error names the field.
        (
            "[server]\nbind = \"localhost:8787\"\n".into(),
            "`server.bind` `localhost:8787` is not an address such as `127.0.0.1:8787`",
        ),
        ("[server]\nbind = \"127.0.0.1\"\n".into(), "`server.bind` `127.0.0.1` is not an address"),
        // Workspace and tools.
        ("[workspace]\nhome = \"~\"\n".into(), "config `t.toml`: `workspace.home` must be an absolute path, got `~`"),
        ("[workspace]\nroots = [\"/a\", \"b\"]\n".into(), "`workspace.roots[1]` must be an absolute path, got `b`"),
        ("[[tools.define]]\nname = \" \"\n".into(), "`tools.define[0].name` must not be empty"),
        (
            "[[tools.define]]\nname = \"x\"\n[[tools.define]]\nname = \"x\"\n".into(),
            "`tools.define[1]`: tool `x` is defined twice",
        ),
        (
            "[[tools.define]]\nname = \"x\"\narguments = { workdir = \"cwd\" }\n".into(),
            "`tools.define[0]` (`x`): `arguments.workdir` needs `arguments.shell`",
        ),
        // Rules (their field checks; examples are the gate's).
        (rule("", ""), "`rules[0].id` `` must be non-empty letters, digits, `-`, `_` or `.`"),
        (rule("no spaces", ""), "`rules[0].id` `no spaces` must be non-empty"),
        (format!("{}{}", rule("r", ""), rule("r", "")), "`rules[1].id` `r` is used twice"),
        (
            "[[rules]]\nid = \"r\"\ntool = \"Bash\"\ndecision = \"ask\"\nreason = \" \"\nmatch = [\"ls\"]\n".into(),
            "rule `r`: `reason` must say why the rule exists",
        ),
        (
            "[[rules]]\nid = \"r\"\ntool = \"Bash\"\ndecision = \"ask\"\nreason = \"r\"\n".into(),
            "rule `r`: add at least one `match` example",
        ),
        (
            rule("r", "command_prefix = \"ls\"\npath_glob = \"*.rs\"\n"),
            "rule `r`: give `command_prefix` or `path_glob`, not both",
        ),
        (
            "[[rules]]\nid = \"r\"\ntool = []\ndecision = \"ask\"\nreason = \"r\"\nmatch = [\"ls\"]\n".into(),
            "rule `r`: `tool` must name at least one tool",
        ),
        // The stages.
        (
            local_screen("").replace("[screen]\n", "[screen]\nallow_threshold_percent = 49\n"),
            "`screen.allow_threshold_percent` must be within 50..=100, got 49",
        ),
        (
            local_screen("").replace("[screen]\n", "[screen]\nallow_threshold_percent = 101\n"),
            "must be within 50..=100, got 101",
        ),
        (
            local_screen("").replace("[screen]\n", "[screen]\ntimeout_ms = 0\n"),
            "`screen.timeout_ms` must be greater than 0",
        ),
        (
            anthropic_review("").replace("[review]\n", "[review]\ntimeout_ms = 0\n"),
            "`review.timeout_ms` must be greater than 0",
        ),
        (
            "[review]\n[review.model]\nbackend = \"local\"\npath = \"m.gguf\"\nstyle = \"head\"\nhead = \"h.json\"\n"
                .into(),
            "`review.model`: a trained head only screens",
        ),
        (
            "[review]\n[review.model]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n".into(),
            "`review.model`: the review reasons and answers several options, so it needs `style = \"text\"`",
        ),
        // An OpenAI-compatible model.
        (
            openai_screen("").replace("http://127.0.0.1:9", "127.0.0.1:9"),
            "`screen.model.base_url` `127.0.0.1:9` must start with http:// or https://",
        ),
        (openai_screen("").replace("model = \"m\"", "model = \" \""), "`screen.model.model` must name a model"),
        (openai_screen("min_label_mass = 1.5\n"), "`screen.model.min_label_mass` must be within 0..=1, got 1.5"),
        (openai_screen("min_label_mass = -0.1\n"), "`screen.model.min_label_mass` must be within 0..=1, got -0.1"),
        (openai_screen("min_label_mass = nan\n"), "`screen.model.min_label_mass` must be within 0..=1, got NaN"),
        (openai_screen("top_logprobs = 1\n"), "`screen.model.top_logprobs` must be within 2..=20, got 1"),
        (openai_screen("top_logprobs = 21\n"), "`screen.model.top_logprobs` must be within 2..=20, got 21"),
        (openai_screen("style = \"head\"\n"), "`screen.model.style` `head` reads a local model's hidden states"),
        (openai_screen("reasoning_model = true\n"), "`screen.model`: a reasoning model reports no log-probabilities"),
        (openai_screen("max_tokens = 0\n"), "`screen.model.max_tokens` must be greater than 0"),
        (
            openai_screen("reasoning_effort = \"low\"\n"),
            "`screen.model.reasoning_effort` `low` is sent only to reasoning models",
        ),
        // A remote model's HTTP settings, one row per bound.
        (
            openai_screen("[screen.model.http]\nrequest_timeout_ms = 0\n"),
            "`screen.model.http`: `request_timeout_ms`, `max_attempts` and `breaker_failures` must be at least 1",
        ),
        (
            openai_screen("[screen.model.http]\nmax_attempts = 0\n"),
            "`screen.model.http`: `request_timeout_ms`, `max_attempts` and `breaker_failures` must be at least 1",
        ),
        (
            openai_screen("[screen.model.http]\nbreaker_failures = 0\n"),
            "`screen.model.http`: `request_timeout_ms`, `max_attempts` and `breaker_failures` must be at least 1",
        ),
        (
            openai_screen("[screen.model.http]\nrequest_timeout_ms = 600001\n"),
            "`screen.model.http`: `request_timeout_ms` and `max_backoff_ms` may be at most 600000",
        ),
        (openai_screen("[screen.model.http]\nmax_attempts = 11\n"), "`max_attempts` at most 10"),
        (
            openai_screen("[screen.model.http]\nmax_backoff_ms = 600001\n"),
            "`screen.model.http`: `request_timeout_ms` and `max_backoff_ms` may be at most 600000",
        ),
        (
            openai_screen("[screen.model.http]\nbreaker_cooldown_ms = 3600001\n"),
            "`breaker_cooldown_ms` at most 3600000",
        ),
        (
            openai_screen("[screen.model.http]\ninitial_backoff_ms = 6000\n"),
            "`screen.model.http.initial_backoff_ms` must not exceed `max_backoff_ms`",
        ),
        (
            openai_screen("[screen.model.http]\nmax_response_bytes = 1023\n"),
            "`screen.model.http.max_response_bytes` must be within 1024..=67108864, got 1023",
        ),
        (
            openai_screen("[screen.model.http]\nmax_response_bytes = 67108865\n"),
            "must be within 1024..=67108864, got 67108865",
        ),
        // Anthropic.
        (
            anthropic_review("base_url = \"api.anthropic.com\"\n"),
            "`review.model.base_url` `api.anthropic.com` must start with http:// or https://",
        ),
        (anthropic_review("").replace("model = \"claude\"", "model = \"\""), "`review.model.model` must name a model"),
        (anthropic_review("max_tokens = 0\n"), "`review.model.max_tokens` must be greater than 0"),
        (anthropic_review("temperature = 1.5\n"), "`review.model.temperature` must be within 0..=1, got 1.5"),
        (anthropic_review("top_p = 0.0\n"), "`review.model.top_p` must be greater than 0 and at most 1, got 0"),
        (anthropic_review("top_p = 1.5\n"), "`review.model.top_p` must be greater than 0 and at most 1, got 1.5"),
        (anthropic_review("top_k = 0\n"), "`review.model.top_k` must be at least 1"),
        (
            anthropic_review("temperature = 0.5\ntop_p = 0.9\n"),
            "`review.model`: set `temperature` or `top_p`, not both",
        ),
        (
            anthropic_review("temperature = 0.5\nthinking = { type = \"adaptive\" }\n"),
            "`review.model`: `thinking` cannot be combined with `temperature` or `top_k`",
        ),
        (
            anthropic_review("top_k = 5\nthinking = { type = \"adaptive\" }\n"),
            "`review.model`: `thinking` cannot be combined with `temperature` or `top_k`",
        ),
        (
            anthropic_review("top_p = 0.9\nthinking = { type = \"adaptive\" }\n"),
            "`review.model.top_p` must be within 0.95..=1 with `thinking`, got 0.9",
        ),
        (
            anthropic_review("thinking = { type = \"enabled\", budget_tokens = 1023 }\n"),
            "`review.model.thinking.budget_tokens` must be at least 1024, got 1023",
        ),
        (
            anthropic_review("max_tokens = 2048\nthinking = { type = \"enabled\", budget_tokens = 2048 }\n"),
            "`review.model.thinking.budget_tokens` (2048) must be less than `review.model.max_tokens` (2048)",
        ),
        (
            anthropic_review("[review.model.http]\nmax_attempts = 0\n"),
            "`review.model.http`: `request_timeout_ms`, `max_attempts` and `breaker_failures` must be at least 1",
        ),
        // A local model.
        (local_screen("style = \"head\"\n"), "`screen.model`: `style = \"head\"` needs `head = \"FILE\"`"),
        (local_screen("head = \"h.json\"\n"), "`screen.model.head` is read only with `style = \"head\"`"),
        (
            local_screen("style = \"text\"\nhead = \"h.json\"\n"),
            "`screen.model.head` is read only with `style = \"head\"`",
        ),
        (local_screen("threads = 0\n"), "`screen.model.threads` must be within 1..=256"),
        (local_screen("threads = 257\n"), "`screen.model.threads` must be within 1..=256"),
        (local_screen("max_new_tokens = 0\n"), "`screen.model.max_new_tokens` must be within 1..=8192, got 0"),
        (local_screen("max_new_tokens = 8193\n"), "`screen.model.max_new_tokens` must be within 1..=8192, got 8193"),
        (
            local_screen("prefix_cache_mib = 65537\n"),
            "`screen.model.prefix_cache_mib` must be at most 65536, got 65537",
        ),
        // Classifier and transcript bounds.
        (
            "[classifier]\nmax_calls_per_request = 0\n".into(),
            "`classifier.max_calls_per_request` and `classifier.max_concurrent_model_calls` must be within 1..=1024",
        ),
        (
            "[classifier]\nmax_calls_per_request = 1025\n".into(),
            "`classifier.max_calls_per_request` and `classifier.max_concurrent_model_calls` must be within 1..=1024",
        ),
        (
            "[classifier]\nmax_concurrent_model_calls = 0\n".into(),
            "`classifier.max_calls_per_request` and `classifier.max_concurrent_model_calls` must be within 1..=1024",
        ),
        (
            "[classifier]\nmax_concurrent_model_calls = 1025\n".into(),
            "`classifier.max_calls_per_request` and `classifier.max_concurrent_model_calls` must be within 1..=1024",
        ),
        (
            "[transcript]\nmax_tokens = 255\n".into(),
            "`transcript.max_tokens` must be at least 256 and `transcript.argument_chars` at least 1",
        ),
        (
            "[transcript]\nargument_chars = 0\n".into(),
            "`transcript.max_tokens` must be at least 256 and `transcript.argument_chars` at least 1",
        ),
        // Session limits and store.
        (
            "[session]\nmax_consecutive_denials = 0\n".into(),
            "`session.max_consecutive_denials` and `session.max_total_denials` must be at least 1",
        ),
        (
            "[session]\nmax_total_denials = 0\n".into(),
            "`session.max_consecutive_denials` and `session.max_total_denials` must be at least 1",
        ),
        ("[session]\nmax_sessions = 0\n".into(), "`session.max_sessions` and `session.ttl_secs` must be at least 1"),
        ("[session]\nttl_secs = 0\n".into(), "`session.max_sessions` and `session.ttl_secs` must be at least 1"),
        (
            "[session]\ntimeout_ms = 0\n".into(),
            "`session.timeout_ms` and `session.connect_timeout_ms` must be greater than 0",
        ),
        (
            "[session]\nconnect_timeout_ms = 0\n".into(),
            "`session.timeout_ms` and `session.connect_timeout_ms` must be greater than 0",
        ),
        (
            "[session]\ntimeout_ms = 60000\n".into(),
            "`session.timeout_ms` (60000) must be less than `server.decision_timeout_ms` (60000)",
        ),
        ("[session]\nkey_prefix = \"\"\n".into(), "`session.key_prefix` `` must be 1 to 64 visible ASCII characters"),
        (format!("[session]\nkey_prefix = \"{long_prefix}\"\n"), "must be 1 to 64 visible ASCII characters"),
        (
            "[session]\nkey_prefix = \"a b\"\n".into(),
            "`session.key_prefix` `a b` must be 1 to 64 visible ASCII characters",
        ),
        (
            "[session]\nredis_url = \"redis://127.0.0.1\"\n".into(),
            "`session.redis_url` is set but `session.store` is `memory`",
        ),
        ("[session]\nstore = \"redis\"\n".into(), "`session.store` is `redis` but no `session.redis_url` is set"),
        (
            "[session]\nstore = \"redis\"\nredis_url = \"rediss://h\"\n".into(),
            "`session.redis_url`: TLS (`rediss://`) is not built in",
        ),
        (
            "[session]\nstore = \"redis\"\nredis_url = \"http://user:secret@h\"\n".into(),
            "`session.redis_url` must start with `redis://` or `unix://`",
        ),
        // Server.
        (
            "[server]\nbind = \"0.0.0.0:8787\"\n".into(),
            "`server.bind` `0.0.0.0:8787` is reachable from other machines but no tokens are configured",
        ),
        (
            "[server]\nbody_limit_bytes = 0\n".into(),
            "`server.body_limit_bytes`, `server.max_concurrency` and `server.decision_timeout_ms` must be greater than 0",
        ),
        (
            "[server]\nmax_concurrency = 0\n".into(),
            "`server.body_limit_bytes`, `server.max_concurrency` and `server.decision_timeout_ms` must be greater than 0",
        ),
        // A zero decision timeout trips the session check first: the session's call must fit in it.
        (
            "[server]\ndecision_timeout_ms = 0\n".into(),
            "`session.timeout_ms` (250) must be less than `server.decision_timeout_ms` (0)",
        ),
        (
            "[server]\nmax_model_concurrency = 0\n".into(),
            "`server.max_model_concurrency`, `server.max_connections`, `server.header_read_timeout_ms` and `server.body_read_timeout_ms` must be greater than 0",
        ),
        (
            "[server]\nmax_connections = 0\n".into(),
            "`server.max_model_concurrency`, `server.max_connections`, `server.header_read_timeout_ms` and `server.body_read_timeout_ms` must be greater than 0",
        ),
        (
            "[server]\nheader_read_timeout_ms = 0\n".into(),
            "`server.max_model_concurrency`, `server.max_connections`, `server.header_read_timeout_ms` and `server.body_read_timeout_ms` must be greater than 0",
        ),
        (
            "[server]\nbody_read_timeout_ms = 0\n".into(),
            "`server.max_model_concurrency`, `server.max_connections`, `server.header_read_timeout_ms` and `server.body_read_timeout_ms` must be greater than 0",
        ),
        (
            "[server]\naudit_sync = \"decision\"\n".into(),
            "`server.audit_sync` is `decision` but no `server.audit_log` is set",
        ),
    ];
    let mut failures = Vec::new();
    for (text, expected) in &cases {
        match Config::from_toml_str("t.toml", text) {
            Ok(_) => failures.push(format!("accepted, expected `{expected}`:\n{text}")),
            Err(error) if !error.to_string().contains(expected) => {
                failures.push(format!("expected `{expected}`, got `{error}`:\n{text}"))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

/// The boundary values next to each refused one load, so each row above fails for the reason
/// it names rather than for a neighbouring one.
#[test]
fn the_limits_themselves_are_accepted() {
    let accepted = [
        local_screen("").replace("[screen]\n", "[screen]\nallow_threshold_percent = 50\n"),
        local_screen("").replace("[screen]\n", "[screen]\nallow_threshold_percent = 100\n"),
        local_screen("threads = 256\nmax_new_tokens = 8192\nprefix_cache_mib = 65536\n"),
        local_screen("style = \"head\"\nhead = \"h.json\"\n"),
        openai_screen("min_label_mass = 0.0\ntop_logprobs = 2\n"),
        openai_screen("min_label_mass = 1.0\ntop_logprobs = 20\n"),
        openai_screen("style = \"text\"\nreasoning_model = true\nreasoning_effort = \"low\"\n"),
        openai_screen(
            "[screen.model.http]\nrequest_timeout_ms = 600000\nmax_attempts = 10\nmax_backoff_ms = 600000\nbreaker_cooldown_ms = 3600000\ninitial_backoff_ms = 600000\nmax_response_bytes = 67108864\n",
        ),
        anthropic_review("temperature = 1.0\ntop_k = 1\n"),
        anthropic_review("top_p = 0.95\nthinking = { type = \"adaptive\" }\n"),
        anthropic_review("max_tokens = 2049\nthinking = { type = \"enabled\", budget_tokens = 2048 }\n"),
        "[classifier]\nmax_calls_per_request = 1024\nmax_concurrent_model_calls = 1\n".to_owned(),
        "[transcript]\nmax_tokens = 256\nargument_chars = 1\n".to_owned(),
        format!("[session]\nkey_prefix = \"{}\"\ntimeout_ms = 59999\n", "p".repeat(64)),
        "[session]\nstore = \"redis\"\nredis_url = \"unix:///run/redis.sock\"\n".to_owned(),
        "[server]\nbind = \"0.0.0.0:8787\"\ntokens_env = \"PERMIT_TOKENS\"\n".to_owned(),
        "[server]\nbind = \"[::1]:0\"\naudit_log = \"/tmp/a.jsonl\"\naudit_sync = \"decision\"\n".to_owned(),
        rule("a-Z_0.9", "command_prefix = \"ls\"\n"),
    ];
    for text in accepted {
        if let Err(error) = Config::from_toml_str("t.toml", &text) {
            panic!("refused: {error}\n{text}");
        }
    }
}

/// Missing keys come from each table's `Default`: an empty file, a file of empty tables and
/// `Config::default()` are the same config.
#[test]
fn empty_tables_take_the_defaults() {
    let empty = Config::from_toml_str("t.toml", "").unwrap();
    assert_eq!(empty, Config::default());
    let tables = "[workspace]\n[tools]\n[reversibility]\n[classifier]\n[session]\n[transcript]\n[prompts]\n[server]\n";
    assert_eq!(Config::from_toml_str("t.toml", tables).unwrap(), Config::default());
    let with_http = Config::from_toml_str("t.toml", &openai_screen("[screen.model.http]\n")).unwrap();
    let without_http = Config::from_toml_str("t.toml", &openai_screen("")).unwrap();
    assert_eq!(with_http, without_http);
    let Some(screen) = with_http.screen else { panic!("no screen") };
    let ModelConfig::Openai { http, .. } = screen.model else { panic!("not openai") };
    assert_eq!(http, permit::config::HttpSettings::default());
}
