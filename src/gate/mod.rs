//! Stage 0, the deterministic tier gate: pure, synchronous, no I/O, microseconds.
//!
//! Facts about the agent's machine reach it only as data in the [`CallContext`] ([`facts`]):
//! a refusal that such a fact would answer names it in the outcome's `needs`, and a caller
//! beside the agent may check it and ask again. Without facts, nothing is looser.
//!
//! Decides `allow | classify | ask | deny` for one pending call from the tool's structural tier,
//! argument analysis (shell parts, paths), operator rules and the mode. Never calls a model and
//! never loosens a decision on a model's say-so. Fails closed: an unknown tool is `high`, a
//! malformed argument or an unparsable command is `high`, a critical finding is a hard deny that
//! no rule and no later stage can override. Every outcome is explained: tier, the ids of the
//! table entries and operator rules that matched, and stable reason codes. Building the gate
//! fails with a [`GateError`] naming the operator rule at fault.

pub mod argspec;
pub mod awk;
pub mod expand;
pub mod facts;
mod memo;
pub mod modes;
mod outcome;
pub mod paths;
mod plain;
pub mod programs;
pub mod rules;
pub mod shell;
pub mod tables;
pub mod tier;

use std::borrow::Cow;

use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::config::{Config, Mode, RuleDecision, UnknownToolAction};
use crate::decision::{GateAction, ReasonCode, Tier};
use crate::gate::argspec::{Role, Slot};
use crate::gate::paths::{Access, Workspace};
use crate::gate::programs::Judgement;
use crate::gate::rules::{CompiledRule, Matcher, RuleError, RuleSet};
use crate::gate::shell::CommandPart;
use crate::gate::tier::{ToolRegistry, ToolSpec};
use crate::request::{PendingCall, Reversibility};

/// The compiled gate: registry, rules and mode. Cheap to share between threads.
#[derive(Clone, Debug)]
pub struct Gate {
    mode: Mode,
    registry: ToolRegistry,
    rules: RuleSet,
    trust_request_annotations: bool,
    unknown_tool_action: UnknownToolAction,
    use_request_cwd: bool,
    /// The configured roots and home, normalised once; each call adds its `cwd`.
    base_workspace: Workspace,
    reversibility_enabled: bool,
    /// Which tools' readings of a command line must all be safe (GNU's, and macOS's BSD ones).
    userland: programs::Userland,
    /// The `mode_tier` finding's text for each tier and action, written once: every call that
    /// the mode decides carries one, and formatting it per call cost a tenth of a Read's time.
    mode_tier_details: [[String; 4]; 4],
}

/// Why the gate cannot be built: an operator rule is wrong. Every message names the rule.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(
        "rule `{id}` has `command_prefix`, but tool `{tool}` takes no shell command; use `path_glob` or no matcher"
    )]
    PrefixWithoutShell { id: String, tool: String },
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// A `match` example the rule does not match (`expected`), or a `not_match` one it does.
    #[error(
        "rule `{id}`: the {} example `{shown}` {} (tool `{tool}`, cwd `{}`); fix the rule or the example",
        if *.expected { "`match`" } else { "`not_match`" },
        if *.expected { "does not match the rule" } else { "matches the rule" },
        rules::EXAMPLE_CWD
    )]
    Example { id: String, expected: bool, shown: String, tool: String },
}

/// The facts about the machine a shell part may rely on.
#[derive(Clone, Copy, Debug)]
struct FactView<'a> {
    /// What a checker found true; `None` when nothing was checked.
    checked: Option<&'a facts::Facts>,
    /// `false` when the part's directory was reached through `..` in a `cd`: the shell may
    /// resolve it through a link (zsh's `CHASE_DOTS`, `cd -P`), so a fact about the directory
    /// the text names may be about another one.
    usable: bool,
}

impl FactView<'_> {
    /// `None` when the facts show `fact(dir)` for every directory in `bases`; otherwise the
    /// facts that would answer (none when a directory is unknown or the facts are unusable
    /// here, since no fact places it).
    fn missing(&self, bases: &[Option<&str>], fact: impl Fn(&str) -> facts::Fact) -> Option<Vec<facts::Fact>> {
        if !self.usable || bases.iter().any(Option::is_none) {
            return Some(Vec::new());
        }
        let wanted: Vec<facts::Fact> = bases.iter().flatten().map(|dir| fact(dir)).collect();
        match self.checked {
            Some(facts) if wanted.iter().all(|wanted| facts.holds(wanted)) => None,
            _ => Some(wanted),
        }
    }
}

/// git subcommands that change only what git keeps in its own directory (index, objects,
/// refs), never a file in the work tree, a hook or git's configuration: another part that
/// runs one cannot make a fact about the machine false (see `relies_on_facts`).
const LEAVES_FACTS_ALONE: &[&str] =
    &["write.git-add", "write.git-commit", "write.git-checkout", "write.git-switch", "write.git-fetch"];

/// Operators a plain line may hold when `sh` runs it (the shell analysis's own bound on parts).
const MAX_PLAIN_OPERATORS: usize = 256;

pub use outcome::{Finding, GateOutcome};

const TIERS: [Tier; 4] = [Tier::Low, Tier::Medium, Tier::High, Tier::Critical];
const ACTIONS: [GateAction; 4] = [GateAction::Allow, GateAction::Classify, GateAction::Ask, GateAction::Deny];

/// What the gate knows about the request around a call.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallContext<'a> {
    pub cwd: Option<&'a str>,
    /// Facts a checker on the agent's machine found true ([`facts`]); `None` judges the text
    /// alone, which is never looser.
    pub facts: Option<&'a facts::Facts>,
}

impl<'a> CallContext<'a> {
    /// A call in `cwd`, judged on its text alone.
    pub fn at(cwd: Option<&'a str>) -> Self {
        CallContext { cwd, facts: None }
    }
}

/// One judged piece of a call: a shell part, a structural finding, or the whole call.
struct Unit {
    /// The command judgement (tables, or the tool's structural tier).
    command_tier: Tier,
    /// The strictest path finding.
    path_tier: Tier,
    findings: Vec<Finding>,
    /// Inline: a unit matches one table entry, seldom more.
    rules: SmallVec<[String; 1]>,
    /// Paths the unit touches, resolved, for path-glob rules.
    paths: Vec<String>,
    /// The shell part's words, for command-prefix rules.
    argv: Option<Vec<String>>,
    /// Code explaining `command_tier`.
    command_code: ReasonCode,
    /// `(path, is a write, base)` already judged for this unit, when `memo` is on.
    judged: memo::JudgedPaths,
    /// A shell part: its paths are shell words, whose globs the gate vouches for only in a few
    /// shapes ([`paths::shell_glob_may_match_sensitive`]). Shell parts also keep the memo.
    memo: bool,
    /// `/dev/fd/N`, `/dev/stdin`, `/dev/stdout` and `/dev/stderr` may name a file (opening one
    /// reopens the file behind the descriptor, for writing too, or a directory): in a shell
    /// line, when a redirection opens a file onto a descriptor; for a file tool always, since
    /// the host process's descriptors (its own protocol stream) are unknown.
    descriptors_may_be_files: bool,
    /// The least strict action the unit may get, unless an operator `allow` rule covers it.
    floor: GateAction,
    /// A path judged as written (a write role, a write redirection, a file tool's write path).
    writes: bool,
    /// Facts about the machine that would answer a refusal here ([`facts`]).
    needs: Vec<facts::Fact>,
    /// A fact about the machine answered a refusal here: only sound when no other part of the
    /// line can change the files first (`cp -r apps src && grep -r x src`).
    relies_on_facts: bool,
}

impl Unit {
    fn new(command_tier: Tier, command_code: ReasonCode) -> Self {
        Unit {
            command_tier,
            path_tier: Tier::Low,
            findings: Vec::new(),
            rules: SmallVec::new(),
            paths: Vec::new(),
            argv: None,
            command_code,
            judged: memo::JudgedPaths::default(),
            memo: false,
            descriptors_may_be_files: true,
            floor: GateAction::Allow,
            writes: false,
            needs: Vec::new(),
            relies_on_facts: false,
        }
    }

    /// Whether the part may create, move or change a file (any write, any command above the
    /// low tier that is not a git command confined to git's own directory).
    fn may_change_files(&self) -> bool {
        self.writes
            || (self.command_tier > Tier::Low && !self.rules.iter().any(|id| LEAVES_FACTS_ALONE.contains(&id.as_str())))
    }

    /// A tool argument is missing or of the wrong type: the call cannot be vouched for.
    fn malformed(&mut self, field: &str, detail: String) {
        self.command_tier = self.command_tier.max(Tier::High);
        self.command_code = ReasonCode::MalformedArguments;
        self.add(ReasonCode::MalformedArguments, field, detail, None);
    }

    fn add(&mut self, code: ReasonCode, subject: impl Into<String>, detail: impl Into<String>, rule: Option<String>) {
        self.findings.push(Finding { code, subject: subject.into(), detail: detail.into(), rule });
    }
}

