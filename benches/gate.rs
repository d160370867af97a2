//! Gate throughput: (a) a Read call, (b) a five-part compound shell command, (c) a Bash call
//! against a config of 50 operator rules, (d) a wildcard argument, (e) a brace word, (f) an
//! Edit, and the worst cases: (g) a chain of 1,600 `cd dN && ls` parts (26 KB), (h) a 32 KB
//! command of many words, and (i) a 2 MiB request of 64 such chains. Targets on one core:
//! (a) ≥ 1,000,000 decisions/s, (b) ≥ 100,000/s, (c) ≥ 200,000/s; any command of 32 KB or
//! less in ≤ 5 ms; a 2 MiB request in ≤ 200 ms. Run with `scripts/bench-gate.sh`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

/// The binary's allocator (`src/main.rs`), so the figures are the shipped binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use permit::config::Config;
use permit::decision::GateAction;
use permit::gate::{CallContext, Gate, call};
use serde_json::json;

fn fifty_rules() -> String {
    let mut toml = String::from("[workspace]\nhome = \"/home/dev\"\n");
    for index in 0..50 {
        let rule = match index % 5 {
            0 => format!(
                "[[rules]]\nid = \"tool-{index}\"\ntool = \"Bash\"\ncommand_prefix = \"tool{index} run\"\ndecision = \"allow\"\nreason = \"routine\"\nmatch = [\"tool{index} run --fast\"]\nnot_match = [\"tool{index} walk\"]\n"
            ),
            1 => format!(
                "[[rules]]\nid = \"deploy-{index}\"\ntool = \"Bash\"\ncommand_prefix = \"deploy{index}\"\ndecision = \"hard_deny\"\nreason = \"deploys go through CI\"\nmatch = [\"deploy{index} prod\"]\n"
            ),
            2 => format!(
                "[[rules]]\nid = \"secrets-{index}\"\ntool = [\"Read\", \"Edit\"]\npath_glob = \"secrets{index}/**\"\ndecision = \"ask\"\nreason = \"secrets need a person\"\nmatch = [\"secrets{index}/a.txt\"]\nnot_match = [\"src/a.txt\"]\n"
            ),
            3 => format!(
                "[[rules]]\nid = \"mcp-{index}\"\ntool = \"mcp__svc{index}__*\"\ndecision = \"classify\"\nreason = \"reviewed\"\nmatch = [{{ x = 1 }}]\n"
            ),
            _ => format!(
                "[[rules]]\nid = \"git-{index}\"\ntool = \"Bash\"\ncommand_prefix = \"git push origin branch{index}\"\ndecision = \"ask\"\nreason = \"pushes need a person\"\nmatch = [\"git push origin branch{index} --force\"]\n"
            ),
        };
        toml.push_str(&rule);
    }
    toml
}

fn bench_gate(c: &mut Criterion) {
    let mut defaults = Config::default();
    defaults.workspace.home = Some("/home/dev".to_owned());
    let gate = Gate::new(&defaults).unwrap();
    let context = CallContext::at(Some("/workspace"));

    let mut group = c.benchmark_group("gate");
    group.throughput(Throughput::Elements(1));

    let read = call("Read", json!({ "file_path": "/workspace/src/main.rs" }));
    group.bench_function("a_read_call", |b| b.iter(|| gate.evaluate(std::hint::black_box(&read), context)));

    let compound =
        call("Bash", json!({ "command": "git status && cargo build 2>&1 | tail -n 20; ls -la src || echo failed" }));
    group.bench_function("b_five_part_shell", |b| b.iter(|| gate.evaluate(std::hint::black_box(&compound), context)));

    let config = Config::from_toml_str("bench", &fifty_rules()).unwrap();
    assert_eq!(config.rules.len(), 50);
    let ruled = Gate::new(&config).unwrap();
    let tests = call("Bash", json!({ "command": "tool20 run --all" }));
    group.bench_function("c_fifty_rules_bash", |b| b.iter(|| ruled.evaluate(std::hint::black_box(&tests), context)));
    let secret = call("Read", json!({ "file_path": "secrets12/db.txt" }));
    group.bench_function("c_fifty_rules_read", |b| b.iter(|| ruled.evaluate(std::hint::black_box(&secret), context)));

    let wildcard = call("Bash", json!({ "command": "wc -l src/*.rs tests/*.rs" }));
    group.bench_function("d_wildcard_argument", |b| b.iter(|| gate.evaluate(std::hint::black_box(&wildcard), context)));
    let brace = call("Bash", json!({ "command": "cat src/{main,lib,cli}.rs {\"README\",CHANGES}.md" }));
    group.bench_function("e_brace_word", |b| b.iter(|| gate.evaluate(std::hint::black_box(&brace), context)));
    let edit = call(
        "Edit",
        json!({ "file_path": "/workspace/src/gate/mod.rs", "old_string": "fn old()", "new_string": "fn new()" }),
    );
    group.bench_function("f_edit_call", |b| b.iter(|| gate.evaluate(std::hint::black_box(&edit), context)));
    group.finish();

    // The worst cases: time per call rather than throughput.
    let mut worst = c.benchmark_group("gate_worst");
    worst.sample_size(20);
    let chain = (0..1600).map(|index| format!("cd d{index} && ls")).collect::<Vec<_>>().join(" && ");
    assert!(chain.len() <= 32 * 1024);
    let chain_call = call("Bash", json!({ "command": chain }));
    worst
        .bench_function("g_chain_1600_parts", |b| b.iter(|| gate.evaluate(std::hint::black_box(&chain_call), context)));
    let words = format!("ls {}", "src/a.rs ".repeat(3600));
    assert!(words.len() <= 32 * 1024);
    let words_call = call("Bash", json!({ "command": words }));
    worst.bench_function("h_32k_of_words", |b| b.iter(|| gate.evaluate(std::hint::black_box(&words_call), context)));
    let request: Vec<_> = (0..64).map(|_| chain_call.clone()).collect();
    worst.bench_function("i_2mib_request_64_chains", |b| {
        b.iter(|| {
            request
                .iter()
                .filter(|call| gate.evaluate(std::hint::black_box(call), context).action == GateAction::Allow)
                .count()
        })
    });
    worst.finish();
}

criterion_group!(benches, bench_gate);
criterion_main!(benches);
