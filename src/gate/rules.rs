//! Operator rules: a tool plus an argument matcher (command prefix or path glob), a decision
//! and a reason, compiled once at load.
//!
//! Decides which rules match a call or a shell part; the gate combines them (strictest wins, a
//! `hard_deny` wins over everything, an `allow` only replaces the command judgement of what it
//! covers and never a path finding or a critical entry). Compiling fails, and the config does
//! not load, when a glob is invalid (a [`RuleError`] naming the rule) or a rule's `match` /
//! `not_match` examples disagree with what the rule does (the gate runs them: a
//! [`GateError`](crate::gate::GateError)).

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use serde_json::{Map, Value};

use crate::config::{RuleConfig, RuleDecision, RuleExample};
use crate::gate::paths::Workspace;
use crate::gate::tier::ToolRegistry;

/// The directory rule examples are judged from.
pub const EXAMPLE_CWD: &str = "/workspace";

/// Why a rule does not compile; every message names the rule.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("rule `{id}`: `tool` glob `{tool}` is invalid: {error}")]
    ToolGlob { id: String, tool: String, error: globset::Error },
    #[error("rule `{id}`: `command_prefix` must not be empty")]
    EmptyPrefix { id: String },
    #[error("rule `{id}`: `path_glob` `{pattern}` is invalid: {error}")]
    PathGlob { id: String, pattern: String, error: globset::Error },
    #[error("rule `{id}`: `path_glob` is invalid: {error}")]
    PathGlobSet { id: String, error: globset::Error },
    #[error(
        "rule `{id}`: the example `{text}` is a string, but tool `{tool}` has no command or path field to put it in; write the example as the call's input table, e.g. {{ field = \"…\" }}"
    )]
    TextExampleWithoutField { id: String, text: String, tool: String },
}

#[derive(Clone, Debug)]
pub enum Matcher {
    /// Any call to the tool.
    AnyCall,
    /// Shell parts whose words start with one of these word lists.
    CommandPrefix(Vec<Vec<String>>),
    /// Paths matching one of these globs (relative ones inside the workspace).
    PathGlob { relative: Option<GlobSet>, absolute: Option<GlobSet> },
}

#[derive(Clone, Debug)]
pub struct CompiledRule {
    pub id: String,
    pub decision: RuleDecision,
    pub reason: String,
    pub matcher: Matcher,
}

impl CompiledRule {
    /// Whether the rule's words prefix this part's argv (`cargo test` covers `cargo test --all`,
    /// not `cargo testify`). Program names are compared without their directory.
    pub fn matches_argv(&self, argv: &[String]) -> bool {
        let Matcher::CommandPrefix(prefixes) = &self.matcher else { return false };
        prefixes.iter().any(|prefix| {
            prefix.len() <= argv.len()
                && prefix.iter().zip(argv).enumerate().all(|(index, (want, have))| {
                    if index == 0 {
                        want == have || have.rsplit('/').next() == Some(want.as_str())
                    } else {
                        want == have
                    }
                })
        })
    }

    /// Whether a resolved absolute path matches the rule's globs.
    pub fn matches_path(&self, resolved: &str, workspace: &Workspace, home: &str) -> bool {
        let Matcher::PathGlob { relative, absolute } = &self.matcher else { return false };
        let relative_hit =
            relative.as_ref().zip(workspace.relative(resolved)).is_some_and(|(globs, inside)| globs.is_match(inside));
        let absolute_hit = absolute.as_ref().is_some_and(|globs| {
            globs.is_match(resolved)
                || resolved.strip_prefix(home).is_some_and(|rest| globs.is_match(format!("~{rest}")))
        });
        relative_hit || absolute_hit
    }
}

/// All operator rules, indexed by tool.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<CompiledRule>,
    by_exact_tool: rustc_hash::FxHashMap<String, Vec<usize>>,
    by_tool_glob: Vec<(GlobMatcher, usize)>,
}