/// How severe a reason code is, for picking the one that explains an outcome.
fn severity(code: ReasonCode) -> u8 {
    match code {
        ReasonCode::HardDenyRule => 100,
        ReasonCode::CriticalCommand => 95,
        ReasonCode::OperatorRule => 90,
        // Set after the gate, like the budget: the state the call needs could not be read.
        ReasonCode::SessionStoreUnavailable => 86,
        ReasonCode::CostlyBudgetExhausted => 85,
        ReasonCode::CredentialPath => 80,
        ReasonCode::AgentPolicyPath => 78,
        ReasonCode::CiConfigPath => 77,
        ReasonCode::VisibilityConfig => 75,
        ReasonCode::PersistencePath => 76,
        ReasonCode::SystemPath => 74,
        ReasonCode::PathEscape => 72,
        ReasonCode::PathOutsideWorkspace => 70,
        ReasonCode::NoWorkspace => 69,
        ReasonCode::PrivilegeEscalation => 65,
        ReasonCode::EnvironmentOverride => 62,
        ReasonCode::DangerousFlag => 60,
        ReasonCode::OpaqueExecution => 58,
        ReasonCode::DynamicCommand => 56,
        ReasonCode::ShellParseError => 55,
        ReasonCode::MalformedArguments => 54,
        ReasonCode::UnknownTool => 50,
        ReasonCode::UntrustedAnnotationsIgnored => 49,
        ReasonCode::UnlistedCommand => 40,
        ReasonCode::Irreversible => 30,
        ReasonCode::ModeTier => 20,
        ReasonCode::KnownSafeCommand => 10,
        ReasonCode::NoClassifier => 5,
        // The classifier stages' codes: the gate never finds them.
        ReasonCode::ScreenAllow
        | ReasonCode::ReviewAllow
        | ReasonCode::ReviewError
        | ReasonCode::NoReviewModel
        | ReasonCode::ScreenTimeout
        | ReasonCode::ScreenError
        | ReasonCode::ModelBusy
        | ReasonCode::ModelCallLimit
        | ReasonCode::SessionDenialLimit
        | ReasonCode::DecisionTimeout
        | ReasonCode::AuditUnavailable
        | ReasonCode::HookError
        | ReasonCode::DenyNotRequested
        | ReasonCode::DenyScopeExpansion
        | ReasonCode::DenyDestructive
        | ReasonCode::DenyExfiltration
        | ReasonCode::DenySecurityWeakening
        | ReasonCode::DenyBypassesReview
        | ReasonCode::DenyUnclear => 0,
    }
}

fn detail_for(code: ReasonCode) -> &'static str {
    match code {
        ReasonCode::CredentialPath => "is a credential location",
        ReasonCode::AgentPolicyPath => "is one of the agent's own permission or policy files",
        ReasonCode::CiConfigPath => {
            "is a CI pipeline definition (it runs with the repository's secrets and decides which checks run)"
        }
        ReasonCode::PersistencePath => "is a location that runs code later (shell start-up, cron, hooks)",
        ReasonCode::SystemPath => "is a system location",
        ReasonCode::VisibilityConfig => {
            "decides which files search and version-control tools skip (a `!name` line un-hides secrets)"
        }
        ReasonCode::PathEscape => "climbs out of the workspace with `..`",
        ReasonCode::PathOutsideWorkspace => "is outside the workspace",
        ReasonCode::NoWorkspace => "cannot be placed: the request has no usable workspace (`cwd` missing or too broad)",
        ReasonCode::CriticalCommand => "is a write that is never allowed",
        // The only path finding with this code: a name outside ASCII.
        ReasonCode::MalformedArguments => {
            "has characters outside ASCII, which a case-insensitive file system may read as a protected name (APFS reads `ß` as `ss`)"
        }
        _ => "raises the tier",
    }
}

impl Gate {
    /// Compiles the gate and checks every operator rule's examples.
    pub fn new(config: &Config) -> Result<Self, GateError> {
        let registry = ToolRegistry::from_config(config);
        for rule in &config.rules {
            for tool in rule.tool.to_vec() {
                if let Some(spec) = registry.get(&tool)
                    && rule.command_prefix.is_some()
                    && spec.arguments.shell.is_none()
                {
                    return Err(GateError::PrefixWithoutShell { id: rule.id.clone(), tool });
                }
            }
        }
        let gate = Gate {
            mode: config.mode,
            registry,
            rules: RuleSet::compile(&config.rules)?,
            trust_request_annotations: config.tools.trust_request_annotations,
            unknown_tool_action: config.tools.unknown,
            use_request_cwd: config.workspace.use_request_cwd,
            userland: config.workspace.userland,
            base_workspace: Workspace::new(None, false, &config.workspace.roots, &config.home()),
            reversibility_enabled: config.reversibility.enabled,
            mode_tier_details: TIERS.map(|tier| {
                ACTIONS.map(|action| {
                    format!("is a {tier}-tier call, which `{}` mode sends to {}", config.mode.as_str(), action.as_str())
                })
            }),
        };
        gate.check_rule_examples(config)?;
        Ok(gate)
    }

    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Runs each rule's `match` and `not_match` examples (as calls from `/workspace`) and
    /// fails with a message that says which example disagrees.
    fn check_rule_examples(&self, config: &Config) -> Result<(), GateError> {
        let context = CallContext::at(Some(rules::EXAMPLE_CWD));
        for rule_config in &config.rules {
            for (examples, expected) in [(&rule_config.match_examples, true), (&rule_config.not_match, false)] {
                for example in examples {
                    let (tool, input) = rules::example_call(rule_config, example, &self.registry)?;
                    let call = PendingCall { id: "example".to_owned(), name: tool.clone(), input, annotations: None };
                    let outcome = self.evaluate(&call, context);
                    let matched = outcome.rules.iter().any(|id| id == &rule_config.id);
                    if matched != expected {
                        let shown = match example {
                            crate::config::RuleExample::Text(text) => text.clone(),
                            crate::config::RuleExample::Input(input) => Value::Object(input.clone()).to_string(),
                        };
                        return Err(GateError::Example { id: rule_config.id.clone(), expected, shown, tool });
                    }
                }
            }
        }
        Ok(())
    }

    /// Judges one call. Pure: the same call and context always give the same outcome.
    pub fn evaluate(&self, call: &PendingCall, context: CallContext<'_>) -> GateOutcome {
        let workspace = self.base_workspace.with_cwd(context.cwd, self.use_request_cwd);
        let mut call_findings = Vec::new();
        let spec = self.resolve_spec(call, &mut call_findings);
        let structural_tier = spec.as_deref().map(ToolSpec::structural_tier).unwrap_or(Tier::High);

        let mut units = match &spec {
            Some(spec) if spec.arguments.shell.is_some() => self.shell_units(spec, call, context, &workspace),
            Some(spec) => vec![self.file_unit(spec, call, context.cwd, &workspace, structural_tier)],
            None => {
                let mut unit = Unit::new(Tier::High, ReasonCode::UnknownTool);
                if self.unknown_tool_action == UnknownToolAction::Ask {
                    unit.floor = GateAction::Ask;
                }
                vec![unit]
            }
        };
        units.extend(input_escalation(call));
        if let Some(first) = units.first_mut() {
            first.findings.extend(call_findings);
            if spec.is_none() {
                first.add(
                    ReasonCode::UnknownTool,
                    call.name.clone(),
                    "is not a configured tool, so it is treated as high tier",
                    None,
                );
            }
        }

        self.combine(call, units.as_mut_slice(), &spec, structural_tier, &workspace)
    }

