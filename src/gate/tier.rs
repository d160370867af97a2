//! The tool registry and the structural tier: what a tool can do, from its annotations alone.
//!
//! Decides a call's starting tier from the tool's MCP-style annotations, never from its
//! arguments. Fails closed: a tool the registry does not know is `high`, and annotations sent by
//! the caller for such a tool are ignored unless the operator opted in.

use rustc_hash::FxHashMap;

use crate::config::{ArgumentSpec, Config, Preset, ToolDefinition};
use crate::decision::Tier;
use crate::request::{Reversibility, ToolAnnotations};

/// A tool the gate knows: its annotations and how its arguments are analysed.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub annotations: ToolAnnotations,
    pub arguments: ArgumentSpec,
}

impl ToolSpec {
    /// The structural tier: `low` = read-only, not destructive, not open-world; `medium` = not
    /// destructive, not open-world; `high` = destructive or open-world. Missing hints take MCP's
    /// defaults (not read-only, destructive, open-world), so an unannotated tool is `high`.
    pub fn structural_tier(&self) -> Tier {
        structural_tier(&self.annotations)
    }

    pub fn reversibility(&self) -> Option<Reversibility> {
        self.annotations.reversibility
    }
}

pub fn structural_tier(annotations: &ToolAnnotations) -> Tier {
    let read_only = annotations.read_only.unwrap_or(false);
    let destructive = annotations.destructive.unwrap_or(true);
    let open_world = annotations.open_world.unwrap_or(true);
    if destructive || open_world {
        Tier::High
    } else if read_only {
        Tier::Low
    } else {
        Tier::Medium
    }
}

/// Every tool the gate knows, by exact name.
#[derive(Clone, Debug, Default)]
pub struct ToolRegistry {
    /// FxHash: the keys come from the config, and a lookup per call is on the hot path.
    tools: FxHashMap<String, ToolSpec>,
}

impl ToolRegistry {
    pub fn from_config(config: &Config) -> Self {
        let mut tools = FxHashMap::default();
        for preset in &config.tools.presets {
            for spec in preset_tools(*preset) {
                tools.insert(spec.name.clone(), spec);
            }
        }
        for definition in &config.tools.define {
            let spec = spec_from_definition(definition);
            tools.insert(spec.name.clone(), spec);
        }
        Self { tools }
    }

