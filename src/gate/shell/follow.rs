//! Following what a command runs: wrappers (`env`, `nice`, `timeout`, `xargs`… and their own
//! options, judged like any program's), and the scripts a shell or an interpreter is handed
//! (`bash -c '…'`, `sh script.sh` written earlier in the same line, a here-document fed to a
//! shell). Each followed script is walked like the line itself, so every part in it is judged.
//!
//! Decides nothing itself: what it cannot follow becomes a finding that keeps the call from
//! being allowed (opaque execution, a dynamic program, an undeclared wrapper option).

use super::*;

/// A wrapper that runs the command after its own options: each option it accepts, declared
/// with the role of its value. An option left out makes the part opaque.
pub(super) struct Wrapper {
    names: &'static [&'static str],
    options: &'static [&'static str],
    /// Operands before the command (`timeout DURATION cmd`).
    leading_operands: usize,
    /// `NAME=value` words before the command set its environment (`env`).
    assignments: bool,
    /// Short letters of options that remove variables from the command's environment (`env
    /// -i`, `env -u PATH`, `exec -c`). Without `PATH`, bash searches its built-in default path,
    /// which ends in `.`, and programs fall back to defaults the gate does not model, so these
    /// are environment overrides like `PATH=…`.
    clears_environment: &'static [char],
}

pub(super) const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["env"],
        options: &["-i, --ignore-environment", "-0, --null", "-u, --unset=TEXT", "-v, --debug"],
        leading_operands: 0,
        assignments: true,
        clears_environment: &['i', 'u'],
    },
    Wrapper {
        names: &["nice"],
        options: &["-n, --adjustment=NUM"],
        leading_operands: 0,
        assignments: false,
        clears_environment: &[],
    },
    Wrapper {
        names: &["ionice"],
        options: &["-c, --class=TEXT", "-n, --classdata=NUM", "-t, --ignore"],
        leading_operands: 0,
        assignments: false,
        clears_environment: &[],
    },
    Wrapper {
        names: &["time"],
        options: &[
            "-p, --portability",
            "-o, --output=WRITE",
            "-a, --append",
            "-f, --format=TEXT",
            "-v, --verbose",
            "-q, --quiet",
        ],
        leading_operands: 0,
        assignments: false,
        clears_environment: &[],
    },
    Wrapper {
        names: &["timeout"],
        options: &["-s, --signal=TEXT", "-k, --kill-after=TEXT", "--preserve-status", "--foreground", "-v, --verbose"],
        leading_operands: 1,
        assignments: false,
        clears_environment: &[],
    },
    Wrapper {
        names: &["stdbuf"],
        options: &["-i, --input=TEXT", "-o, --output=TEXT", "-e, --error=TEXT"],
        leading_operands: 0,
        assignments: false,
        clears_environment: &[],
    },
    Wrapper { names: &["command"], options: &["-p"], leading_operands: 0, assignments: false, clears_environment: &[] },
    // `-a NAME` and `-l` change argv[0], on which multi-call programs dispatch (`exec -a
    // git-clean git ls-files` runs `git clean`): left out, so they make the part opaque.
    Wrapper { names: &["exec"], options: &["-c"], leading_operands: 0, assignments: false, clears_environment: &['c'] },
    Wrapper {
        names: &["nohup", "builtin", "chronic", "unbuffer", "caffeinate"],
        options: &[],
        leading_operands: 0,
        assignments: false,
        clears_environment: &[],
    },
];

/// Wrapper grammars, compiled once (a unit test checks each compiles).
pub(super) static WRAPPER_GRAMMARS: LazyLock<Vec<(&'static Wrapper, Grammar)>> = LazyLock::new(|| {
    WRAPPERS
        .iter()
        .filter_map(|wrapper| {
            let mut grammar = Grammar::new(Style::Posix, wrapper.options, "TEXT...").ok()?;
            grammar.numeric_option = wrapper.names.contains(&"nice");
            Some((wrapper, grammar))
        })
        .collect()
});

/// `-c`, or a cluster of short flags that includes `c` (`-lc`, `-ec`).
pub(super) fn is_dash_c(arg: &str) -> bool {
    arg.len() >= 2
        && arg.starts_with('-')
        && !arg.starts_with("--")
        && arg[1..].chars().all(|c| c.is_ascii_alphabetic())
        && arg.contains('c')
}