    fn resolve_spec(&self, call: &PendingCall, findings: &mut Vec<Finding>) -> Option<Cow<'_, ToolSpec>> {
        if let Some(spec) = self.registry.get(&call.name) {
            return Some(Cow::Borrowed(spec));
        }
        let annotations = call.annotations?;
        if self.trust_request_annotations {
            return Some(Cow::Owned(ToolSpec { name: call.name.clone(), annotations, arguments: Default::default() }));
        }
        findings.push(Finding {
            code: ReasonCode::UntrustedAnnotationsIgnored,
            subject: call.name.clone(),
            detail: "sent its own annotations, which are ignored for tools the operator did not configure".to_owned(),
            rule: None,
        });
        None
    }

    fn shell_units(
        &self,
        spec: &ToolSpec,
        call: &PendingCall,
        context: CallContext<'_>,
        workspace: &Workspace,
    ) -> Vec<Unit> {
        let cwd = context.cwd;
        let structural = spec.structural_tier();
        let field = spec.arguments.shell.as_deref().unwrap_or("command");
        let command: Cow<'_, str> = match call.input.get(field) {
            Some(Value::String(command)) if !command.trim().is_empty() => Cow::Borrowed(command),
            Some(Value::Array(words)) if !words.is_empty() && words.iter().all(Value::is_string) => {
                let words: Vec<String> = words.iter().filter_map(|word| word.as_str().map(str::to_owned)).collect();
                Cow::Owned(shell::join_argv(&words))
            }
            _ => {
                let mut unit = Unit::new(Tier::High, ReasonCode::MalformedArguments);
                unit.add(
                    ReasonCode::MalformedArguments,
                    field,
                    format!("`{field}` must be a non-empty command string or argv array"),
                    None,
                );
                return vec![unit];
            }
        };
        let mut base = cwd.map(Cow::Borrowed);
        let has_dotdot = |path: &str| path.split('/').any(|component| component == "..");
        // Facts are about directories as the text names them; `..` may climb from a link.
        let mut base_through_dotdot = cwd.is_some_and(has_dotdot);
        if let Some(workdir_field) = &spec.arguments.workdir
            && let Some(Value::String(workdir)) = call.input.get(workdir_field)
        {
            base = paths::resolve(workdir, cwd, workspace.home()).map(Cow::Owned);
            base_through_dotdot |= has_dotdot(workdir);
        }
        let analysis = shell::analyze(&command, base.as_deref(), workspace.home());
        let mut units: Vec<Unit> = Vec::with_capacity(analysis.parts.len() + analysis.findings.len() + 1);
        // Asking to leave the sandbox (Codex's `with_escalated_permissions`, Claude Code's
        // `dangerouslyDisableSandbox`) is never routine.
        if ["with_escalated_permissions", "dangerouslyDisableSandbox"]
            .iter()
            .any(|field| call.input.get(*field).is_some_and(|value| value != &Value::Bool(false)))
        {
            let mut unit = Unit::new(Tier::High, ReasonCode::PrivilegeEscalation);
            unit.add(ReasonCode::PrivilegeEscalation, "sandbox", "asks to run outside the sandbox", None);
            units.push(unit);
        }
        // Codex's `local_shell` carries its own environment: anything beyond the harmless
        // variables can change what runs (`GIT_CONFIG_*`, `BASH_ENV`, `GIT_EXTERNAL_DIFF`).
        if let Some(environment) = call.input.get("env").filter(|value| !value.is_null()) {
            let harmless = environment.as_object().is_some_and(|variables| {
                variables
                    .iter()
                    .all(|(name, value)| value.as_str().is_some_and(|value| shell::is_harmless_assignment(name, value)))
            });
            if !harmless {
                let mut unit = Unit::new(Tier::High, ReasonCode::EnvironmentOverride);
                unit.add(
                    ReasonCode::EnvironmentOverride,
                    "env",
                    "sets environment variables for the command that can change what runs",
                    None,
                );
                units.push(unit);
            }
        }
        // The fields a shell call may carry are an allowlist: a host adds fields that change how
        // it runs the command (Codex's `sandbox_permissions = "require_escalated"` runs it outside
        // the sandbox; red-team round 35), and a field the gate does not know is not routine.
        {
            let unknown: Vec<&str> = call
                .input
                .iter()
                .filter(|(name, value)| !value.is_null() && !shell_field_is_routine(name, value, field))
                .map(|(name, _)| name.as_str())
                .collect();
            if !unknown.is_empty() {
                let mut unit = Unit::new(Tier::High, ReasonCode::PrivilegeEscalation);
                unit.add(
                    ReasonCode::PrivilegeEscalation,
                    unknown.join(", "),
                    "is an input field (or value) the gate does not know for a shell call; it may change how the host runs the command, outside its sandbox for one",
                    None,
                );
                units.push(unit);
            }
        }
        // Codex's `exec_command` takes the shell binary itself as `shell`.
        if let Some(shell_binary) = call.input.get("shell") {
            let standard = match shell_binary.as_str() {
                Some("bash" | "/bin/bash" | "/usr/bin/bash") => true,
                // `sh` is dash (Debian, Ubuntu) or busybox ash (Alpine), which do no brace
                // expansion: `sed -n s/x/{y,'a/;1e CMD #'}/ f` is two safe scripts to bash and
                // one with an `e` command to dash (red-team round 52). Every POSIX shell reads
                // a plain line alike (words, `&&`, `||`, `;`, `|`, simple redirections), so only
                // such a line is judged as bash reads it.
                Some("sh" | "/bin/sh") => plain::parse(&command, MAX_PLAIN_OPERATORS).is_some(),
                _ => false,
            };
            if !standard {
                let mut unit = Unit::new(Tier::High, ReasonCode::OpaqueExecution);
                unit.add(
                    ReasonCode::OpaqueExecution,
                    "shell",
                    "runs the command through a shell the gate does not parse (it reads bash; zsh's `>!` and glob qualifiers differ, and `sh` reads anything past a plain line differently)",
                    None,
                );
                units.push(unit);
            }
        }
        if analysis.findings.iter().any(|finding| finding.code == ReasonCode::ShellParseError) {
            // The analysis stopped short: what it did not read must not hide a hard deny.
            for part in shell::crude_parts(&command) {
                if let Some(entry) = tables::lookup_critical(&part, workspace.home()) {
                    let mut unit = Unit::new(Tier::Critical, ReasonCode::CriticalCommand);
                    unit.add(
                        ReasonCode::CriticalCommand,
                        truncate(&part.display(), 120),
                        format!("{} (found in a command too long or too odd to analyse)", entry.description),
                        Some(entry.id.to_owned()),
                    );
                    unit.rules.push(entry.id.to_owned());
                    units.push(unit);
                }
            }
        }
        for finding in analysis.findings {
            let mut unit = Unit::new(finding.tier, finding.code);
            unit.add(finding.code, truncate(&command, 120), finding.detail, finding.rule.map(str::to_owned));
            if let Some(rule) = finding.rule {
                unit.rules.push(rule.to_owned());
            }
            units.push(unit);
        }
        let mut written = false;
        let descriptors_may_be_files = analysis.parts.iter().any(|part| {
            part.redirects
                .iter()
                .any(|(target, _)| target.as_deref().is_none_or(|target| !paths::is_stream_device(target)))
        });
        let first_part_unit = units.len();
        for part in &analysis.parts {
            let facts = FactView { checked: context.facts, usable: !(part.cwd_through_dotdot || base_through_dotdot) };
            let mut unit = self.part_unit(part, structural, workspace, facts, &mut written, descriptors_may_be_files);
            unit.descriptors_may_be_files = false;
            units.push(unit);
        }
        // Facts were checked before the line runs: a part that relies on one is vouched for only
        // when no other part (before it, or beside it in a pipeline) may change the files.
        if units.iter().any(|unit| unit.relies_on_facts) {
            let changers: Vec<bool> = units.iter().map(Unit::may_change_files).collect();
            let count = changers.iter().filter(|changes| **changes).count();
            for (index, unit) in units.iter_mut().enumerate().skip(first_part_unit) {
                if unit.relies_on_facts && count > usize::from(changers[index]) {
                    unit.command_tier = unit.command_tier.max(Tier::High);
                    unit.command_code = ReasonCode::DynamicCommand;
                    unit.add(
                        ReasonCode::DynamicCommand,
                        "facts",
                        "relies on facts about the machine, checked before the line runs, that another part of the line may change (`cp`, `mv`, `touch`, `git stash`)",
                        None,
                    );
                }
            }
        }
        units
    }

    /// Judges one shell part. `written` says whether an earlier part of the same command
    /// writes a file (git must not read a repository or configuration the line itself made);
    /// it is updated for the parts after this one.
    fn part_unit(
        &self,
        part: &CommandPart,
        structural: Tier,
        workspace: &Workspace,
        facts: FactView<'_>,
        written: &mut bool,
        descriptors_may_be_files: bool,
    ) -> Unit {
        let display = || part.display();
        let home = workspace.home();
        let mut unit: Unit;
        let mut known = None;
        let mut other_readings: Vec<(&'static argspec::Grammar, argspec::Parsed)> = Vec::new();
        if let Some(entry) = tables::lookup_critical(part, home) {
            unit = Unit::new(Tier::Critical, ReasonCode::CriticalCommand);
            unit.add(ReasonCode::CriticalCommand, display(), entry.description, Some(entry.id.to_owned()));
            unit.rules.push(entry.id.to_owned());
        } else if part.argv.is_empty() {
            // A bare redirection (`> file`): judged by its paths alone.
            unit = Unit::new(Tier::Low, ReasonCode::ModeTier);
        } else if part.followed && runs_system_program(&part.argv[0]) {
            // `bash -c '…'`, `eval '…'`: the code it runs was split into parts judged on their own.
            // Only a shell the system provides: `./scripts/bash -c ls` runs whatever the agent
            // wrote to `scripts/bash` (red-team round 42); its `-c` text is still walked, so a
            // hard deny inside is found, but the part is never vouched for.
            unit = Unit::new(Tier::Low, ReasonCode::ModeTier);
        } else if part.dynamic_program || !runs_system_program(&part.argv[0]) {
            unit = Unit::new(structural.max(Tier::High), ReasonCode::DynamicCommand);
            unit.add(
                ReasonCode::DynamicCommand,
                display(),
                "runs a program whose name is only known at run time",
                None,
            );
        } else {
            let judgement = if part.program() == "git" {
                programs::judge_git(part.args())
            } else {
                programs::judge(part.program(), part.args(), self.userland)
            };
            match judgement {
                Judgement::Known { entry, grammar, parsed, alternates, tier } => {
                    unit = Unit::new(tier, ReasonCode::KnownSafeCommand);
                    unit.rules.push(entry.id.to_owned());
                    known = Some((entry, grammar, parsed));
                    other_readings = alternates;
                }
                Judgement::Refused { entry, reason } => {
                    unit = Unit::new(structural, ReasonCode::DangerousFlag);
                    unit.add(
                        ReasonCode::DangerousFlag,
                        display(),
                        format!("{reason}, which the known-safe entry `{}` does not vouch for", entry.id),
                        Some(entry.id.to_owned()),
                    );
                }
                Judgement::Unlisted => {
                    unit = Unit::new(structural, ReasonCode::UnlistedCommand);
                    unit.add(ReasonCode::UnlistedCommand, display(), "is not on the known-safe command table", None);
                }
            }
        }
        unit.memo = true;
        // Each of these makes the command itself unvouchable: at least `high`, with its reason.
        // An entry that only prints its text operands (`echo`) may take run-time values there.
        let dynamic_only_as_text = known.as_ref().is_some_and(|(entry, _, parsed): &(_, _, argspec::Parsed)| {
            entry.run_time_text
                && part.arg_flags().iter().enumerate().all(|(word, flags)| {
                    !flags.dynamic
                        || (flags.harmless_text
                            && matches!(
                                parsed.slots.get(word),
                                Some(Some(Slot::Operand { role: Role::Text | Role::Number, .. }))
                            ))
                })
        });
        let raises = [
            (
                part.arguments_from_input,
                ReasonCode::DynamicCommand,
                "takes more arguments from its input at run time (`xargs`): options and paths the gate cannot see",
            ),
            (
                part.dynamic_args && !dynamic_only_as_text && unit.command_tier < Tier::High,
                ReasonCode::DynamicCommand,
                "has arguments only known at run time (variables, substitutions, brace expansion, `xargs` input)",
            ),
            (
                part.environment_override,
                ReasonCode::EnvironmentOverride,
                "sets environment variables that can change what runs (such as `PATH`, `LD_PRELOAD` or `GIT_*`)",
            ),
            (part.opaque, ReasonCode::OpaqueExecution, "runs or configures code the gate cannot see through"),
            (
                part.dynamic_stdin,
                ReasonCode::DynamicCommand,
                "reads a here-document or here-string that expands variables or substitutions (it may print secrets)",
            ),
            (part.privileged, ReasonCode::PrivilegeEscalation, "runs with elevated privileges (`sudo`/`doas`)"),
            (
                // A glob's file read through `<`: only `wc`, which counts, is vouched for (as
                // only metadata programs take glob operands).
                part.reads_glob_through_redirect
                    && !(known.is_some() && part.program() == "wc" && unit.command_tier == Tier::Low),
                ReasonCode::DynamicCommand,
                "reads a file a glob matches through a redirection, which the gate vouches for only when `wc` counts it",
            ),
        ];
        for (applies, code, detail) in raises {
            if applies {
                unit.command_tier = unit.command_tier.max(Tier::High);
                unit.command_code = code;
                unit.add(code, display(), detail, None);
            }
        }
        unit.descriptors_may_be_files = descriptors_may_be_files;
        for (target, redirect_access) in &part.redirects {
            match target {
                Some(target) => {
                    if *redirect_access == Access::Write {
                        unit.command_tier = unit.command_tier.max(Tier::Medium);
                    }
                    self.judge_path(&mut unit, target, *redirect_access, part.cwd.as_deref(), workspace);
                    for base in &part.other_cwds {
                        self.judge_path(&mut unit, target, *redirect_access, base.as_deref(), workspace);
                    }
                }
                None => {
                    unit.path_tier = unit.path_tier.max(Tier::High);
                    unit.add(ReasonCode::DynamicCommand, display(), "redirects to a file only known at run time", None);
                }
            }
        }
        // Where the part runs is itself read (`cd /etc && ls`, a `workdir` elsewhere); an unknown
        // directory (after `cd "$X"`) cannot be placed and counts as outside.
        let directory_findings = match part.cwd.as_deref() {
            Some(directory) if workspace.is_root(directory) => Vec::new(),
            directory => paths::judge(".", Access::Read, directory, workspace),
        };
        for finding in directory_findings {
            unit.path_tier = unit.path_tier.max(finding.tier);
            unit.add(
                finding.code,
                finding.path,
                format!("{} (the directory the command runs in)", detail_for(finding.code)),
                None,
            );
        }
        // Inline: a part is in one directory unless an earlier `cd` may have failed.
        let bases: SmallVec<[Option<&str>; 4]> =
            std::iter::once(part.cwd.as_deref()).chain(part.other_cwds.iter().map(Option::as_deref)).collect();
        match &known {
            Some((entry, grammar, parsed)) => {
                self.judge_known_words(&mut unit, part, entry, grammar, parsed, &bases, workspace, facts);
                for (other_grammar, alternate) in &other_readings {
                    self.judge_known_words(&mut unit, part, entry, other_grammar, alternate, &bases, workspace, facts);
                }
                if part.program() == "git" {
                    // The hooks are only known on the machine: a checker there may show there are
                    // none in every directory the part may run in.
                    let missing = if entry.runs_repository_hooks {
                        facts.missing(&bases, |dir| facts::Fact::NoRepositoryHooks { dir: dir.to_owned() })
                    } else {
                        None
                    };
                    if let Some(missing) = missing {
                        unit.command_tier = unit.command_tier.max(Tier::High);
                        unit.command_code = ReasonCode::OpaqueExecution;
                        unit.add(
                            ReasonCode::OpaqueExecution,
                            part.display(),
                            "runs the repository's hooks, which the gate cannot see and which often run files the agent can edit (`npm test`, lint-staged)",
                            Some(entry.id.to_owned()),
                        );
                        unit.needs.extend(missing);
                    } else if entry.runs_repository_hooks {
                        unit.relies_on_facts = true;
                    }
                    self.judge_git_repository(&mut unit, part, workspace, *written);
                    self.judge_git_operands(&mut unit, part, parsed, &bases, workspace);
                }
            }
            None => self.judge_unknown_words(&mut unit, part, &bases, workspace),
        }
        // What later git parts must not trust: any file this part writes by name, or anything
        // a part no entry vouches for may do. (git's own writes, such as `git add` updating the
        // index, touch neither configuration nor a repository git would newly find.)
        let writes = known.as_ref().is_none_or(|(_, _, parsed)| parsed.writes())
            || other_readings.iter().any(|(_, alternate)| alternate.writes())
            || part.redirects.iter().any(|(_, access)| *access == Access::Write);
        *written |= writes;
        // What the outcome reports as writing by name: a known part's write roles, or a write
        // redirection to anything but a stream device (`2> /dev/null` writes nothing).
        unit.writes = known.as_ref().is_some_and(|(_, _, parsed)| parsed.writes())
            || other_readings.iter().any(|(_, alternate)| alternate.writes())
            || part.redirects.iter().any(|(target, access)| {
                *access == Access::Write && target.as_deref().is_none_or(|target| !paths::is_stream_device(target))
            });
        // Only command-prefix rules read the words; skip the copy when there are none.
        if !self.rules.is_empty() {
            unit.argv = Some(part.argv.clone());
        }
        unit
    }

    /// Judges each word of a part an allowlist entry vouches for, by the role the parse gave it:
    /// read and write paths by the path rules, text and patterns not at all. A glob is accepted
    /// only where any number of file names fits the same role and none can become an option.
    #[allow(clippy::too_many_arguments)]
    fn judge_known_words(
        &self,
        unit: &mut Unit,
        part: &CommandPart,
        entry: &programs::SafeEntry,
        grammar: &argspec::Grammar,
        parsed: &argspec::Parsed,
        bases: &[Option<&str>],
        workspace: &Workspace,
        facts: FactView<'_>,
    ) {
        let args = part.args();
        let flags = part.arg_flags();
        let operand_count = parsed.operands.len();
        let judge = |unit: &mut Unit, value: &str, role: Role, word: usize, operand: Option<usize>| {
            let word_flags = flags.get(word).copied().unwrap_or_default();
            if word_flags.glob {
                let placed =
                    operand.is_some_and(|index| parsed.grammar_operands.in_repeated_section(index, operand_count));
                let harmless_role =
                    matches!(role, Role::Read | Role::Text | Role::Number | Role::Pattern | Role::MaybeRead);
                // After `--` no expanded name can be an option.
                let after_end_of_options =
                    parsed.slots.iter().take(word).any(|slot| matches!(slot, Some(Slot::EndOfOptions)));
                let mut option_safe = !word_flags.glob_leading || entry.options_harmless || after_end_of_options;
                // A leading wildcard expands to names in the directory the part runs in: safe
                // when the machine shows none there begins with `-`.
                if !option_safe && placed && harmless_role {
                    match facts.missing(bases, |dir| facts::Fact::NoDashNames { dir: dir.to_owned() }) {
                        None => {
                            option_safe = true;
                            unit.relies_on_facts = true;
                        }
                        Some(missing) => unit.needs.extend(missing),
                    }
                }
                if !(placed && harmless_role && option_safe) {
                    unit.command_tier = unit.command_tier.max(Tier::High);
                    unit.command_code = ReasonCode::DynamicCommand;
                    unit.add(
                        ReasonCode::DynamicCommand,
                        value,
                        format!(
                            "is a glob where the file names it matches could become options or change other words' roles for `{}`",
                            entry.id
                        ),
                        None,
                    );
                    return;
                }
                if matches!(role, Role::Text | Role::Number | Role::Pattern) {
                    return;
                }
                // A `*` can spell any name the path rules protect (`config/*.toml` matches
                // `secrets.toml`, `*/x` matches `secrets/x`), so no glob whose files are read is
                // vouched for; programs that only print metadata (`ls`, `wc`, `du`) take globs.
                if !entry.metadata_only {
                    unit.command_tier = unit.command_tier.max(Tier::High);
                    unit.command_code = ReasonCode::CredentialPath;
                    unit.add(
                        ReasonCode::CredentialPath,
                        value,
                        "is a glob whose files are read: it may match a credential file such as `secrets.toml` (only `ls`, `wc`, `du` and `df` take globs)",
                        None,
                    );
                    return;
                }
            }
            // `cp -P`/`cp -r` copy a symlink as a link (`/dev/stdin` is one, to
            // `/proc/self/fd/0`, and so are many system files), and `mv` renames device nodes
            // (`mv /dev/null x`): every path a copy or move names lies in the workspace, with no
            // exception for harmless devices, so the gate never creates a link or moves a device.
            if entry.copies_into_directory && matches!(role, Role::Read | Role::Write) {
                for base in bases {
                    let outside = paths::resolve(value, *base, workspace.home())
                        .is_none_or(|resolved| !workspace.contains(&resolved));
                    if outside {
                        unit.path_tier = unit.path_tier.max(Tier::High);
                        unit.add(
                            ReasonCode::PathOutsideWorkspace,
                            value,
                            "is copied or moved outside the workspace: a device or system file may be a symlink or a device node, which the copy or move would recreate",
                            None,
                        );
                    }
                }
            }
            match role {
                Role::Read if value == "-" => {}
                Role::Read => {
                    for base in bases {
                        self.judge_path(unit, value, Access::Read, *base, workspace);
                    }
                }
                Role::MaybeRead => {
                    if let Some(path) = path_like(value, part.program()) {
                        for base in bases {
                            self.judge_path(unit, path, Access::Read, *base, workspace);
                        }
                    }
                }
                Role::Write => {
                    for base in bases {
                        self.judge_path(unit, value, Access::Write, *base, workspace);
                    }
                }
                Role::Text | Role::Number | Role::Pattern | Role::Date | Role::Script => {}
            }
        };
        for given in &parsed.options {
            let mut value_word = given.word + 1;
            for (index, (value, role)) in given.values.iter().enumerate() {
                let word = if given.attached && index == 0 { given.word } else { value_word };
                if !(given.attached && index == 0) {
                    value_word += 1;
                }
                judge(unit, value, *role, word, None);
            }
        }
        for (position, (word, role)) in parsed.operands.iter().enumerate() {
            judge(unit, &args[*word], *role, *word, Some(position));
        }
        if entry.copies_into_directory {
            self.judge_copy_destinations(unit, entry, parsed, args, bases, workspace);
        }
        // A glob in an option word (`-*`, `--file=*`) is never placed.
        for (word, slot) in parsed.slots.iter().enumerate() {
            if matches!(slot, Some(Slot::Option { .. } | Slot::NumericOption))
                && flags.get(word).is_some_and(|flags| flags.glob)
                && !parsed.options.iter().any(|given| given.word == word && given.attached)
            {
                unit.command_tier = unit.command_tier.max(Tier::High);
                unit.command_code = ReasonCode::DynamicCommand;
                unit.add(ReasonCode::DynamicCommand, args[word].clone(), "is an option word holding a glob", None);
            }
        }
        if let Some(needs) = entry.needs {
            self.judge_path_needs(unit, entry, needs(parsed, grammar, args), bases, workspace, facts);
        }
    }

    /// The path words an entry vouches for only with facts about the machine: refused with the
    /// entry's reason, and the facts recorded, unless every one holds; a tree that holds has
    /// each of its files judged as a read.
    fn judge_path_needs(
        &self,
        unit: &mut Unit,
        entry: &programs::SafeEntry,
        needs: programs::PathNeeds,
        bases: &[Option<&str>],
        workspace: &Workspace,
        facts: FactView<'_>,
    ) {
        let (words, why, tree) = match needs {
            programs::PathNeeds::Nothing => return,
            programs::PathNeeds::RegularFiles(words, why) => (words, why, false),
            programs::PathNeeds::PlainTrees(words, why) => (words, why, true),
        };
        // Every word in every directory the part may run in; a word no fact can place (a
        // glob, a run-time value, an unknown directory) leaves the refusal unanswerable.
        let mut wanted: Vec<facts::Fact> = Vec::with_capacity(words.len() * bases.len());
        let mut placeable = facts.usable;
        for word in &words {
            // The program opens the word as written: after a link, `..` climbs from where the
            // link points (`vendor/lib/../home`, with `vendor/lib -> /`), not where the text
            // says, so a word with `..` is not placed.
            let word_is_plain = !paths::has_glob_character(word)
                && !word.contains(['$', '`'])
                && !word.split('/').any(|component| component == "..");
            for base in bases {
                match paths::resolve(word, *base, workspace.home()).filter(|_| word_is_plain && base.is_some()) {
                    Some(path) if tree => wanted.push(facts::Fact::PlainTree { dir: path }),
                    Some(path) => wanted.push(facts::Fact::RegularFile { path }),
                    None => placeable = false,
                }
            }
        }
        let held = placeable && facts.checked.is_some_and(|facts| wanted.iter().all(|fact| facts.holds(fact)));
        if !held {
            unit.command_tier = unit.command_tier.max(Tier::High);
            unit.command_code = ReasonCode::DangerousFlag;
            unit.add(
                ReasonCode::DangerousFlag,
                words.join(" "),
                format!("{why}, which the known-safe entry `{}` vouches for only once the machine shows it", entry.id),
                Some(entry.id.to_owned()),
            );
            if placeable {
                unit.needs.extend(wanted);
            }
            return;
        }
        let Some(facts) = facts.checked else { return };
        unit.relies_on_facts = true;
        for fact in &wanted {
            if let facts::Fact::PlainTree { dir } = fact {
                for file in facts.tree_files(dir).unwrap_or_default() {
                    self.judge_path(unit, file, Access::Read, None, workspace);
                }
            }
        }
    }

    /// `cp`/`mv` into a directory write `DEST/basename(SOURCE)`: judged as a write for every
    /// source. A source whose last component is `.` or `..` merges contents the gate cannot see.
    fn judge_copy_destinations(
        &self,
        unit: &mut Unit,
        entry: &programs::SafeEntry,
        parsed: &argspec::Parsed,
        args: &[String],
        bases: &[Option<&str>],
        workspace: &Workspace,
    ) {
        // The target directory is the option value declared as a write (`-t DIR`), not the
        // first value of any option (`--sparse=auto` is not a destination).
        let target = parsed
            .options
            .iter()
            .flat_map(|given| given.values.iter())
            .find(|(_, role)| *role == Role::Write)
            .map(|(value, _)| value.clone());
        let operands: Vec<&str> = parsed.operands.iter().map(|(word, _)| args[*word].as_str()).collect();
        let (destination, sources) = match (&target, operands.split_last()) {
            (Some(target), _) => (target.as_str(), operands.as_slice()),
            (None, Some((last, rest))) => (*last, rest),
            (None, None) => return,
        };
        for source in sources {
            let name = source.trim_end_matches('/').rsplit('/').next().unwrap_or(source);
            // macOS's BSD `cp -R src/ dest` copies what is inside `src`, as GNU's `src/.` does.
            let bsd_contents =
                self.userland == programs::Userland::Any && entry.id == "write.cp" && source.ends_with('/');
            if matches!(name, "" | "." | "..") || bsd_contents {
                unit.command_tier = unit.command_tier.max(Tier::High);
                unit.command_code = ReasonCode::DangerousFlag;
                unit.add(
                    ReasonCode::DangerousFlag,
                    (*source).to_owned(),
                    "copies a directory's contents, whose names the gate cannot see, into the destination",
                    None,
                );
                continue;
            }
            let written = format!("{}/{name}", destination.trim_end_matches('/'));
            for base in bases {
                self.judge_path(unit, &written, Access::Write, *base, workspace);
            }
        }
    }

    /// git names files inside the repository in ways the shell never sees: an object name
    /// `REV:PATH` reads PATH as committed, a pathspec glob's `*` matches dotfiles, and `:(…)`
    /// magic changes matching. The PATH of an object name is judged as a read; magic pathspecs,
    /// index paths (`:.env`) and globs that could reach dotfiles or credential names are not
    /// vouched for.
    fn judge_git_operands(
        &self,
        unit: &mut Unit,
        part: &CommandPart,
        parsed: &argspec::Parsed,
        bases: &[Option<&str>],
        workspace: &Workspace,
    ) {
        let args = part.args();
        for (word, role) in &parsed.operands {
            // Listing patterns (`git tag -l 'v*'`) name refs, not files.
            if *role == Role::Pattern {
                continue;
            }
            let operand = args[*word].as_str();
            let problem = if operand.starts_with(':') {
                Some("is an index path or pathspec magic, which git matches its own way")
            } else if colon_inside_braces(operand) {
                // git skips a `:` inside `@{…}` and `^{…}` when it splits `REV:PATH`
                // (`HEAD@{10:00}:.npmrc`), so where the path starts is git's call.
                Some("is a revision with braces and a colon, where git may split off a different path")
            } else if operand.contains(['*', '?', '[', '\\']) {
                // git reads `\` as a pattern escape too: `\.npmrc` matches `.npmrc`.
                Some("is a pathspec pattern, which may match credential files (git's `*` also matches dotfiles)")
            } else {
                None
            };
            if let Some(problem) = problem {
                unit.command_tier = unit.command_tier.max(Tier::High);
                unit.command_code = ReasonCode::CredentialPath;
                unit.add(ReasonCode::CredentialPath, operand.to_owned(), problem, None);
                continue;
            }
            // No `:` sits inside braces (refused above), so the first `:` is git's split.
            if let Some((_, path)) = operand.split_once(':').filter(|(_, path)| !path.is_empty()) {
                for base in bases {
                    self.judge_path(unit, path, Access::Read, *base, workspace);
                }
            }
        }
    }

    /// git reads the repository it finds from the directory it runs in, and that repository's
    /// configuration names programs git runs (`core.fsmonitor`, `core.pager`, diff and textconv
    /// drivers, hooks). The workspace's own repository is trusted because nothing the gate
    /// allows writes to `.git/` or plants a `HEAD`; anywhere else, or after an earlier part of
    /// the same command wrote files, git is not known-safe.
    fn judge_git_repository(&self, unit: &mut Unit, part: &CommandPart, workspace: &Workspace, written: bool) {
        let at_root = part.cwd.as_deref().is_some_and(|directory| workspace.is_root(directory))
            && part
                .other_cwds
                .iter()
                .all(|other| other.as_deref().is_some_and(|directory| workspace.is_root(directory)));
        let problem = if !at_root {
            Some(
                "runs git outside the workspace's root, where it may find another repository whose configuration runs programs",
            )
        } else if written {
            Some(
                "runs git after an earlier part of the same command wrote files git may read as a repository or configuration",
            )
        } else {
            None
        };
        if let Some(problem) = problem {
            unit.command_tier = unit.command_tier.max(Tier::High);
            unit.command_code = ReasonCode::OpaqueExecution;
            unit.add(ReasonCode::OpaqueExecution, part.display(), problem, None);
        }
    }

    /// For a part no entry vouches for, every path-like word is judged as a write: it only adds
    /// findings (a credential read, a write to `authorized_keys`), never an allow.
    fn judge_unknown_words(&self, unit: &mut Unit, part: &CommandPart, bases: &[Option<&str>], workspace: &Workspace) {
        let program = part.program();
        let pattern = pattern_argument(program, part.args());
        let args = part.args();
        let end_of_options = args.iter().position(|arg| arg == "--");
        for (index, arg) in args.iter().enumerate() {
            if Some(index) == pattern {
                continue;
            }
            // After `--` every word is an operand, even one starting with `-`.
            let operand = end_of_options.is_some_and(|end| index > end) && arg.starts_with('-');
            let path = if operand { Some(arg.as_str()) } else { path_like(arg, program) };
            if let Some(path) = path {
                for base in bases {
                    self.judge_path(unit, path, Access::Write, *base, workspace);
                }
            }
        }
    }

    fn judge_path(&self, unit: &mut Unit, raw: &str, access: Access, base: Option<&str>, workspace: &Workspace) {
        // The same word judged twice from the same directory adds nothing (`ls a a a …`). Only
        // shell parts, which can repeat words, keep the memo; a file tool judges a path or two.
        if unit.memo && !unit.judged.insert(raw, access == Access::Write, base) {
            return;
        }
        // A shell glob is read by a program (`wc -l server.?em`), so only its vouched shapes
        // pass; a file tool's pattern (Glob) lists names, and is asked of the samples.
        let may_match_sensitive =
            if unit.memo { paths::shell_glob_may_match_sensitive(raw) } else { paths::glob_may_match_sensitive(raw) };
        if may_match_sensitive {
            unit.path_tier = unit.path_tier.max(Tier::High);
            unit.add(
                ReasonCode::CredentialPath,
                raw,
                "is a pattern that can match credential or repository-control files",
                None,
            );
        }
        let resolved = paths::resolve_borrowed(raw, base, workspace.home());
        if unit.descriptors_may_be_files && resolved.as_deref().is_some_and(paths::is_descriptor_path) {
            unit.path_tier = unit.path_tier.max(Tier::High);
            unit.add(
                ReasonCode::DynamicCommand,
                raw,
                "names a descriptor that a redirection in the same command opened on a file: opening it reopens that file, for writing too",
                None,
            );
        }
        for finding in paths::judge_resolved(raw, resolved.as_deref(), access, workspace) {
            unit.path_tier = unit.path_tier.max(finding.tier);
            let rule = (finding.code == ReasonCode::CriticalCommand).then(|| {
                if finding.path.contains("authorized_keys") { "write-authorized-keys" } else { "raw-disk-write" }
                    .to_owned()
            });
            if let Some(rule) = &rule {
                unit.rules.push(rule.clone());
            }
            unit.add(finding.code, finding.path, detail_for(finding.code), rule);
        }
        // Only path-glob rules read the resolved paths; skip the copy when there are no rules.
        if let Some(resolved) = resolved
            && !self.rules.is_empty()
        {
            unit.paths.push(resolved.into_owned());
        }
    }

    fn file_unit(
        &self,
        spec: &ToolSpec,
        call: &PendingCall,
        cwd: Option<&str>,
        workspace: &Workspace,
        structural: Tier,
    ) -> Unit {
        let mut unit = Unit::new(structural, ReasonCode::ModeTier);
        let arguments = &spec.arguments;
        unit.writes = arguments.write_paths.iter().any(|field| call.input.contains_key(field.as_str()));
        let fields = arguments
            .read_paths
            .iter()
            .map(|field| (field, Access::Read))
            .chain(arguments.write_paths.iter().map(|field| (field, Access::Write)));
        for (field, access) in fields {
            match call.input.get(field.as_str()) {
                // A host may trim or otherwise clean a path before it uses it (Claude Code's Grep
                // trims `path` with JavaScript's `trim()` before expanding `~`, so ` ~` is the
                // home directory there and a workspace name here; red-team round 36): a path
                // with blanks at either end or a control character is not judged, it is refused.
                Some(Value::String(path)) if !path.is_empty() && !path_is_plain(path) => {
                    unit.path_tier = unit.path_tier.max(Tier::High);
                    unit.add(
                        ReasonCode::MalformedArguments,
                        field.as_str(),
                        "has blanks at an end or a control character, which the host may strip before it uses the path",
                        None,
                    );
                }
                Some(Value::String(path)) if !path.is_empty() => {
                    self.judge_path(&mut unit, path, access, cwd, workspace)
                }
                // An optional read path defaults to the working directory.
                None if access == Access::Read => {}
                _ => unit.malformed(field, format!("`{field}` must be a non-empty path string")),
            }
        }
        if let Some(field) = &arguments.glob
            && let Some(Value::String(pattern)) = call.input.get(field.as_str())
        {
            let base = match call.input.get("path") {
                Some(Value::String(path)) => paths::resolve(path, cwd, workspace.home()),
                _ => cwd.map(str::to_owned),
            };
            // Brace alternatives can name anything: `{/home/dev/.ssh/*,x}`.
            if ["{/", ",/", "{~", ",~", ".."].iter().any(|escape| pattern.contains(escape)) {
                unit.path_tier = unit.path_tier.max(Tier::High);
                unit.add(
                    ReasonCode::PathOutsideWorkspace,
                    pattern.clone(),
                    "is a pattern that can reach outside the workspace",
                    None,
                );
            }
            let fixed = glob_fixed_prefix(pattern);
            if !fixed.is_empty() {
                self.judge_path(&mut unit, fixed, Access::Read, base.as_deref(), workspace);
            }
        }
        // A pattern is harmless only as a pattern: one starting with `-` is an option to a host
        // that hands it to ripgrep as a bare argument (`--pre=./x.sh` runs the agent's script
        // for every file searched; OpenCode shipped that bug). Hosts that pass it after `-e`
        // are safe either way, but the gate cannot tell them apart (red-team round 55).
        for field in &arguments.search_patterns {
            if let Some(Value::String(pattern)) = call.input.get(field.as_str())
                // After any blank a host may trim (JavaScript's `trim` also strips U+FEFF).
                && pattern.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}').starts_with('-')
            {
                unit.path_tier = unit.path_tier.max(Tier::High);
                unit.add(
                    ReasonCode::OpaqueExecution,
                    field.as_str(),
                    "starts with `-`, which ripgrep reads as an option (`--pre` runs a program) when a host passes the pattern bare",
                    None,
                );
            }
        }
        // A ripgrep-backed search (Claude Code's Grep): an include glob overrides hidden and
        // ignore rules (`glob: ".env"` prints it), and rg searches a hidden directory it is
        // pointed at; neither is vouched for.
        for field in &arguments.search_types {
            match call.input.get(field.as_str()) {
                None | Some(Value::Null) => {}
                Some(Value::String(kind)) if crate::gate::programs::is_source_code_type(kind) => {}
                Some(Value::String(kind)) => {
                    unit.path_tier = unit.path_tier.max(Tier::High);
                    unit.add(
                        ReasonCode::CredentialPath,
                        kind.clone(),
                        "is a ripgrep type that is not a source language: its globs are searched even in hidden files",
                        None,
                    );
                }
                Some(_) => unit.malformed(field, format!("`{field}` must be a type name string")),
            }
        }
        if !arguments.search_globs.is_empty() || !arguments.search_types.is_empty() {
            for field in &arguments.search_globs {
                match call.input.get(field.as_str()) {
                    None | Some(Value::Null) => {}
                    // Claude Code splits the field on commas and blanks into several `--glob`s:
                    // only a value whose every piece is an exclusion is vouched for.
                    // Only printable ASCII: Claude Code splits on JavaScript's `\s`, which
                    // counts U+FEFF and other characters `char::is_whitespace` does not
                    // (`!*.lock<U+FEFF>*` is an exclusion and an include there; round 35).
                    Some(Value::String(glob))
                        if glob.chars().all(|c| c.is_ascii_graphic() || c == ' ')
                            && glob
                                .split([',', ' '])
                                .filter(|piece| !piece.is_empty())
                                .all(|piece| piece.starts_with('!')) => {}
                    Some(Value::String(glob)) => {
                        unit.path_tier = unit.path_tier.max(Tier::High);
                        unit.add(
                            ReasonCode::CredentialPath,
                            glob.clone(),
                            "is a ripgrep include glob: the files it matches are searched even when hidden or gitignored",
                            None,
                        );
                    }
                    Some(_) => unit.malformed(field, format!("`{field}` must be a glob string")),
                }
            }
            for field in &arguments.read_paths {
                if let Some(Value::String(path)) = call.input.get(field.as_str())
                    && path.split('/').any(|part| part.starts_with('.') && part != "." && part != "..")
                {
                    unit.path_tier = unit.path_tier.max(Tier::High);
                    unit.add(
                        ReasonCode::CredentialPath,
                        path.clone(),
                        "is a hidden path: ripgrep searches the hidden files of a directory it is pointed at",
                        None,
                    );
                }
            }
        }
        if let Some(field) = &arguments.patch {
            // Codex's `apply_patch` sends the patch as `input` or, from its shell handler, as
            // `command`; both are read (a string in each is judged, strictest wins).
            let patch = match (call.input.get(field.as_str()), call.input.get("command")) {
                (Some(Value::String(first)), Some(Value::String(second))) if first != second => {
                    Some(Value::String(format!("{first}\n{second}")))
                }
                (Some(value), _) => Some(value.clone()),
                (None, Some(value)) => Some(value.clone()),
                (None, None) => None,
            };
            match patch.as_ref() {
                Some(Value::String(patch)) => {
                    let targets = patch_paths(patch);
                    if targets.is_empty() {
                        unit.command_tier = unit.command_tier.max(Tier::High);
                        unit.add(ReasonCode::MalformedArguments, field.clone(), "the patch names no file", None);
                    }
                    for target in targets {
                        self.judge_path(&mut unit, target, Access::Write, cwd, workspace);
                    }
                }
                _ => unit.malformed(field, format!("`{field}` must be a patch string")),
            }
        }
        unit
    }

    /// Applies rules and the mode to every unit and combines them, strictest wins.
    fn combine(
        &self,
        call: &PendingCall,
        units: &mut [Unit],
        spec: &Option<Cow<'_, ToolSpec>>,
        structural_tier: Tier,
        workspace: &Workspace,
    ) -> GateOutcome {
        let mut action = GateAction::Allow;
        let mut tier = Tier::Low;
        let mut hard_deny = false;
        let mut rules_matched: Vec<String> = Vec::new();
        let mut decisive: Option<(GateAction, ReasonCode, usize)> = None;
        // Sized once: the units' findings, plus the mode and irreversibility entries below.
        let mut findings: Vec<Finding> =
            Vec::with_capacity(units.iter().map(|unit| unit.findings.len()).sum::<usize>() + 2);

        let mut call_rules: Vec<&CompiledRule> = Vec::new();
        self.rules.for_tool(&call.name, |rule| call_rules.push(rule));

        for (index, unit) in units.iter_mut().enumerate() {
            let mut allow_rule = false;
            let mut rule_action: Option<GateAction> = None;
            let mut unit_hard = false;
            for rule in &call_rules {
                let matched = match &rule.matcher {
                    Matcher::AnyCall => true,
                    Matcher::CommandPrefix(_) => unit.argv.as_ref().is_some_and(|argv| rule.matches_argv(argv)),
                    Matcher::PathGlob { .. } => {
                        let mut hits =
                            unit.paths.iter().map(|path| rule.matches_path(path, workspace, workspace.home()));
                        if rule.decision == RuleDecision::Allow {
                            // An allow must cover every path it loosens.
                            !unit.paths.is_empty() && hits.all(|hit| hit)
                        } else {
                            hits.any(|hit| hit)
                        }
                    }
                };
                if !matched {
                    continue;
                }
                unit.rules.push(rule.id.clone());
                let (rule_gate_action, code) = match rule.decision {
                    RuleDecision::Allow => {
                        allow_rule = true;
                        continue;
                    }
                    RuleDecision::Classify => (GateAction::Classify, ReasonCode::OperatorRule),
                    RuleDecision::Ask => (GateAction::Ask, ReasonCode::OperatorRule),
                    RuleDecision::Deny => (GateAction::Deny, ReasonCode::OperatorRule),
                    RuleDecision::HardDeny => {
                        unit_hard = true;
                        (GateAction::Deny, ReasonCode::HardDenyRule)
                    }
                };
                unit.findings.push(Finding {
                    code,
                    subject: String::new(),
                    detail: rule.reason.clone(),
                    rule: Some(rule.id.clone()),
                });
                rule_action = Some(rule_action.map_or(rule_gate_action, |current| current.max(rule_gate_action)));
            }

            let critical = unit.command_tier == Tier::Critical || unit.path_tier == Tier::Critical;
            let command_tier = if allow_rule && !critical { Tier::Low } else { unit.command_tier };
            let unit_tier = command_tier.max(unit.path_tier);
            let mode_action = modes::action_for(self.mode, unit_tier);
            let mut unit_action = match rule_action {
                Some(rule_action) => mode_action.max(rule_action),
                None => mode_action,
            };
            // An unknown tool goes to a person (unless configured to the classifier); only the
            // test-rig mode or an operator rule naming the tool lets it run unattended.
            if !allow_rule && self.mode != Mode::ApproveAllDangerous {
                unit_action = unit_action.max(unit.floor);
            }
            if critical || unit_hard {
                unit_action = GateAction::Deny;
            }
            // A command the parser cannot read cannot be shown to be harmless, in any mode, so
            // a person reads it; not even a model may wave it through.
            if unit.findings.iter().any(|finding| finding.code == ReasonCode::ShellParseError) {
                unit_action = unit_action.max(GateAction::Ask);
            }
            hard_deny |= critical || unit_hard;
            tier = tier.max(unit_tier);

            let code = unit
                .findings
                .iter()
                .map(|finding| finding.code)
                .max_by_key(|code| severity(*code))
                .filter(|code| severity(*code) > severity(unit.command_code))
                .unwrap_or(if allow_rule && !critical { ReasonCode::OperatorRule } else { unit.command_code });
            let better = match decisive {
                None => true,
                Some((best_action, best_code, _)) => {
                    unit_action > best_action || (unit_action == best_action && severity(code) > severity(best_code))
                }
            };
            if better {
                decisive = Some((unit_action, code, index));
            }
            action = action.max(unit_action);
            for rule in unit.rules.drain(..) {
                if !rules_matched.contains(&rule) {
                    rules_matched.push(rule);
                }
            }
            findings.append(&mut unit.findings);
        }

        let mut primary = decisive.map(|(_, code, _)| code).unwrap_or(ReasonCode::ModeTier);
        let mut reason_codes: Vec<ReasonCode> = Vec::with_capacity(findings.len() + 2);
        for finding in &findings {
            if !reason_codes.contains(&finding.code) {
                reason_codes.push(finding.code);
            }
        }
        if !reason_codes.contains(&primary) {
            reason_codes.insert(0, primary);
        }
        if primary == ReasonCode::ModeTier && findings.iter().all(|finding| finding.code != ReasonCode::ModeTier) {
            findings.push(Finding {
                code: ReasonCode::ModeTier,
                subject: call.name.clone(),
                detail: self.mode_tier_details[tier as usize][action as usize].clone(),
                rule: None,
            });
        }

        let reversibility =
            if self.reversibility_enabled { spec.as_deref().and_then(ToolSpec::reversibility) } else { None };
        let model_may_allow = reversibility != Some(Reversibility::Irreversible);
        if !model_may_allow {
            reason_codes.push(ReasonCode::Irreversible);
            findings.push(Finding {
                code: ReasonCode::Irreversible,
                subject: call.name.clone(),
                detail: "is irreversible, so no model may allow it on its own".to_owned(),
                rule: None,
            });
            if action == GateAction::Classify && primary == ReasonCode::ModeTier {
                primary = ReasonCode::Irreversible;
            }
        }

        GateOutcome {
            action,
            tier,
            structural_tier,
            hard_deny,
            veto_only: self.mode == Mode::Reviewer,
            model_may_allow,
            reversibility,
            rules: rules_matched,
            reason_codes,
            primary,
            findings,
            writes: units.iter().any(|unit| unit.writes),
            needs: {
                let mut needs: Vec<facts::Fact> =
                    units.iter_mut().flat_map(|unit| std::mem::take(&mut unit.needs)).collect();
                needs.sort_unstable();
                needs.dedup();
                needs
            },
        }
    }
}