impl RuleSet {
    pub fn compile(configs: &[RuleConfig]) -> Result<Self, RuleError> {
        let mut set = RuleSet::default();
        for (index, config) in configs.iter().enumerate() {
            let matcher = compile_matcher(config)?;
            set.rules.push(CompiledRule {
                id: config.id.clone(),
                decision: config.decision,
                reason: config.reason.clone(),
                matcher,
            });
            for tool in config.tool.to_vec() {
                if tool.contains(['*', '?', '[']) {
                    let glob = Glob::new(&tool).map_err(|error| RuleError::ToolGlob {
                        id: config.id.clone(),
                        tool: tool.clone(),
                        error,
                    })?;
                    set.by_tool_glob.push((glob.compile_matcher(), index));
                } else {
                    set.by_exact_tool.entry(tool).or_default().push(index);
                }
            }
        }
        Ok(set)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Calls `visit` with every rule that applies to `tool`, in config order.
    pub fn for_tool<'a>(&'a self, tool: &str, mut visit: impl FnMut(&'a CompiledRule)) {
        if self.rules.is_empty() {
            return;
        }
        let exact = self.by_exact_tool.get(tool).map(Vec::as_slice).unwrap_or(&[]);
        let mut indices: Vec<usize> = exact.to_vec();
        indices.extend(self.by_tool_glob.iter().filter(|(glob, _)| glob.is_match(tool)).map(|(_, index)| *index));
        if !self.by_tool_glob.is_empty() {
            indices.sort_unstable();
            indices.dedup();
        }
        for index in indices {
            if let Some(rule) = self.rules.get(index) {
                visit(rule);
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<&CompiledRule> {
        self.rules.iter().find(|rule| rule.id == id)
    }
}

fn compile_matcher(config: &RuleConfig) -> Result<Matcher, RuleError> {
    if let Some(prefixes) = &config.command_prefix {
        let prefixes: Vec<Vec<String>> = prefixes
            .to_vec()
            .iter()
            .map(|prefix| prefix.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        if prefixes.iter().any(Vec::is_empty) {
            return Err(RuleError::EmptyPrefix { id: config.id.clone() });
        }
        return Ok(Matcher::CommandPrefix(prefixes));
    }
    if let Some(globs) = &config.path_glob {
        let mut relative = GlobSetBuilder::new();
        let mut absolute = GlobSetBuilder::new();
        let (mut has_relative, mut has_absolute) = (false, false);
        for pattern in globs.to_vec() {
            let glob = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map_err(|error| RuleError::PathGlob { id: config.id.clone(), pattern: pattern.clone(), error })?;
            if pattern.starts_with('/') || pattern.starts_with('~') {
                absolute.add(glob);
                has_absolute = true;
            } else {
                relative.add(glob);
                has_relative = true;
            }
        }
        let build = |builder: GlobSetBuilder, id: &str| {
            builder.build().map_err(|error| RuleError::PathGlobSet { id: id.to_owned(), error })
        };
        return Ok(Matcher::PathGlob {
            relative: if has_relative { Some(build(relative, &config.id)?) } else { None },
            absolute: if has_absolute { Some(build(absolute, &config.id)?) } else { None },
        });
    }
    Ok(Matcher::AnyCall)
}

/// Turns a rule example into the tool name and input it stands for.
pub fn example_call(
    config: &RuleConfig,
    example: &RuleExample,
    registry: &ToolRegistry,
) -> Result<(String, Map<String, Value>), RuleError> {
    let tool = config.tool.to_vec().into_iter().next().unwrap_or_default();
    match example {
        RuleExample::Input(input) => Ok((tool, input.clone())),
        RuleExample::Text(text) => {
            let spec = registry.get(&tool);
            let field = spec.and_then(|spec| {
                spec.arguments
                    .shell
                    .clone()
                    .or_else(|| spec.arguments.write_paths.first().cloned())
                    .or_else(|| spec.arguments.read_paths.first().cloned())
            });
            let Some(field) = field else {
                return Err(RuleError::TextExampleWithoutField { id: config.id.clone(), text: text.clone(), tool });
            };
            let mut input = Map::new();
            input.insert(field, Value::String(text.clone()));
            Ok((tool, input))
        }
    }
}
