//! The command line: parses arguments and runs one command. Errors surface here as `anyhow`
//! messages on stderr with a non-zero exit; nothing here decides anything.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::config::{CONFIG_ENV, Config};
use crate::engine::Engine;
use crate::request::DecideRequest;

#[derive(Debug, Parser)]
#[command(
    name = "permit",
    version,
    about = "Decides whether an agent's pending tool call may run without a person: allow, deny or ask."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum HookAgent {
    /// Claude Code's `PreToolUse` and `PermissionRequest` command hooks.
    ClaudeCode(HookArgs),
    /// OpenAI Codex's `PreToolUse` and `PermissionRequest` hooks. Codex enforces only a deny from
    /// `PreToolUse`, so permit's `ask` is answered there as a deny telling the agent to ask the user.
    Codex(HookArgs),
}

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// Config file for the gate the hook runs itself, and for deciding in-process. Defaults to
    /// $PERMIT_CONFIG, else the built-in defaults.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Decide through a running `permit serve` at this URL (e.g. http://127.0.0.1:8787). The
    /// hook's own gate still answers its denies at once.
    #[arg(long)]
    server: Option<String>,
    /// Environment variable holding the server's bearer token.
    #[arg(long, default_value = "PERMIT_TOKEN")]
    token_env: String,
    /// The hook's whole budget in milliseconds; past it the answer is `ask` (the gate's deny
    /// stands). Keep it well inside the host's hook timeout.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// State that --config (or $PERMIT_CONFIG) is the very file the server at --server runs, so a
    /// call the hook's gate allows or sends to a person needs no round trip. Without a config
    /// file it has no effect.
    #[arg(long, requires = "server")]
    same_config_as_server: bool,
    /// Print the decide request built from the hook input and transcript; decide nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (`POST /v1/decide` and friends) until SIGTERM or Ctrl-C.
    Serve {
        /// Config file (TOML). Defaults to $PERMIT_CONFIG, else the built-in defaults (the gate
        /// plus the local demo model as the screen, on 127.0.0.1:8787).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Listen here instead of `server.bind` (for example `127.0.0.1:0` for any free port).
        #[arg(long)]
        bind: Option<String>,
    },
    /// Decide one request read as JSON on stdin; print the response JSON on stdout.
    Decide {
        /// Config file (TOML). Defaults to $PERMIT_CONFIG, else the built-in defaults.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Print each call's full decision record: the gate's explanation (tier, rules, reason
        /// codes, findings), the screen and review answers, latencies and tokens.
        #[arg(long)]
        explain: bool,
    },
    /// Replay labeled cases (JSONL) through the pipeline and write results, a report and plots.
    Eval(crate::eval::cli::EvalArgs),
    /// Sweep the screen threshold over an eval's results.jsonl and recommend one, with the 95 %
    /// upper bound on its false-allow rate. Exits 3 when the results hold too little evidence
    /// (no screened call, or fewer labeled denies screened than --min-denies), 1 when no
    /// threshold keeps labeled denies at or below --max-false-allow.
    Tune {
        /// results.jsonl from `permit eval`.
        results: PathBuf,
        /// Labeled denies allowed to pass at the recommended threshold.
        #[arg(long, default_value_t = 0)]
        max_false_allow: usize,
        /// Labeled denies the screen must have seen (with a P(allow) and no error) before a
        /// threshold is recommended. At 30 with none passing, the bound is 10 %.
        #[arg(long, default_value_t = crate::eval::tune::DEFAULT_MIN_DENIES,
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        min_denies: usize,
    },
    /// Fit a trained head (`style = "head"`) for the local model on labeled calls: features
    /// from the model's hidden states, regularisation by grouped cross-validation, the
    /// threshold from out-of-fold answers, and the receipt, written as one small JSON file.
    Train {
        /// Case files: `permit eval` cases (`.jsonl`) or `evals/shell-commands.jsonl` lines.
        #[arg(required = true)]
        cases: Vec<PathBuf>,
        /// Where to write the head.
        #[arg(long)]
        out: PathBuf,
        /// The GGUF model whose hidden states the head reads. Defaults to the demo model.
        #[arg(long)]
        model: Option<PathBuf>,
        /// The decoder layer whose residual stream is read (1-based); later layers never run.
        #[arg(long, default_value_t = 19)]
        layer: usize,
        /// Grouped cross-validation folds.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// Also write the out-of-fold answers here, as a `results.jsonl` for `permit tune`.
        #[arg(long)]
        results: Option<PathBuf>,
        /// Keep computed features in this file and reuse them on the next run.
        #[arg(long)]
        features_cache: Option<PathBuf>,
    },
    /// Answer an agent's permission hook (JSON on stdin, the agent's answer on stdout).
    Hook {
        #[command(subcommand)]
        agent: HookAgent,
    },
    /// Turn Claude Code session transcripts into unlabeled eval cases (JSONL) for `permit eval`.
    Replay {
        /// Session transcripts (`~/.claude/projects/<project>/<session>.jsonl`).
        #[arg(required = true)]
        transcripts: Vec<PathBuf>,
        /// Calls taken from each session, spread evenly through it.
        #[arg(long, default_value_t = 10)]
        per_session: usize,
        /// Write the cases here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Validate a config (rule examples included) and print a summary.
    CheckConfig {
        /// Config file (TOML). Defaults to $PERMIT_CONFIG, else the built-in defaults.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

/// Exit code for input permit could not read (bad request JSON).
const EXIT_BAD_INPUT: u8 = 2;
/// Exit code of `permit tune` when the results hold too little evidence to recommend anything.
const EXIT_NO_EVIDENCE: u8 = 3;

fn config_path(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.or_else(|| std::env::var_os(CONFIG_ENV).map(PathBuf::from))
}

fn load_engine(flag: Option<PathBuf>) -> anyhow::Result<Engine> {
    let path = config_path(flag);
    let config = Config::load(path.as_deref())?;
    crate::engine::build_engine(config, &crate::config::config_origin(path.as_deref()), Engine::new)
}

/// Prints to stdout; a reader that went away (`permit decide | head`) is not an error.
fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => result.context("cannot write to stdout"),
    }
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { config, bind } => {
            let path = config_path(config);
            let mut loaded = Config::load(path.as_deref())?;
            if let Some(bind) = bind {
                loaded.server.bind = crate::config::parse_bind_address(&bind)?;
                loaded = Config::revalidated(loaded)?;
            }
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(async {
                let engine =
                    crate::engine::build_engine(loaded, &crate::config::config_origin(path.as_deref()), Engine::new)?;
                for note in engine.model_notes() {
                    tracing::info!("{note}");
                }
                let server = crate::server::Server::bind(engine).await?;
                let address = server.local_addr().context("cannot read the bound address")?;
                eprintln!("permit: listening on http://{address}");
                server.run(crate::server::shutdown_signal()).await?;
                eprintln!("permit: stopped");
                anyhow::Ok(())
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Decide { config, explain } => {
            let engine = load_engine(config)?;
            let mut input = String::new();
            std::io::stdin().read_to_string(&mut input).context("cannot read the request from stdin")?;
            let request = match DecideRequest::from_json(&input) {
                Ok(request) => request,
                Err(error) => {
                    eprintln!("permit: {error}");
                    return Ok(ExitCode::from(EXIT_BAD_INPUT));
                }
            };
            // IO as well as time: a remote screen or review model is an HTTP client (reqwest
            // panics "IO is disabled" on a runtime without it). One thread is enough: the
            // model calls of one request wait on the network together, and the gate's heavy
            // work goes to the blocking pool.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let output = if explain {
                let records = runtime.block_on(engine.records(&request));
                serde_json::to_string_pretty(&serde_json::json!({ "decisions": records }))?
            } else {
                serde_json::to_string_pretty(&runtime.block_on(engine.decide(&request)))?
            };
            print_out(&output)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(args) => {
            crate::eval::cli::run(crate::eval::cli::EvalArgs { config: config_path(args.config.clone()), ..args })
        }
        Command::Hook { agent } => {
            let (host, args) = match agent {
                HookAgent::ClaudeCode(args) => (crate::hook::Host::ClaudeCode, args),
                HookAgent::Codex(args) => (crate::hook::Host::Codex, args),
            };
            let settings = crate::hook::HookSettings {
                host,
                config: config_path(args.config),
                server: args.server,
                token_env: args.token_env,
                timeout: std::time::Duration::from_millis(args.timeout_ms),
                dry_run: args.dry_run,
                same_config_as_server: args.same_config_as_server,
            };
            let mut input = String::new();
            // An unreadable stdin is input the hook cannot read: answered as a block.
            let answer = match std::io::stdin().read_to_string(&mut input) {
                Ok(_) => crate::hook::run(&input, &settings),
                Err(_) => crate::hook::run("", &settings),
            };
            if !answer.stdout.is_empty() {
                print_out(&answer.stdout)?;
            }
            if !answer.stderr.is_empty() {
                eprintln!("{}", answer.stderr);
            }
            Ok(ExitCode::from(answer.exit_code))
        }
        Command::Replay { transcripts, per_session, out } => {
            let mut lines = Vec::new();
            for path in &transcripts {
                let (cases, skipped) = crate::hook::replay::cases(path, per_session)?;
                eprintln!(
                    "permit: {}: {} cases{}",
                    path.display(),
                    cases.len(),
                    if skipped > 0 {
                        format!(" ({skipped} calls skipped: not a valid request)")
                    } else {
                        String::new()
                    }
                );
                lines.extend(cases);
            }
            let mut text = lines.join("\n");
            text.push('\n');
            match out {
                Some(path) => {
                    std::fs::write(&path, text).with_context(|| format!("cannot write `{}`", path.display()))?
                }
                None => print_out(text.trim_end())?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Train { cases, out, model, layer, folds, results, features_cache } => {
            let command = std::env::args().map(|arg| shell_quote(&arg)).collect::<Vec<_>>().join(" ");
            crate::eval::train::run(crate::eval::train::TrainArgs {
                cases,
                out,
                model: model.unwrap_or_else(|| crate::config::default_model_dir().join(crate::config::DEMO_MODEL_FILE)),
                layer,
                folds,
                results,
                features_cache,
                command,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tune { results, max_false_allow, min_denies } => {
            let loaded = crate::eval::read_results(&results)?;
            let recommendation = crate::eval::tune::recommend_with(&loaded, max_false_allow, min_denies);
            // An all-zero sweep says nothing; any other sweep is worth seeing, recommendation or not.
            if !matches!(recommendation, Err(crate::eval::tune::TuneError::NothingScreened(_))) {
                print_out(&crate::eval::tune::table(&loaded))?;
            }
            match recommendation {
                Ok(recommendation) => {
                    print_out(&crate::eval::tune::receipt(&recommendation, &results.display().to_string()))?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    eprintln!("permit: {}: {error}", results.display());
                    Ok(ExitCode::from(if error.is_missing_evidence() { EXIT_NO_EVIDENCE } else { 1 }))
                }
            }
        }
        Command::CheckConfig { config } => {
            let path = config_path(config);
            let loaded = Config::load(path.as_deref())?;
            let source = crate::config::config_origin(path.as_deref());
            let engine = crate::engine::build_engine(loaded, &source, Engine::new)?;
            let mut summary = engine.config().summary(engine.known_tools());
            for note in engine.model_notes() {
                summary.push_str(&format!("\n{note}"));
            }
            print_out(&format!("config ok: {source}\n{summary}"))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A word as a shell would need it to read it back (for the command in a head's receipt).
fn shell_quote(word: &str) -> String {
    if !word.is_empty() && word.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-_./=:@+,".contains(&byte)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}