/// Whether `argv[0]` names the program of that name: a bare name found on `PATH`, or a path in
/// the system directories. `./ls` or `/tmp/x/ls` is some other binary.
/// Whether a shell call's input field is one the hosts send for an ordinary run (Claude Code's
/// Bash and Monitor, Codex's `shell`, `shell_command`, `exec_command` and `local_shell`), with a
/// value that leaves the host's sandbox and approvals as they are. The command field itself,
/// `env`, `shell` and `workdir` are judged elsewhere.
fn shell_field_is_routine(name: &str, value: &Value, command_field: &str) -> bool {
    match name {
        _ if name == command_field => true,
        "command" | "cmd" | "env" | "workdir" | "cwd" => true,
        // Codex's `exec_command` runs `[shell, "-c", cmd]`: only a system shell is routine
        // (`./scripts/bash` is a program the agent may have written; round 42).
        "shell" => value.as_str().is_some_and(|shell| {
            runs_system_program(shell) && shell::is_shell(shell.rsplit('/').next().unwrap_or(shell))
        }),
        "description" | "justification" | "timeout" | "timeout_ms" | "yield_time_ms" | "max_output_tokens"
        | "run_in_background" | "login" | "tty" | "prefix_rule" | "id" | "type" => true,
        "with_escalated_permissions" | "dangerouslyDisableSandbox" => value == &Value::Bool(false),
        "sandbox_permissions" => value.as_str() == Some("use_default"),
        _ => false,
    }
}

