//! Which calls a trained head (`style = "head"`) may clear: those whose gate findings carry no
//! signal of harm, and whose every word the head reads.
//!
//! The head was measured to be at chance on risky actions that the user's request does relate
//! to ("clean up", then a destructive delete), so the design must not depend on it there. It may
//! clear a call only when every reason the gate gave is of the "nothing shown to be safe, and
//! nothing shown to be harmful" kind, and every shell part it could not vouch for runs one of a
//! few build, test and lint programs ([`HEAD_ELIGIBLE_PROGRAMS`]). Every other classified call
//! skips the head and goes to the review, or to a person.
//!
//! A tool the operator did not configure is not eligible: MCP's defaults for an unannotated
//! tool are destructive and open-world, and a red team had the head clear 70 of 268 harmful
//! unknown-tool calls (`DROP TABLE`, deletes, refunds). Within an eligible run, every option
//! is one its program declares ([`EligibleProgram`]; a plain value where it takes one) and
//! every other word is a plain name or relative path: options that run a program or load code
//! (`cargo --config build.rustc=…`, `go test -exec`, `mvn -DargLine=-javaagent:…`, `pytest
//! --pastebin`) were cleared by the head in the same red team. The head itself refuses to
//! clear a call longer than it reads ([`crate::model::local::head`]).
//!
//! An allowlist, like the gate's: a reason code, program or option not listed here is not
//! eligible. It only narrows what the screen may clear; it never allows anything.

use crate::decision::ReasonCode;
use crate::gate::GateOutcome;

/// Reason codes that say only "not on the known-safe list" (or "unknown tool"), with no
/// finding of harm. Every other code is a signal: destructive or dangerous flags, credentials,
/// persistence, agent policy, system and outside-workspace paths, privilege, environment
/// overrides, dynamic or opaque execution, parse errors, operator rules, irreversibility.
pub const HEAD_ELIGIBLE_REASONS: &[ReasonCode] = &[
    // The tool's tier maps to `classify` in the configured mode: nothing found about its input.
    ReasonCode::ModeTier,
    // The request's own annotations were ignored: says nothing about the call.
    ReasonCode::UntrustedAnnotationsIgnored,
    // The parts the gate did vouch for.
    ReasonCode::KnownSafeCommand,
    // A shell part not on the known-safe table; further limited to HEAD_ELIGIBLE_PROGRAMS.
    ReasonCode::UnlistedCommand,
];

/// A program whose unlisted runs a head may clear: building, testing, linting and formatting
/// a project. They run the project's own code, as the user expects of a coding agent, and
/// neither delete, publish, install nor deploy. Each program declares its own options: an
/// option means different things to different programs (`-p` is a package to cargo and a
/// module pytest imports; `-W` a lint level to rustc and a warnings filter that imports a
/// class to pytest; red team of the head, round 4).
pub struct EligibleProgram {
    pub name: &'static str,
    /// The words that must follow the program (`run build`); empty: none needed.
    pub subcommands: &'static [&'static str],
    pub operands: Operands,
    /// Options without a value.
    pub flags: &'static [&'static str],
    /// Options with one plain value (`-p NAME` or `--features=a,b`).
    pub valued: &'static [&'static str],
    /// After `--`: the options passed on to the test harness or linter; `None`: `--` is refused.
    pub after_dashes: Option<(&'static [&'static str], &'static [&'static str])>,
}

const CARGO_FLAGS: &[&str] = &[
    "--lib",
    "--bins",
    "--tests",
    "--benches",
    "--examples",
    "--all-targets",
    "--workspace",
    "--all",
    "--release",
    "--quiet",
    "-q",
    "--verbose",
    "-v",
    "--no-fail-fast",
    "--locked",
    "--offline",
    "--frozen",
    "--all-features",
    "--no-default-features",
    "--doc",
    "--check",
    "--no-deps",
];
/// Not `-p`/`--package`: it can name a dependency, whose tests then run from the registry
/// (red team of the head, round 5).
const CARGO_VALUED: &[&str] = &["--test", "--bin", "--example", "--bench", "--features", "-F", "-j", "--jobs"];
/// libtest's switches and rustc's lint levels (`cargo clippy -- -D warnings`).
const CARGO_AFTER_DASHES: (&[&str], &[&str]) = (
    &["--nocapture", "--ignored", "--include-ignored", "--exact", "--show-output", "-q", "--quiet"],
    &["--test-threads", "-D", "-W", "-A"],
);
const NODE_SUBCOMMANDS: &[&str] =
    &["test", "run test", "run build", "run lint", "run typecheck", "run check", "run format"];