    /// Inlined into [`crate::gate::Gate::evaluate`]: one lookup per call, and the hash is cheaper
    /// than the call.
    #[inline]
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

fn spec_from_definition(definition: &ToolDefinition) -> ToolSpec {
    ToolSpec {
        name: definition.name.clone(),
        annotations: definition.annotations,
        arguments: definition.arguments.clone(),
    }
}

const fn hints(read_only: bool, destructive: bool, open_world: bool) -> ToolAnnotations {
    ToolAnnotations {
        read_only: Some(read_only),
        destructive: Some(destructive),
        idempotent: Some(read_only),
        open_world: Some(open_world),
        reversibility: None,
    }
}

/// Read-only, closed-world: `low`.
const READ: ToolAnnotations = hints(true, false, false);
/// Writes, but nothing outside the machine and nothing destroyed by design: `medium`.
const WRITE: ToolAnnotations = hints(false, false, false);
/// Reads, but reaches the open world (the web, remote servers): `high`.
const OPEN_READ: ToolAnnotations = hints(true, false, true);
/// Sends something out of the machine (publishes, messages, schedules remote work): `high`.
const OPEN_WRITE: ToolAnnotations = hints(false, false, true);
/// Runs arbitrary commands: `high`. Argument analysis may lower a known-safe command to `low`.
const EXECUTE: ToolAnnotations = hints(false, true, true);

fn spec(name: &str, annotations: ToolAnnotations, arguments: ArgumentSpec) -> ToolSpec {
    ToolSpec { name: name.to_owned(), annotations, arguments }
}

fn none() -> ArgumentSpec {
    ArgumentSpec::default()
}

fn reads(fields: &[&str]) -> ArgumentSpec {
    ArgumentSpec { read_paths: fields.iter().map(|field| (*field).to_owned()).collect(), ..ArgumentSpec::default() }
}

fn writes(fields: &[&str]) -> ArgumentSpec {
    ArgumentSpec { write_paths: fields.iter().map(|field| (*field).to_owned()).collect(), ..ArgumentSpec::default() }
}

fn shell(field: &str, workdir: Option<&str>) -> ArgumentSpec {
    ArgumentSpec { shell: Some(field.to_owned()), workdir: workdir.map(str::to_owned), ..ArgumentSpec::default() }
}

/// The built-in presets. Names and argument fields follow the hosts' published tool references
/// (Claude Code's "Tools available to Claude", Codex's tool specs and hook payloads); names
/// change between releases, so retired names stay for older sessions and replays.
pub fn preset_tools(preset: Preset) -> Vec<ToolSpec> {
    match preset {
        Preset::ClaudeCode => vec![
            // Files. Reads of credential stores or paths outside the workspace are raised by the
            // path rules, so the hook's matcher should include the read tools too.
            spec("Read", READ, reads(&["file_path"])),
            spec("Glob", READ, ArgumentSpec { glob: Some("pattern".to_owned()), ..reads(&["path"]) }),
            // Grep is ripgrep: its `glob` and `type` fields override the hidden-file rule.
            spec(
                "Grep",
                READ,
                ArgumentSpec {
                    search_globs: vec!["glob".to_owned()],
                    search_types: vec!["type".to_owned()],
                    search_patterns: vec!["pattern".to_owned()],
                    ..reads(&["path"])
                },
            ),
            // Code intelligence through a language server, which runs project code to answer
            // (rust-analyzer runs `build.rs` and proc macros, tsserver loads plugins named in
            // `tsconfig.json`), code the agent may have written: judged as running code.
            spec("LSP", EXECUTE, reads(&["filePath"])),
            spec("Edit", WRITE, writes(&["file_path"])),
            spec("Write", WRITE, writes(&["file_path"])),
            spec("NotebookEdit", WRITE, writes(&["notebook_path"])),
            // Execution. PowerShell has no parser here, so none of its commands is known-safe:
            // it is `high` with no argument analysis and goes to the classifier.
            spec("Bash", EXECUTE, shell("command", None)),
            spec("PowerShell", EXECUTE, none()),
            // Runs a command in the background under Bash's rules; its WebSocket source (`ws`,
            // no `command`) is malformed for the shell analysis and stays `high`.
            spec("Monitor", EXECUTE, shell("command", None)),
            // Web.
            spec("WebFetch", OPEN_READ, none()),
            spec("WebSearch", OPEN_READ, none()),
            // Agents. A subagent's or workflow's own calls come through the hook one by one;
            // launching it changes nothing by itself.
            spec("Agent", WRITE, none()),
            // A workflow is a script Claude Code runs, which can start agents in new git
            // worktrees (`agent(prompt, {isolation: 'worktree'})` runs the repository's hooks;
            // red-team round 36): code the gate cannot read.
            spec("Workflow", EXECUTE, none()),
            spec("TeamCreate", WRITE, none()),
            spec("TeamDelete", WRITE, none()),
            spec("ListAgents", READ, none()),
            // Reaches other sessions, including cloud sessions and other machines.
            spec("SendMessage", OPEN_WRITE, none()),
            // Session bookkeeping.
            spec("TaskCreate", READ, none()),
            spec("TaskGet", READ, none()),
            spec("TaskList", READ, none()),
            spec("TaskUpdate", READ, none()),
            spec("TaskOutput", READ, none()),
            // Stops a background task the agent started.
            spec("TaskStop", WRITE, none()),
            spec("TodoWrite", READ, none()),
            // Scheduling inside the session: later prompts' calls are judged when they come.
            spec("CronCreate", WRITE, none()),
            spec("CronDelete", WRITE, none()),
            spec("CronList", READ, none()),
            spec("ScheduleWakeup", WRITE, none()),
            // Creates routines that run on claude.ai, outside this session and its hooks.
            spec("RemoteTrigger", OPEN_WRITE, none()),
            spec("PushNotification", OPEN_WRITE, none()),
            // Publishes files as pages on claude.ai.
            spec("Artifact", OPEN_WRITE, none()),
            spec("ShareOnboardingGuide", OPEN_WRITE, none()),
            // MCP plumbing. Resources come from the connected servers, which may be remote.
            spec("ToolSearch", READ, none()),
            spec("WaitForMcpServers", READ, none()),
            spec("ListMcpResourcesTool", READ, none()),
            spec("ReadMcpResourceTool", OPEN_READ, none()),
            // Worktrees: a new checkout beside the repository, and back.
            // `git worktree add` checks files out, which runs the repository's post-checkout
            // hook: judged as running code.
            spec("EnterWorktree", EXECUTE, none()),
            spec("ExitWorktree", WRITE, none()),
            // Loads a skill's instructions into the conversation; the calls it leads to are
            // judged one by one.
            spec("Skill", WRITE, none()),
            // The person's own prompts: entering plan mode only restricts; answering questions and
            // approving a plan are the person's (the hook gives these no opinion unless permit
            // denies, so the host's prompt shows). Leaving plan mode is never auto-approved.
            spec("EnterPlanMode", READ, none()),
            spec("AskUserQuestion", READ, none()),
            spec("ExitPlanMode", OPEN_READ, none()),
            // Retired names, kept for older sessions and replays: `Task` (now `Agent`),
            // `MultiEdit`, `NotebookRead`, `LS`, `BashOutput`, `KillShell` / `KillBash`.
            spec("Task", WRITE, none()),
            spec("MultiEdit", WRITE, writes(&["file_path"])),
            spec("NotebookRead", READ, reads(&["notebook_path"])),
            spec("LS", READ, reads(&["path"])),
            spec("BashOutput", READ, none()),
            spec("KillShell", WRITE, none()),
            spec("KillBash", WRITE, none()),
        ],
        Preset::Codex => vec![
            // Codex's hooks report every shell tool (`shell`, `shell_command`, `exec_command`,
            // unified exec) as `Bash` with `{"command": "…"}`, and `apply_patch` with the patch in
            // `command` (the hook judges it under `input`, the tool's own field).
            spec("Bash", EXECUTE, shell("command", Some("workdir"))),
            spec("shell", EXECUTE, shell("command", Some("workdir"))),
            spec("shell_command", EXECUTE, shell("command", Some("workdir"))),
            spec("exec_command", EXECUTE, shell("cmd", Some("workdir"))),
            spec("local_shell", EXECUTE, shell("command", Some("working_directory"))),
            spec("apply_patch", WRITE, ArgumentSpec { patch: Some("input".to_owned()), ..none() }),
            spec("read_file", READ, reads(&["file_path"])),
            spec("list_dir", READ, reads(&["dir_path"])),
            // ripgrep too: `include` is one `--glob`, which overrides hidden and ignore rules.
            spec("grep_files", READ, ArgumentSpec { search_globs: vec!["include".to_owned()], ..reads(&["path"]) }),
            spec("view_image", READ, reads(&["path"])),
            spec("update_plan", READ, none()),
            spec("web_search", OPEN_READ, none()),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_the_annotation_table() {
        assert_eq!(structural_tier(&READ), Tier::Low);
        assert_eq!(structural_tier(&WRITE), Tier::Medium);
        assert_eq!(structural_tier(&OPEN_READ), Tier::High);
        assert_eq!(structural_tier(&EXECUTE), Tier::High);
        // MCP defaults are the cautious ones: no hints at all is high.
        assert_eq!(structural_tier(&ToolAnnotations::default()), Tier::High);
        // Read-only but destructive is contradictory; destructive wins.
        assert_eq!(structural_tier(&hints(true, true, false)), Tier::High);
    }

    #[test]
    fn presets_hold_the_tools_agents_use() {
        let registry = ToolRegistry::from_config(&Config::default());
        for name in ["Read", "Edit", "Bash", "WebFetch", "AskUserQuestion", "shell", "apply_patch"] {
            assert!(registry.get(name).is_some(), "{name}");
        }
        // Claude Code's current names, each with a tier that fits what it can do.
        for (name, tier) in [
            ("Agent", Tier::Medium),
            ("PowerShell", Tier::High),
            ("Monitor", Tier::High),
            ("WebSearch", Tier::High),
            ("ExitPlanMode", Tier::High),
            ("EnterPlanMode", Tier::Low),
            ("LSP", Tier::High),
            ("TaskCreate", Tier::Low),
            ("RemoteTrigger", Tier::High),
            ("SendMessage", Tier::High),
            ("Skill", Tier::Medium),
        ] {
            assert_eq!(registry.get(name).map(ToolSpec::structural_tier), Some(tier), "{name}");
        }
        // No parser for PowerShell: nothing in its arguments can make it known-safe.
        assert!(registry.get("PowerShell").unwrap().arguments.is_empty());
        assert_eq!(registry.get("Read").unwrap().structural_tier(), Tier::Low);
        assert_eq!(registry.get("Edit").unwrap().structural_tier(), Tier::Medium);
        assert_eq!(registry.get("Bash").unwrap().structural_tier(), Tier::High);
        assert!(registry.get("read_file_of_doom").is_none());
    }
}