/// Calls whose input turns a routine tool into one that runs code or changes the agent's own
/// configuration (red-team round 35): Claude Code's `Agent` (formerly `Task`) with
/// `isolation: "worktree"` runs `git worktree add`, which runs the repository's hooks, as
/// `EnterWorktree` does; `ExitWorktree` with any action but `keep` deletes the worktree;
/// `CronCreate` with `durable: true` writes `.claude/scheduled_tasks.json`, so the prompt fires
/// in later sessions.
fn input_escalation(call: &PendingCall) -> Option<Unit> {
    let set = |field: &str| call.input.get(field).is_some_and(|value| !value.is_null() && value != &Value::Bool(false));
    let (code, subject, detail) = match call.name.as_str() {
        "Agent" | "Task" if set("isolation") && call.input.get("isolation").and_then(Value::as_str) != Some("none") => {
            (
                ReasonCode::OpaqueExecution,
                "isolation",
                "starts the agent in a new git worktree, whose checkout runs the repository's hooks",
            )
        }
        // The subagent's fields are an allowlist: `cwd` moves the directory its calls run in,
        // which the host then reports as their `cwd`, and so the workspace the gate judges
        // them against (red-team round 39); `mode` can ask for other permissions.
        "Agent" | "Task" => {
            let (field, _) = call.input.iter().find(|(field, value)| !subagent_field_is_routine(field, value))?;
            let mut unit = Unit::new(Tier::High, ReasonCode::ModeTier);
            unit.add(
                ReasonCode::ModeTier,
                field.as_str(),
                "is not one of the subagent fields the gate knows to be routine (`cwd` moves the workspace its calls are judged against, `mode` changes its permissions)",
                None,
            );
            return Some(unit);
        }
        // `remove` deletes the session's worktree, and with `discard_changes` its uncommitted
        // work and unmerged commits too (Claude Code marks it destructive; round 36).
        "ExitWorktree" if call.input.get("action").and_then(Value::as_str) != Some("keep") => (
            ReasonCode::ModeTier,
            "action",
            "removes the worktree (with `discard_changes`, its uncommitted work and commits): destructive",
        ),
        "CronCreate" if set("durable") => (
            ReasonCode::AgentPolicyPath,
            "durable",
            "persists the scheduled prompt in `.claude/scheduled_tasks.json`, so it fires in later sessions",
        ),
        _ => return None,
    };
    let mut unit = Unit::new(Tier::High, code);
    unit.add(code, subject, detail, None);
    Some(unit)
}