/// Counts the wrapper's own options (and `NAME=value` words for `env`) before the wrapped
/// command. `None` when nothing follows.
pub(super) fn skip_options(args: &[String], options_with_value: &[&str], assignments: bool) -> Option<usize> {
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        if arg == "--" {
            index += 1;
            break;
        }
        if options_with_value.contains(&arg.as_str()) {
            index += 2;
        } else if (arg.starts_with('-') && arg.len() > 1) || (assignments && arg.contains('=')) {
            index += 1;
        } else {
            break;
        }
    }
    (index < args.len()).then_some(index)
}

impl Walker<'_> {
    /// Strips wrappers that run another command (`env`, `sudo`, `nice`, `time`, `xargs`, …).
    /// A wrapper's own options are judged with its declared grammar: a `WRITE` value (`time -o
    /// FILE`) becomes a write of the part, and an undeclared option makes the part opaque.
    pub(super) fn unwrap_wrappers(&mut self, part: &mut CommandPart) {
        for _ in 0..8 {
            let env = part.program() == "env";
            let skip = match part.program() {
                "sudo" | "doas" => {
                    part.privileged = true;
                    skip_options(part.args(), &["-u", "-g", "-h", "-p", "-U", "-C", "-D", "-r", "-t", "-T"], false)
                }
                // `command -v` looks a name up (judged by the table); `command X` runs X.
                "command" if part.args().iter().any(|arg| arg == "-v" || arg == "-V") => None,
                "xargs" => {
                    part.dynamic_args = true;
                    part.arguments_from_input = true;
                    // `xargs -a FILE` reads its arguments from FILE.
                    let args = part.args().to_vec();
                    for (index, arg) in args.iter().enumerate() {
                        let file = match arg.as_str() {
                            "-a" | "--arg-file" => args.get(index + 1).cloned(),
                            other => other
                                .strip_prefix("--arg-file=")
                                .or_else(|| other.strip_prefix("-a").filter(|rest| !rest.is_empty()))
                                .map(str::to_owned),
                        };
                        if let Some(file) = file {
                            part.redirects.push((Some(file), Access::Read));
                        }
                    }
                    skip_options(
                        part.args(),
                        &[
                            "-I",
                            "-i",
                            "-n",
                            "-P",
                            "-L",
                            "-l",
                            "-d",
                            "-E",
                            "-e",
                            "-s",
                            "-a",
                            "--arg-file",
                            "--delimiter",
                            "--max-args",
                            "--max-procs",
                            "--replace",
                        ],
                        false,
                    )
                }
                name => match WRAPPER_GRAMMARS.iter().find(|(wrapper, _)| wrapper.names.contains(&name)) {
                    Some((wrapper, grammar)) => self.judge_wrapper(part, wrapper, grammar),
                    None => None,
                },
            };
            let Some(skip) = skip else { return };
            // `sudo` alone or `env` alone is the wrapper itself; keep it as the program.
            if skip + 1 >= part.argv.len() {
                return;
            }
            // `builtin cd` is the shell's cd; any other wrapper runs a program of that name in a
            // child process (`env cd x` changes nothing, macOS has a `/usr/bin/cd`).
            if part.program() != "builtin" {
                part.wrapped = true;
            }
            part.drain_words(skip + 1);
            part.refresh_name();
            if env && part.args().is_empty() && part.argv.first().is_some_and(|name| name.contains('=')) {
                return;
            }
        }
    }

    /// Parses a wrapper's own options; returns how many of its arguments precede the command.
    pub(super) fn judge_wrapper(
        &mut self,
        part: &mut CommandPart,
        wrapper: &Wrapper,
        grammar: &Grammar,
    ) -> Option<usize> {
        let args = part.args().to_vec();
        let parsed = match grammar.parse(&args) {
            Ok(parsed) => parsed,
            Err(_) => {
                // An option the gate cannot vouch for (`env -S`, `env --chdir`, `time --bogus`):
                // the part is opaque, but the command is still found for the critical table.
                part.opaque = true;
                return skip_options(&args, &[], wrapper.assignments);
            }
        };
        for given in &parsed.options {
            if grammar.options[given.option].short.iter().any(|letter| wrapper.clears_environment.contains(letter)) {
                part.environment_override = true;
            }
            for (value, role) in &given.values {
                match role {
                    Role::Write => part.redirects.push((Some(value.clone()), Access::Write)),
                    Role::Read => part.redirects.push((Some(value.clone()), Access::Read)),
                    _ => {}
                }
            }
        }
        let mut command = parsed.operands.first().map(|(word, _)| *word)?;
        command += wrapper.leading_operands;
        if wrapper.assignments {
            while let Some(word) = args.get(command).filter(|word| word.contains('=')) {
                part.environment_override |= !harmless_assignment(word);
                command += 1;
            }
        }
        (command < args.len()).then_some(command)
    }

    /// Follows execution into code the command runs: `bash -c`, `eval`, scripts written earlier,
    /// and shells fed from pipes, here-documents or process substitution. Returns whether that
    /// code was followed (and so judged part by part).
    pub(super) fn follow_execution(
        &mut self,
        part: &CommandPart,
        input: PipeInput,
        stdin_text: Option<&str>,
        fetched: bool,
        depth: usize,
    ) -> bool {
        let program = part.program();
        let args = part.args();
        let runs_code = is_shell(program)
            || program == "eval"
            || program == "source"
            || program == "."
            || INTERPRETERS.contains(&program);
        if runs_code && fetched {
            self.finding(
                ReasonCode::CriticalCommand,
                Tier::Critical,
                Some("download-and-execute"),
                format!("`{program}` runs code downloaded from the network"),
            );
            return false;
        }
        if is_shell(program) {
            return self.follow_shell(part, input, stdin_text, depth);
        }
        if INTERPRETERS.contains(&program) && input.from_network && reads_code_from_stdin(part) {
            self.finding(
                ReasonCode::CriticalCommand,
                Tier::Critical,
                Some("download-and-execute"),
                format!("`{program}` runs code piped from the network"),
            );
            return false;
        }
        match program {
            "eval" => {
                // bash expands globs before `eval` parses the words: a file name becomes code.
                if part.dynamic_args || part.arg_flags().iter().any(|flags| flags.glob) {
                    self.finding(
                        ReasonCode::OpaqueExecution,
                        Tier::High,
                        None,
                        "`eval` runs text only known at run time".to_owned(),
                    );
                    false
                } else {
                    // `eval` runs in this shell: its `cd` moves later parts too.
                    let script = args.join(" ");
                    self.walk_source(&script, depth + 1);
                    true
                }
            }
            "source" | "." => match args.first() {
                Some(script) => {
                    let script = script.clone();
                    self.follow_script(program, &script, &part.cwd, depth)
                }
                None => {
                    self.finding(ReasonCode::OpaqueExecution, Tier::High, None, format!("`{program}` without a file"));
                    false
                }
            },
            _ => {
                // `./build.sh`: a script written earlier in this line is judged by its payload.
                let name = part.argv.first().map(String::as_str).unwrap_or_default();
                if name.contains('/')
                    && let Some(resolved) = paths::resolve(name, part.cwd.as_deref(), self.home)
                    && let Some(payload) = self.written.get(&resolved).cloned()
                {
                    self.scoped(|walker| walker.walk_source(&payload, depth + 1));
                }
                // A script file is never vouched for: other writes in the line may change it.
                false
            }
        }
    }

    pub(super) fn follow_shell(
        &mut self,
        part: &CommandPart,
        input: PipeInput,
        stdin_text: Option<&str>,
        depth: usize,
    ) -> bool {
        let program = part.program();
        let args = part.args();
        // A shell reads options only up to its first operand, and `--` or `-` end them: `bash
        // x.sh -c ls` runs the file `x.sh`, `bash -- -c` a file named `-c`, and `bash -c -x
        // 'ls'` runs `ls` (the script is the first operand, not the word after `-c`).
        let leading = args.iter().position(|arg| !arg.starts_with(['-', '+']) || arg == "--" || arg == "-");
        let options = &args[..leading.unwrap_or(args.len())];
        let operands = match leading {
            Some(end) if matches!(args[end].as_str(), "--" | "-") => &args[end + 1..],
            Some(end) => &args[end..],
            None => &[][..],
        };
        let dash_c = options.iter().any(|arg| is_dash_c(arg));
        if input.from_network && !dash_c {
            self.finding(
                ReasonCode::CriticalCommand,
                Tier::Critical,
                Some("download-and-execute"),
                format!("`{program}` runs a script piped from the network"),
            );
            return false;
        }
        // Options are an allowlist: `-k`, `-i`, `-l`, `-O`, `--rcfile` and friends run or
        // configure code first, or change what the script's words mean.
        if options.iter().any(|arg| !shell_option_is_declared(arg)) {
            self.finding(
                ReasonCode::OpaqueExecution,
                Tier::High,
                None,
                format!("`{program}` starts with options that run or configure other code"),
            );
            return false;
        }
        if dash_c {
            return match operands.first() {
                Some(script) if !part.dynamic_args => {
                    let script = script.clone();
                    self.follow_shell_text(program, &script, depth)
                }
                _ => {
                    self.finding(
                        ReasonCode::OpaqueExecution,
                        Tier::High,
                        None,
                        format!("`{program} -c` runs a script only known at run time"),
                    );
                    false
                }
            };
        }
        if let Some(script) = operands.first() {
            let script = script.clone();
            return self.follow_script(program, &script, &part.cwd, depth);
        }
        if input.from_network {
            self.finding(
                ReasonCode::CriticalCommand,
                Tier::Critical,
                Some("download-and-execute"),
                format!("`{program}` runs a script piped from the network"),
            );
            false
        } else if let Some(text) = stdin_text.filter(|_| !input.from_pipe) {
            // zsh (`multios`, on by default) feeds a piped shell both the pipe and the
            // here-document, so a here-document is the script only without a pipe.
            // Walked for what it finds, never vouched for: the script's commands share the
            // stdin the shell reads the script from, a line at a time, so `head -c 5` eats the
            // start of the next line and `echo … >> /dev/fd/0` appends one (red-team round 34).
            let text = text.to_owned();
            self.follow_shell_text(program, &text, depth);
            self.finding(
                ReasonCode::OpaqueExecution,
                Tier::High,
                None,
                format!(
                    "`{program}` reads its script from stdin, which the script's own commands can read or write before the shell does"
                ),
            );
            false
        } else if input.from_pipe || part.dynamic_args || part.stdin_redirected {
            self.finding(
                ReasonCode::OpaqueExecution,
                Tier::High,
                None,
                format!("`{program}` runs a script read from a pipe"),
            );
            false
        } else {
            // An interactive shell with no script: nothing the gate can see through.
            self.finding(
                ReasonCode::OpaqueExecution,
                Tier::High,
                None,
                format!("`{program}` starts an interactive shell"),
            );
            false
        }
    }

    /// Walks a script a shell runs in a subshell, when the gate reads that shell's grammar.
    /// A script the gate cannot read in the shell's own grammar is still walked as bash, since
    /// what that finds can only add strictness (`rm -rf ~` stays a hard deny), but the part is
    /// never vouched for.
    pub(super) fn follow_shell_text(&mut self, program: &str, script: &str, depth: usize) -> bool {
        let readable = match dialect(program) {
            Dialect::Bash => true,
            Dialect::PlainOnly => crate::gate::plain::parse(script, MAX_PARTS).is_some(),
            Dialect::Unread => false,
        };
        self.scoped(|walker| walker.walk_source(script, depth + 1));
        if !readable {
            self.finding(
                ReasonCode::OpaqueExecution,
                Tier::High,
                None,
                format!("`{program}` is not bash, and its script goes beyond what every POSIX shell reads alike"),
            );
        }
        readable
    }

    pub(super) fn follow_script(&mut self, program: &str, script: &str, cwd: &Option<Rc<str>>, depth: usize) -> bool {
        let payload =
            paths::resolve(script, cwd.as_deref(), self.home).and_then(|resolved| self.written.get(&resolved).cloned());
        match payload {
            Some(payload) => {
                // Judged by the payload, and never vouched for: other writes in the line (`tee
                // -a`, `cp`) may change the file before it runs.
                if is_shell(program) {
                    self.follow_shell_text(program, &payload, depth);
                } else {
                    self.walk_source(&payload, depth + 1);
                }
                false
            }
            None => {
                self.finding(
                    ReasonCode::OpaqueExecution,
                    Tier::High,
                    None,
                    format!("`{program}` runs the script `{script}`, whose contents the gate cannot see"),
                );
                false
            }
        }
    }
}