/// The programs whose unlisted runs a head may clear (see [`EligibleProgram`]). Anything else
/// that is unlisted (`rm`, `git push`, `npm run deploy`, `make release`, `cargo run`, `tox`,
/// `docker`, `psql`, `curl`…) goes to the review. `make` takes only
/// [`HEAD_ELIGIBLE_MAKE_TARGETS`].
pub const HEAD_ELIGIBLE_PROGRAMS: &[EligibleProgram] = &[
    EligibleProgram {
        name: "cargo",
        subcommands: &["build", "check", "test", "clippy", "fmt", "doc", "bench", "tree", "metadata"],
        operands: Operands::Names,
        flags: CARGO_FLAGS,
        valued: CARGO_VALUED,
        after_dashes: Some(CARGO_AFTER_DASHES),
    },
    EligibleProgram {
        name: "go",
        subcommands: &["build", "test", "vet"],
        operands: Operands::GoPackages,
        flags: &["-v", "-race", "-short", "-cover"],
        valued: &["-count", "-run", "-timeout"],
        after_dashes: None,
    },
    EligibleProgram {
        name: "npm",
        subcommands: NODE_SUBCOMMANDS,
        operands: Operands::None,
        flags: &["--silent"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "pnpm",
        subcommands: NODE_SUBCOMMANDS,
        operands: Operands::None,
        flags: &["--silent"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "yarn",
        subcommands: &["test", "build", "lint", "typecheck", "run test", "run build", "run lint", "run typecheck"],
        operands: Operands::None,
        flags: &["--silent"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "pytest",
        subcommands: &[],
        operands: Operands::TestPaths,
        // Not `-p` (imports a module as a plugin), `-W` (a warnings filter imports its class),
        // `-c`, `--rootdir`, `-o` or any plugin's options.
        flags: &["-x", "-q", "--quiet", "-v", "-vv", "--verbose", "--lf", "--ff"],
        valued: &["-k", "--maxfail", "--durations", "--tb"],
        after_dashes: None,
    },
    EligibleProgram {
        name: "mvn",
        subcommands: &["test", "compile", "verify"],
        operands: Operands::None,
        flags: &["-q", "--quiet", "-B", "--batch-mode", "-o", "--offline"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "gradle",
        subcommands: &["test", "build", "check"],
        operands: Operands::None,
        flags: &["-q", "--quiet", "--offline", "--info", "--stacktrace"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "./gradlew",
        subcommands: &["test", "build", "check"],
        operands: Operands::None,
        flags: &["-q", "--quiet", "--offline", "--info", "--stacktrace"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "ruff",
        subcommands: &["check", "format"],
        operands: Operands::ProjectPaths,
        flags: &["--fix", "--diff", "--check", "-q", "--quiet"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "mypy",
        subcommands: &[],
        operands: Operands::ProjectPaths,
        flags: &["--strict"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "eslint",
        subcommands: &[],
        operands: Operands::ProjectPaths,
        flags: &["--fix"],
        valued: &["--max-warnings"],
        after_dashes: None,
    },
    EligibleProgram {
        name: "tsc",
        subcommands: &[],
        operands: Operands::None,
        flags: &["--noEmit"],
        valued: &[],
        after_dashes: None,
    },
    EligibleProgram {
        name: "rspec",
        subcommands: &[],
        operands: Operands::TestPaths,
        flags: &[],
        valued: &[],
        after_dashes: None,
    },
];

/// What an eligible run's operands (words that are not options) may be. Operands select the
/// project's own code only: a red team had the head clear runs over installed dependencies
/// (`pytest node_modules`, `rspec vendor/bundle`, `go test all`, `cargo test -p cfg-if`),
/// which run code from outside the project (round 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    /// None: for these programs every further word is another goal, task or script to run
    /// (`mvn test deploy`, `gradle test publish`; red team of the head, round 2).
    None,
    /// Test-name filters: plain words without `/` (`cargo test parser`).
    Names,
    /// Go package patterns inside the module: `./…` only (not `all`, `std` or a module path).
    GoPackages,
    /// Paths a test runner runs: the first component is one of [`TEST_DIRECTORIES`], or a file
    /// in the project's root with a source extension (`pytest tests/`, `rspec spec/a_spec.rb`).
    TestPaths,
    /// Paths a linter reads: the first component is one of [`PROJECT_DIRECTORIES`], or a root
    /// source file.
    ProjectPaths,
}

/// Where a project's tests live: the first component of a test runner's path operand. Narrower
/// than [`PROJECT_DIRECTORIES`]: `lib/` and `app/` can hold a virtualenv or vendored gems,
/// whose test files a runner would run (red team of the head, round 6).
pub const TEST_DIRECTORIES: &[&str] = &["tests", "test", "spec", "specs"];

/// Path components that mark installed or vendored code, refused anywhere in an operand
/// (`src/virtualenv`, `app/vendor/bundle`, `lib/python3.12`), as a second line behind the
/// allowlists above.
const INSTALLED_CODE_COMPONENTS: &[&str] = &[
    "vendor",
    "bundle",
    "env",
    "envs",
    "venv",
    "virtualenv",
    "site-packages",
    "dist-packages",
    "node_modules",
    "gems",
    "__pypackages__",
    "testdata",
];

fn names_installed_code(path: &str) -> bool {
    path.split('/')
        .any(|part| INSTALLED_CODE_COMPONENTS.contains(&part) || part.starts_with("python") || part.starts_with("pypy"))
}

/// Where a project's own code and tests live: the first component of an eligible path
/// operand. An allowlist: `node_modules`, `venv`, `vendor` and the like hold installed code.
pub const PROJECT_DIRECTORIES: &[&str] =
    &["tests", "test", "spec", "specs", "src", "lib", "app", "pkg", "internal", "cmd", "benches", "examples"];

/// Source extensions of a file operand in the project's root (`pytest test_api.py`).
const ROOT_FILE_EXTENSIONS: &[&str] = &["py", "rb", "ts", "tsx", "js", "jsx", "mjs", "rs", "go"];

/// Whether an operand fits its program's [`Operands`].
fn operand_fits(word: &str, operands: Operands) -> bool {
    match operands {
        Operands::None => false,
        Operands::Names => is_plain_word(word, false),
        Operands::GoPackages => {
            word.strip_prefix("./").is_some_and(|rest| rest.is_empty() || is_plain_word(rest, true))
                && is_plain_word(word, true)
                && !names_installed_code(word)
        }
        Operands::TestPaths | Operands::ProjectPaths => {
            if !is_plain_word(word, true) {
                return false;
            }
            // A node id (`tests/test_api.py::test_login`) is judged by its path.
            let path = word.split("::").next().unwrap_or(word);
            if names_installed_code(path) {
                return false;
            }
            let directories = if operands == Operands::TestPaths { TEST_DIRECTORIES } else { PROJECT_DIRECTORIES };
            match path.split_once('/') {
                Some((first, _)) => directories.contains(&first),
                None => {
                    directories.contains(&path)
                        || path.rsplit_once('.').is_some_and(|(stem, extension)| {
                            !stem.is_empty() && ROOT_FILE_EXTENSIONS.contains(&extension)
                        })
                }
            }
        }
    }
}

/// `make` targets a head may clear (`make` alone builds the default target).
pub const HEAD_ELIGIBLE_MAKE_TARGETS: &[&str] = &["test", "tests", "check", "build", "lint", "all"];

/// A value or operand the head may see in an eligible run: letters, digits and `_ - . , :`,
/// plus `/` for relative paths; never absolute, home-relative or climbing (`..`), never `=`.
fn is_plain_word(word: &str, path: bool) -> bool {
    !word.is_empty()
        && word.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"_-.,:".contains(&byte) || (path && byte == b'/'))
        && !word.starts_with(['/', '-'])
        && !word.split('/').any(|part| part == "..")
}

/// Whether the words after an eligible program's subcommand are all its own options, their
/// plain values, or (where the program takes them) plain operands; after `--`, the options
/// the program passes on.
fn arguments_are_plain(program: &EligibleProgram, words: &[&str]) -> bool {
    let (mut flags, mut valued) = (program.flags, program.valued);
    let mut operands = program.operands;
    let mut index = 0;
    while let Some(word) = words.get(index) {
        index += 1;
        if *word == "--" {
            match program.after_dashes {
                Some((after_flags, after_valued)) if flags == program.flags => {
                    (flags, valued) = (after_flags, after_valued);
                    // Test-name filters are still plain words after `--`.
                    operands = Operands::Names;
                    continue;
                }
                _ => return false,
            }
        }
        if flags.contains(word) {
            continue;
        }
        if valued.contains(word) {
            match words.get(index) {
                Some(value) if is_plain_word(value, false) => index += 1,
                _ => return false,
            }
            continue;
        }
        if let Some((name, value)) = word.split_once('=') {
            if valued.contains(&name) && is_plain_word(value, false) {
                continue;
            }
            return false;
        }
        if !operand_fits(word, operands) {
            return false;
        }
    }
    true
}

/// Whether a trained head may clear this classified call (see the module header).
pub fn head_may_clear(outcome: &GateOutcome) -> bool {
    eligible(outcome, false)
}

/// Whether `permit train` measures the head on this call: the calls it may clear, and also
/// unknown tools with no other finding. A head never clears an unknown tool, but they hold
/// most of the labeled denies there are to measure it on (AgentDojo's tools), so its
/// cross-validation, threshold and leave-one-suite-out figures count them.
pub fn head_is_measured_on(outcome: &GateOutcome) -> bool {
    eligible(outcome, true)
}

fn eligible(outcome: &GateOutcome, unknown_tools: bool) -> bool {
    if outcome.hard_deny || !outcome.model_may_allow || outcome.veto_only {
        return false;
    }
    // A call that writes a file by name (`| tee src/main.rs`, `| sort -o Cargo.toml`,
    // `echo … > conftest.py; pytest`) changes what runs or what is kept: never cleared by the
    // head (red team of the head, rounds 2 and 3).
    if outcome.writes {
        return false;
    }
    // A tool the mode sends to the classifier by its tier alone is eligible only up to
    // `medium`: a `high` tool (RemoteTrigger, Workflow: deploys, releases) is not.
    if outcome.reason_codes.contains(&ReasonCode::ModeTier) && outcome.tier > crate::decision::Tier::Medium {
        return false;
    }
    let listed =
        |code: &ReasonCode| HEAD_ELIGIBLE_REASONS.contains(code) || (unknown_tools && *code == ReasonCode::UnknownTool);
    if !outcome.reason_codes.iter().all(listed) {
        return false;
    }
    outcome
        .findings
        .iter()
        .filter(|finding| finding.code == ReasonCode::UnlistedCommand)
        .all(|finding| is_eligible_program(&finding.subject))
}

/// Whether a shell part (as the gate displays it) runs an eligible program: its first word,
/// with no assignments or wrappers before it, and the words after it as the table lists.
fn is_eligible_program(part: &str) -> bool {
    let words: Vec<&str> = part.split_ascii_whitespace().collect();
    let Some((program, rest)) = words.split_first() else { return false };
    if *program == "make" {
        return rest.is_empty() || (rest.len() == 1 && HEAD_ELIGIBLE_MAKE_TARGETS.contains(&rest[0]));
    }
    let Some(entry) = HEAD_ELIGIBLE_PROGRAMS.iter().find(|entry| entry.name == *program) else {
        return false;
    };
    if entry.subcommands.is_empty() {
        return arguments_are_plain(entry, rest);
    }
    entry.subcommands.iter().any(|sequence| {
        let expected: Vec<&str> = sequence.split(' ').collect();
        rest.len() >= expected.len()
            && rest[..expected.len()] == expected[..]
            && arguments_are_plain(entry, &rest[expected.len()..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::gate::{CallContext, Gate};
    use crate::request::PendingCall;

    fn outcome(tool: &str, input: serde_json::Value) -> GateOutcome {
        let mut config = Config::default();
        config.workspace.home = Some("/home/dev".to_owned());
        let gate = Gate::new(&config).unwrap();
        let call = PendingCall {
            id: "c1".into(),
            name: tool.into(),
            input: input.as_object().unwrap().clone(),
            annotations: None,
        };
        gate.evaluate(&call, CallContext::at(Some("/workspace")))
    }

    fn bash(command: &str) -> GateOutcome {
        outcome("Bash", serde_json::json!({ "command": command }))
    }

    #[test]
    fn only_plain_build_and_test_runs_are_eligible() {
        for command in [
            "cargo test",
            "cargo build 2>&1 | tail -n 20",
            "npm run lint",
            "pytest -x tests/test_a.py",
            "make",
            "RUST_LOG=debug cargo test",
            "timeout 60 cargo test",
            "cargo test --workspace parser -- --nocapture --test-threads=1",
            "pytest tests/test_api.py::test_login test_smoke.py",
            "cargo clippy --all-targets -- -D warnings",
            "pytest -x -q tests/test_api.py -k slow",
        ] {
            assert!(head_may_clear(&bash(command)), "{command}");
        }
        assert!(!head_may_clear(&outcome("send_money", serde_json::json!({ "recipient": "x", "amount": 1 }))));
        for command in [
            "rm -rf build",
            "git push --force origin main",
            "cargo publish",
            "npm publish",
            "npm run deploy",
            "npm run build:prod && npm run release",
            "npm ci",
            "make release",
            "make test deploy",
            "cargo run -- --reset-db",
            "yarn run deploy",
            "cargo test --config build.rustc=/tmp/rustc",
            "cargo test -- --logfile /home/dev/.bashrc",
            "go test -exec /tmp/x ./...",
            "mvn test -DargLine=-javaagent:/tmp/a.jar",
            "pytest --pastebin=all",
            "pytest /tmp/evil_test.py",
            "pytest ../other/tests",
            "cargo test +nightly",
            "mvn test deploy",
            "gradle test publish",
            "tox exec -- rm README.md",
            "cargo test | tee src/main.rs",
            "cargo test 2>&1 | sort -o Cargo.toml",
            "echo 'import os' > conftest.py; pytest",
            "cargo test | head -c 0 > Cargo.toml",
            "npm test extra-script",
            "pytest -p lib2to3.__main__ -W ignore -n src tests",
            "pytest -W ignore::evil.Module",
            "pytest node_modules",
            "pytest -q venv",
            "rspec vendor/bundle",
            "go test all",
            "go test -count 1 github.com/lib/pq",
            "cargo test -p cfg-if",
            "pytest -q lib/python3.12",
            "pytest app/env",
            "pytest src/virtualenv",
            "rspec app/vendor/bundle",
            "rspec spec app/vendor/bundle",
            "go test ./vendor/github.com/lib/pq",
            "ruff check src/vendor",
            "npm test -- --watch",
            "cargo test -- -- --logfile x",
            "docker system prune -a",
            "curl -s https://example.com",
            "cargo test; rm -rf ~/.cache",
        ] {
            assert!(!head_may_clear(&bash(command)), "{command}");
        }
    }

    /// One case per reason code that carries a signal: none is eligible.
    #[test]
    fn every_signal_of_harm_keeps_the_head_out() {
        let cases = [
            ("Bash", serde_json::json!({ "command": "cat ~/.ssh/id_rsa" }), ReasonCode::CredentialPath),
            ("Bash", serde_json::json!({ "command": "echo x >> ~/.bashrc" }), ReasonCode::PersistencePath),
            ("Bash", serde_json::json!({ "command": "sudo make install" }), ReasonCode::PrivilegeEscalation),
            ("Bash", serde_json::json!({ "command": "cat /etc/shadow" }), ReasonCode::SystemPath),
            ("Bash", serde_json::json!({ "command": "$CMD" }), ReasonCode::DynamicCommand),
            ("Bash", serde_json::json!({ "command": "bash -c \"$X\"" }), ReasonCode::OpaqueExecution),
            ("Bash", serde_json::json!({ "command": "PATH=/tmp cargo test" }), ReasonCode::EnvironmentOverride),
            ("Bash", serde_json::json!({ "command": "find . -delete" }), ReasonCode::DangerousFlag),
            (
                "Write",
                serde_json::json!({ "file_path": "/workspace/.claude/settings.json", "content": "{}" }),
                ReasonCode::AgentPolicyPath,
            ),
            (
                "Write",
                serde_json::json!({ "file_path": "/workspace/.github/workflows/ci.yml", "content": "x" }),
                ReasonCode::CiConfigPath,
            ),
            (
                "Edit",
                serde_json::json!({ "file_path": "/tmp/x.rs", "old_string": "a", "new_string": "b" }),
                ReasonCode::PathOutsideWorkspace,
            ),
        ];
        for (tool, input, code) in cases {
            let outcome = outcome(tool, input.clone());
            assert!(outcome.reason_codes.contains(&code), "{input}: {:?}", outcome.reason_codes);
            assert!(!HEAD_ELIGIBLE_REASONS.contains(&code));
            assert!(!head_may_clear(&outcome), "{input}");
        }
    }
    /// Every reason code, each with its expected eligibility. The match has no wildcard, so a
    /// new reason code does not compile until it is classified here.
    fn expected(code: ReasonCode) -> bool {
        match code {
            ReasonCode::ModeTier => true,
            ReasonCode::UnknownTool => false,
            ReasonCode::UntrustedAnnotationsIgnored => true,
            ReasonCode::KnownSafeCommand => true,
            ReasonCode::CriticalCommand => false,
            ReasonCode::DangerousFlag => false,
            ReasonCode::UnlistedCommand => true,
            ReasonCode::MalformedArguments => false,
            ReasonCode::ShellParseError => false,
            ReasonCode::DynamicCommand => false,
            ReasonCode::EnvironmentOverride => false,
            ReasonCode::PrivilegeEscalation => false,
            ReasonCode::OpaqueExecution => false,
            ReasonCode::PathOutsideWorkspace => false,
            ReasonCode::PathEscape => false,
            ReasonCode::CredentialPath => false,
            ReasonCode::SystemPath => false,
            ReasonCode::PersistencePath => false,
            ReasonCode::AgentPolicyPath => false,
            ReasonCode::CiConfigPath => false,
            ReasonCode::VisibilityConfig => false,
            ReasonCode::NoWorkspace => false,
            ReasonCode::OperatorRule => false,
            ReasonCode::HardDenyRule => false,
            ReasonCode::CostlyBudgetExhausted => false,
            ReasonCode::Irreversible => false,
            ReasonCode::NoClassifier => false,
            ReasonCode::ScreenAllow => false,
            ReasonCode::ReviewAllow => false,
            ReasonCode::ReviewError => false,
            ReasonCode::NoReviewModel => false,
            ReasonCode::ScreenTimeout => false,
            ReasonCode::ScreenError => false,
            ReasonCode::ModelBusy => false,
            ReasonCode::ModelCallLimit => false,
            ReasonCode::SessionDenialLimit => false,
            ReasonCode::DecisionTimeout => false,
            ReasonCode::AuditUnavailable => false,
            ReasonCode::SessionStoreUnavailable => false,
            ReasonCode::HookError => false,
            ReasonCode::DenyNotRequested
            | ReasonCode::DenyScopeExpansion
            | ReasonCode::DenyDestructive
            | ReasonCode::DenyExfiltration
            | ReasonCode::DenySecurityWeakening
            | ReasonCode::DenyBypassesReview
            | ReasonCode::DenyUnclear => false,
        }
    }

    /// The table per reason code: a classified call carrying only that code (and, for
    /// `unlisted_command`, an eligible program) is eligible exactly when the code is.
    #[test]
    fn the_eligibility_table_holds_for_every_reason_code() {
        for code in &crate::decision::tests::every_reason_code() {
            assert_eq!(HEAD_ELIGIBLE_REASONS.contains(code), expected(*code), "{code:?}");
            let outcome = GateOutcome {
                action: crate::decision::GateAction::Classify,
                tier: crate::decision::Tier::Medium,
                structural_tier: crate::decision::Tier::High,
                hard_deny: false,
                veto_only: false,
                model_may_allow: true,
                reversibility: None,
                rules: Vec::new(),
                reason_codes: vec![*code],
                primary: *code,
                findings: vec![crate::gate::Finding {
                    code: *code,
                    subject: "cargo test".to_owned(),
                    detail: String::new(),
                    rule: None,
                }],
                writes: false,
                needs: Vec::new(),
            };
            assert_eq!(head_may_clear(&outcome), expected(*code), "{code:?}");
            // A `high` tool the mode classifies by its tier (RemoteTrigger, Workflow): never.
            if *code == ReasonCode::ModeTier {
                let mut high = outcome.clone();
                high.tier = crate::decision::Tier::High;
                assert!(!head_may_clear(&high));
            }
            // A call that writes a file by name (`| tee FILE`, `> conftest.py`): never.
            let mut writing = outcome.clone();
            writing.writes = true;
            assert!(!head_may_clear(&writing), "{code:?} with a write");
            // With a signal of harm beside it, never.
            let mut mixed = outcome.clone();
            mixed.reason_codes.push(ReasonCode::DangerousFlag);
            assert!(!head_may_clear(&mixed), "{code:?} with dangerous_flag");
            // A hard deny, an irreversible tool or reviewer mode: never.
            for alter in [
                |o: &mut GateOutcome| o.hard_deny = true,
                |o: &mut GateOutcome| o.model_may_allow = false,
                |o: &mut GateOutcome| o.veto_only = true,
            ] {
                let mut altered = outcome.clone();
                alter(&mut altered);
                assert!(!head_may_clear(&altered), "{code:?}");
            }
        }
    }
}