/// Subagent input fields that only describe the work: what it is, which agent, which model,
/// and whether it runs in the background. `isolation` is judged above.
fn subagent_field_is_routine(name: &str, value: &Value) -> bool {
    match name {
        "description" | "prompt" | "subagent_type" | "model" | "run_in_background" | "name" => true,
        "isolation" => value.is_null() || value.as_str() == Some("none"),
        "mode" => value.is_null() || matches!(value.as_str(), Some("default" | "plan")),
        _ => value.is_null(),
    }
}

/// Whether a path has no blank at either end (JavaScript's `trim()` blanks, U+FEFF included)
/// and no control character, so every host uses exactly the text the gate judged.
fn path_is_plain(path: &str) -> bool {
    let blank = |c: char| c.is_whitespace() || c == '\u{feff}';
    !path.starts_with(blank) && !path.ends_with(blank) && !path.chars().any(char::is_control)
}

fn runs_system_program(name: &str) -> bool {
    const SYSTEM_DIRECTORIES: [&str; 6] =
        ["/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/opt/homebrew/bin/"];
    !name.contains('/')
        || SYSTEM_DIRECTORIES
            .iter()
            .any(|directory| name.strip_prefix(directory).is_some_and(|rest| !rest.contains('/')))
}

/// The part of an argument that names a file, if it looks like one. URLs and flags without a
/// value are not paths; `--file=x`, curl's `@file`, anything with a `/`, and names of
/// credential files are.
fn path_like<'a>(arg: &'a str, program: &str) -> Option<&'a str> {
    let arg = if let Some((_, value)) = arg.split_once('=').filter(|_| arg.starts_with('-')) {
        value
    } else if arg.starts_with('-') {
        // A value attached to a short option: `-t/home/dev`, `-f~/.netrc`, `-x/../..`.
        let start = arg.find(['/', '~'])?;
        &arg[start..]
    } else {
        arg
    };
    let arg = arg.strip_prefix('@').unwrap_or(arg);
    // URLs are judged too: `http://x/../../../home/…` is also a relative path.
    if arg.is_empty() || arg.contains('\n') {
        return None;
    }
    if matches!(program, "echo" | "printf") {
        // Printed text only counts as a path when it plainly is one.
        return (arg.starts_with('/') || arg.starts_with("~/") || arg == "~").then_some(arg);
    }
    let looks_like_path = arg.starts_with('/')
        || arg.starts_with('~')
        || arg.starts_with('.')
        || arg.contains('/')
        || arg.contains(['*', '?', '['])
        || paths::is_sensitive_name(arg);
    looks_like_path.then_some(arg)
}

/// The index of the argument that is a pattern or script rather than a file (`grep PATTERN
/// FILE…`, `sed SCRIPT FILE…`), when the pattern is not given with `-e`.
fn pattern_argument(program: &str, args: &[String]) -> Option<usize> {
    const PATTERN_FIRST: [&str; 10] = ["grep", "egrep", "fgrep", "rg", "ag", "ack", "sed", "jq", "awk", "git"];
    // A pattern given by flag, in any spelling (`-e P`, `-eP`, `-ie P`, `--regexp=P`, `--expr P`,
    // `-f FILE`), leaves no bare pattern operand: every operand is then a file.
    let pattern_flag = |arg: &String| {
        let short_cluster = arg.starts_with('-') && !arg.starts_with("--") && arg.contains(['e', 'f']);
        // GNU tools accept unambiguous abbreviations: `--reg=.`, `--exp=p`.
        let name = arg.split('=').next().unwrap_or(arg);
        let long = name.len() > 3
            && name.starts_with("--")
            && ["--regexp", "--expression", "--file"].iter().any(|full| full.starts_with(name));
        short_cluster || long
    };
    if !PATTERN_FIRST.contains(&program) || args.iter().any(pattern_flag) {
        return None;
    }
    // `rg --files` and friends take no pattern: every operand is a path.
    if program == "rg" && args.iter().any(|arg| matches!(arg.as_str(), "--files" | "--type-list" | "--version")) {
        return None;
    }
    if program == "git" {
        // `git grep PATTERN`, `git log --grep=…`: only git grep takes a bare pattern, and only
        // when `grep` is the subcommand (the first operand).
        let grep = args.iter().position(|arg| !arg.starts_with('-')).filter(|first| args[*first] == "grep")?;
        return args.iter().skip(grep + 1).position(|arg| !arg.starts_with('-')).map(|offset| grep + 1 + offset);
    }
    args.iter().position(|arg| !arg.starts_with('-'))
}

/// The directory part of a glob before its first wildcard (`/etc/**/*.conf` → `/etc`).
fn glob_fixed_prefix(pattern: &str) -> &str {
    let wildcard = pattern.find(['*', '?', '[', '{']).unwrap_or(pattern.len());
    let fixed = &pattern[..wildcard];
    if wildcard == pattern.len() {
        return fixed;
    }
    match fixed.rfind('/') {
        Some(0) => "/",
        Some(slash) => &fixed[..slash],
        None => "",
    }
}

/// Paths named by an `apply_patch` patch's file headers.
fn patch_paths(patch: &str) -> Vec<&str> {
    const HEADERS: [&str; 4] = ["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "];
    patch
        .lines()
        // Codex trims header lines, so an indented header still names a file.
        .filter_map(|line| HEADERS.iter().find_map(|header| line.trim_start().strip_prefix(header)))
        .map(str::trim)
        .filter(|path| !path.is_empty())
        .collect()
}

/// The first `limit` characters of `text`, with `…` when cut; looks at no more than that.
fn truncate(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// Builds a pending call; used by examples, tests and benches.
pub fn call(name: &str, input: Value) -> PendingCall {
    let input = match input {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    PendingCall { id: "call".to_owned(), name: name.to_owned(), input, annotations: None }
}

/// Whether a `:` sits inside `{…}` in a git operand (`HEAD@{10:00}:x`, `HEAD^{/fix: y}`): git
/// skips it when splitting `REV:PATH`, so the first `:` is not where the path starts.
fn colon_inside_braces(operand: &str) -> bool {
    let mut depth = 0usize;
    for byte in operand.bytes() {
        match byte {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b':' if depth > 0 => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests;
