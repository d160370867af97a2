//! Option grammars for known-safe programs, and the command-line parser that reads a part's
//! words the way the program itself will.
//!
//! A known-safe program declares every option it accepts, in the notation of its own `--help`
//! (`"-o, --output=WRITE"`), and the role of every operand. The parser resolves words as GNU
//! getopt does: short clusters (`-nA3`), attached and separate values, `--name=value`, long
//! names by exact match (never an abbreviation), `--` ending the options,
//! and (for GNU programs) options anywhere among the operands. It decides nothing about paths:
//! it hands each value and operand back with its role, and the gate judges them.
//!
//! Hand-written, not `clap` or `getopts`: those parse a program's *own* command line and stop at
//! the first error, while here the grammar is data for hundreds of other programs, and every
//! word must come back with the role the real program gives it. Fails closed: an undeclared
//! option or an abbreviation, a missing value, a value given to a switch, or an operand the
//! grammar has no room for makes [`parse`] return [`Refusal`], and the part is not known-safe.
//! A declaration that cannot be read (an unknown placeholder, an option declared twice) is a
//! [`GrammarError`], and the grammar is not built.

use std::fmt;

use smallvec::SmallVec;

/// What a value or an operand is to the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A file or directory the program reads (judged by the path rules as a read). `-` is stdin.
    Read,
    /// A file or directory the program writes or creates (judged as a write).
    Write,
    /// Text with no effect beyond the output: a format, a name, printed words.
    Text,
    /// A number (`NUM`): like text, but an option's value must look like one (`5`, `+5`,
    /// `-10`, `1.5`, `10K`, `2,4`, `1-3`). A value that does not means the program reads the
    /// word differently from the declaration (GNU `diff --unified` takes a value only when
    /// attached, so `diff --unified ~/.ssh/id_rsa /dev/null` reads the key): refused.
    Number,
    /// A search pattern or filter: any value is harmless here.
    Pattern,
    /// A date in GNU's free-form syntax (`DATE`: `date -d`, `touch -d`, find's `-newermt`),
    /// printed or compared like text, except that gnulib's `parse_datetime` reads a leading
    /// `TZ="…"` and glibc then opens the file it names, absolute or climbing out of the zone
    /// directory (`date -d 'TZ="/dev/tty" now'` opens the person's terminal, and a FIFO hangs
    /// the call; red-team round 54, as the `TZ=` assignment in round 53). A value that
    /// mentions `TZ=` in any case is refused.
    Date,
    /// A script in the program's own language, vetted by the entry's script check (sed, jq, awk).
    Script,
    /// A path-shaped argument whose reading is incidental (`test -f PATH`): judged as a read
    /// when it looks like a path.
    MaybeRead,
}

impl Role {
    fn from_placeholder(text: &str) -> Option<Role> {
        Some(match text {
            "READ" | "FILE" | "DIR" => Role::Read,
            "WRITE" => Role::Write,
            "TEXT" => Role::Text,
            "NUM" => Role::Number,
            "PATTERN" => Role::Pattern,
            "DATE" => Role::Date,
            "SCRIPT" => Role::Script,
            "PATH" => Role::MaybeRead,
            _ => return None,
        })
    }
}

/// How an option takes its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arity {
    /// A switch: `-v`, `--verbose`.
    Flag,
    /// One or more values, each required: attached (`-ofile`, `--output=file`) or the next words.
    Required(Vec<Role>),
    /// A value only when attached (`--color=never`, `-I'%Y'`).
    Optional(Role),
}

/// One declared option: its short letter, its long name, or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionSpec {
    /// Short letters, aliases of one another (`-E, -r`).
    pub short: Vec<char>,
    /// Long names, aliases of one another (`--quiet, --silent`).
    pub long: Vec<String>,
    pub arity: Arity,
}

impl OptionSpec {
    /// The name shown in reasons: `--output` or `-o`.
    pub fn name(&self) -> String {
        match (self.long.first(), self.short.first()) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => String::new(),
        }
    }

    /// Whether `name` (a long name without dashes, or one letter) names this option.
    pub fn is(&self, name: &str) -> bool {
        let mut letters = name.chars();
        self.long.iter().any(|long| long == name)
            || matches!((letters.next(), letters.next()), (Some(letter), None) if self.short.contains(&letter))
    }
}

/// The operand grammar: fixed roles first, then any number of one role, then fixed roles last
/// (`cp`'s `READ... WRITE`, `grep`'s `PATTERN READ...`, `uniq`'s `READ? WRITE?`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Operands {
    pub leading: Vec<Role>,
    /// Leading roles that may be left out, counted from the end of `leading` (`READ? WRITE?`).
    pub optional_leading: usize,
    pub repeated: Option<Role>,
    pub trailing: Vec<Role>,
}

impl Operands {
    /// Parses `"PATTERN READ..."`, `"READ? WRITE?"`, `"READ... WRITE"`, `""`.
    pub fn parse(text: &str) -> Result<Operands, GrammarError> {
        let mut operands = Operands::default();
        for token in text.split_whitespace() {
            if let Some(base) = token.strip_suffix("...") {
                let role = Role::from_placeholder(base).ok_or_else(|| unknown_role(token))?;
                if operands.repeated.is_some() {
                    return Err(GrammarError::TwoRepeated { operands: text.to_owned() });
                }
                operands.repeated = Some(role);
            } else if let Some(base) = token.strip_suffix('?') {
                let role = Role::from_placeholder(base).ok_or_else(|| unknown_role(token))?;
                if operands.repeated.is_some() || !operands.trailing.is_empty() {
                    return Err(GrammarError::OptionalAfterRepeated { operands: text.to_owned() });
                }
                operands.leading.push(role);
                operands.optional_leading += 1;
            } else {
                let role = Role::from_placeholder(token).ok_or_else(|| unknown_role(token))?;
                if operands.repeated.is_some() {
                    operands.trailing.push(role);
                } else if operands.optional_leading > 0 {
                    return Err(GrammarError::RequiredAfterOptional { operands: text.to_owned() });
                } else {
                    operands.leading.push(role);
                }
            }
        }
        Ok(operands)
    }

    /// The role of each of `count` operands, or `None` when the grammar has no room for them.
    pub fn assign(&self, count: usize) -> Option<Vec<Role>> {
        self.roles(count).map(Iterator::collect)
    }

    /// [`Self::assign`] without collecting: the roles in order.
    pub fn roles(&self, count: usize) -> Option<impl Iterator<Item = Role> + '_> {
        let required = self.leading.len() - self.optional_leading + self.trailing.len();
        let fixed = self.leading.len() + self.trailing.len();
        if count < required || (self.repeated.is_none() && count > fixed) {
            return None;
        }
        // Optional leading operands are filled first, then the trailing ones, then the repeat.
        let leading = self.leading.len().min(count.saturating_sub(self.trailing.len()));
        let middle = count - leading - self.trailing.len().min(count - leading);
        let repeated = if self.repeated.is_some() { middle } else { 0 };
        Some(
            self.leading[..leading]
                .iter()
                .copied()
                .chain(self.repeated.into_iter().flat_map(move |role| std::iter::repeat_n(role, middle)))
                .chain(self.trailing[..count - leading - repeated].iter().copied()),
        )
    }

    /// Whether operand `index` of `count` sits in the repeated section, where one word expanding
    /// to several (a glob) cannot move any other operand into a different role.
    pub fn in_repeated_section(&self, index: usize, count: usize) -> bool {
        self.repeated.is_some() && index >= self.leading.len() && index + self.trailing.len() < count
    }
}

/// How a program reads its command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// GNU getopt_long: options anywhere (permutation). Long names are matched exactly (see
    /// [`Grammar::find_long`]).
    Gnu,
    /// Options end at the first operand (POSIX getopt, wrappers such as `env` and `time`).
    Posix,
    /// No options at all: every word is an operand (`echo`, `test`).
    NoOptions,
}

/// A declared grammar: options plus operands, with alternatives when an option changes the
/// operands (`grep -e P` takes no pattern operand; `cp -t DIR` takes only sources).
#[derive(Clone, Debug)]
pub struct Grammar {
    pub style: Style,
    pub options: Vec<OptionSpec>,
    pub operands: Operands,
    /// `(option, operands)`: when the option is given, its operand grammar replaces the default.
    pub alternatives: Vec<(String, Operands)>,
    /// `head -20`: a dash and digits is an option with a number.
    pub numeric_option: bool,
    /// The program's own parser (not getopt) takes each clustered option's value from the words
    /// after the cluster, in order: `tree -Po X F` is `-P X -o F`.
    pub cluster_values_follow: bool,
}

/// Why a command line is not known-safe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Undeclared(String),
    MissingValue(String),
    UnexpectedValue(String),
    NotANumber(String, String),
    ZoneInDate(String, String),
    Operands(usize),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Undeclared(option) => write!(f, "the option `{option}`, which is not declared for it"),
            Refusal::MissingValue(option) => write!(f, "the option `{option}` without its value"),
            Refusal::UnexpectedValue(option) => write!(f, "the switch `{option}` with a value"),
            Refusal::NotANumber(option, value) => {
                write!(f, "the option `{option}` with `{value}`, which is not a number")
            }
            Refusal::ZoneInDate(option, value) => {
                write!(f, "the option `{option}` with the date `{value}`, whose `TZ=` makes the program open a file")
            }
            Refusal::Operands(count) => write!(f, "{count} operands, which its grammar does not accept"),
        }
    }
}

/// Why a declared grammar cannot be built: the declaration itself is wrong, never a command line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    #[error("unknown operand role `{token}`")]
    UnknownRole { token: String },
    #[error("two repeated operands in `{operands}`")]
    TwoRepeated { operands: String },
    #[error("an optional operand after a repeated one in `{operands}`")]
    OptionalAfterRepeated { operands: String },
    #[error("a required operand after an optional one in `{operands}`")]
    RequiredAfterOptional { operands: String },
    #[error("option `{name}` is declared twice")]
    DeclaredTwice { name: String },
    #[error("the override `{line}` names no declared option")]
    OverrideNamesNothing { line: String },
    #[error("cannot read the long option `{token}` in `{line}`")]
    LongOption { token: String, line: String },
    #[error("a short option is one letter: `{token}` in `{line}`")]
    ShortOption { token: String, line: String },
    #[error("cannot read `{token}` in option line `{line}`")]
    Unreadable { token: String, line: String },
    #[error("an optional value cannot be followed by more in `{line}`")]
    ValueAfterOptional { line: String },
    #[error("no option name in `{line}`")]
    NoName { line: String },
}

/// Where a word sits in the parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The word is (or starts) an option.
    Option { option: usize },
    /// `head -20`: a dash and digits.
    NumericOption,
    /// The word is wholly the value of the option before it.
    Value { option: usize, role: Role },
    /// The word is an operand.
    Operand { role: Role, index: usize },
    /// `--`.
    EndOfOptions,
}

/// One option as given: the declared option, and its values with their roles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenOption {
    pub option: usize,
    /// The word that holds the option.
    pub word: usize,
    pub values: Vec<(String, Role)>,
    /// The value is attached to the option's own word (`-ofile`, `--output=file`).
    pub attached: bool,
}

/// A parsed command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub options: Vec<GivenOption>,
    /// `(word index, role)` for each operand, in order.
    pub operands: Vec<(usize, Role)>,
    /// What each word is, by index.
    pub slots: Vec<Option<Slot>>,
    /// The operand grammar that applied (for glob placement).
    pub grammar_operands: Operands,
}

impl Parsed {
    /// Whether any value or operand has the `WRITE` role (the command writes a named path).
    pub fn writes(&self) -> bool {
        self.options.iter().flat_map(|given| &given.values).any(|(_, role)| *role == Role::Write)
            || self.operands.iter().any(|(_, role)| *role == Role::Write)
    }

    /// Whether the option whose long name (or letter) is `name` was given.
    pub fn has(&self, grammar: &Grammar, name: &str) -> bool {
        self.options.iter().any(|given| grammar.options[given.option].is(name))
    }
}

impl Grammar {
    /// Builds a grammar from `--help`-style lines: `"-n, --lines=NUM"`, `"--color[=TEXT]"`,
    /// `"-e, --regexp=PATTERN"`, `"--arg TEXT TEXT"`, `"-v"`.
    pub fn new(style: Style, options: &[&str], operands: &str) -> Result<Grammar, GrammarError> {
        let mut parsed = Vec::with_capacity(options.len());
        for line in options {
            parsed.push(parse_option_line(line)?);
        }
        for (index, option) in parsed.iter().enumerate() {
            let duplicate = parsed[..index].iter().any(|earlier| {
                option.short.iter().any(|letter| earlier.short.contains(letter))
                    || option.long.iter().any(|long| earlier.long.contains(long))
            });
            if duplicate {
                return Err(GrammarError::DeclaredTwice { name: option.name() });
            }
        }
        Ok(Grammar {
            style,
            options: parsed,
            operands: Operands::parse(operands)?,
            alternatives: Vec::new(),
            numeric_option: false,
            cluster_values_follow: false,
        })
    }

    /// The same grammar as another implementation of the program reads it (macOS's BSD `sed`
    /// for GNU `sed`): `overrides` are option lines that take over every short letter and long
    /// name they declare from the lines here, and a line marked `!` (`"!-l"`) takes its names
    /// away, so that reading refuses them. Every override must name an option declared here:
    /// a command line the first grammar refuses is refused whatever the other reads.
    pub fn with_overrides(&self, style: Style, overrides: &[&str]) -> Result<Grammar, GrammarError> {
        let mut grammar = self.clone();
        grammar.style = style;
        for line in overrides {
            let (refused, text) = match line.strip_prefix('!') {
                Some(text) => (true, text),
                None => (false, *line),
            };
            let spec = parse_option_line(text)?;
            let overlaps = |option: &OptionSpec| {
                option.short.iter().any(|letter| spec.short.contains(letter))
                    || option.long.iter().any(|long| spec.long.contains(long))
            };
            if !grammar.options.iter().any(overlaps) {
                return Err(GrammarError::OverrideNamesNothing { line: (*line).to_owned() });
            }
            // Only the names taken over leave a line (`-p, --prefix=TEXT` keeps `--prefix`
            // when the override is `-p`); a line left without names is dropped.
            for option in &mut grammar.options {
                option.short.retain(|letter| !spec.short.contains(letter));
                option.long.retain(|long| !spec.long.contains(long));
            }
            grammar.options.retain(|option| !option.short.is_empty() || !option.long.is_empty());
            if !refused {
                grammar.options.push(spec);
            }
        }
        // An alternative keyed on a name the other reading lacks no longer applies there.
        let options = &grammar.options;
        grammar.alternatives.retain(|(name, _)| options.iter().any(|option| option.is(name)));
        Ok(grammar)
    }

    fn find_short(&self, letter: char) -> Option<usize> {
        self.options.iter().position(|option| option.short.contains(&letter))
    }

    /// Resolves a long name by exact match only. GNU getopt_long also takes a unique prefix,
    /// but unique among the program's *own* options: GNU cp reads `--a` as ambiguous, busybox
    /// cp as `--archive`, and neither as the one declared `--attributes-only`. Spelled in full,
    /// a name means one option everywhere (red-team round 38).
    fn find_long(&self, name: &str) -> Result<usize, Refusal> {
        self.options
            .iter()
            .position(|option| option.long.iter().any(|long| long == name))
            .ok_or_else(|| Refusal::Undeclared(format!("--{name}")))
    }

    /// Parses `words` (the arguments after the program name).
    pub fn parse(&self, words: &[String]) -> Result<Parsed, Refusal> {
        let mut parsed = Parsed { slots: vec![None; words.len()], ..Parsed::default() };
        // Inline: commands name a few operands.
        let mut operand_words: SmallVec<[usize; 8]> = SmallVec::new();
        let mut options_ended = self.style == Style::NoOptions;
        let mut index = 0;
        while index < words.len() {
            let word = &words[index];
            if options_ended || word == "-" || !word.starts_with('-') {
                operand_words.push(index);
                if self.style == Style::Posix {
                    options_ended = true;
                }
                index += 1;
                continue;
            }
            if word == "--" {
                parsed.slots[index] = Some(Slot::EndOfOptions);
                options_ended = true;
                index += 1;
                continue;
            }
            if let Some(long) = word.strip_prefix("--") {
                let (name, attached) = match long.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (long, None),
                };
                let option = self.find_long(name)?;
                parsed.slots[index] = Some(Slot::Option { option });
                index = self.take_values(option, attached, words, index, &mut parsed)?;
                continue;
            }
            let cluster = &word[1..];
            if self.numeric_option && cluster.chars().all(|c| c.is_ascii_digit()) {
                parsed.slots[index] = Some(Slot::NumericOption);
                index += 1;
                continue;
            }
            let mut next = index + 1;
            for (offset, letter) in cluster.char_indices() {
                let option = self.find_short(letter).ok_or_else(|| Refusal::Undeclared(format!("-{letter}")))?;
                if parsed.slots[index].is_none() {
                    parsed.slots[index] = Some(Slot::Option { option });
                }
                if self.options[option].arity == Arity::Flag {
                    parsed.options.push(GivenOption { option, word: index, values: Vec::new(), attached: false });
                    continue;
                }
                if self.cluster_values_follow {
                    // The value is the next unused word; the cluster goes on.
                    next = self.take_values(option, None, words, next - 1, &mut parsed)?;
                    continue;
                }
                let rest = &cluster[offset + letter.len_utf8()..];
                let attached = (!rest.is_empty()).then_some(rest);
                next = self.take_values(option, attached, words, index, &mut parsed)?;
                break;
            }
            index = next;
        }
        let grammar = self
            .alternatives
            .iter()
            .find(|(name, _)| parsed.has(self, name))
            .map(|(_, operands)| operands)
            .unwrap_or(&self.operands);
        let roles = grammar.roles(operand_words.len()).ok_or(Refusal::Operands(operand_words.len()))?;
        parsed.operands.reserve_exact(operand_words.len());
        for (position, (word, role)) in operand_words.into_iter().zip(roles).enumerate() {
            parsed.slots[word] = Some(Slot::Operand { role, index: position });
            parsed.operands.push((word, role));
        }
        parsed.grammar_operands = grammar.clone();
        Ok(parsed)
    }

    /// Records option `option` given at `words[index]` with its values; returns the next index.
    fn take_values(
        &self,
        option: usize,
        attached: Option<&str>,
        words: &[String],
        index: usize,
        parsed: &mut Parsed,
    ) -> Result<usize, Refusal> {
        let spec = &self.options[option];
        let mut given = GivenOption { option, word: index, values: Vec::new(), attached: attached.is_some() };
        let mut next = index + 1;
        match &spec.arity {
            Arity::Flag => {
                if attached.is_some() {
                    return Err(Refusal::UnexpectedValue(spec.name()));
                }
            }
            Arity::Optional(role) => {
                if let Some(value) = attached {
                    given.values.push((value.to_owned(), *role));
                }
            }
            Arity::Required(roles) => {
                let mut roles = roles.iter();
                if let Some(value) = attached
                    && let Some(role) = roles.next()
                {
                    given.values.push((value.to_owned(), *role));
                }
                for role in roles {
                    let value = words.get(next).ok_or_else(|| Refusal::MissingValue(spec.name()))?;
                    parsed.slots[next] = Some(Slot::Value { option, role: *role });
                    given.values.push((value.clone(), *role));
                    next += 1;
                }
            }
        }
        if let Some(refusal) = given.values.iter().find_map(|(value, role)| value_refusal(value, *role, || spec.name()))
        {
            return Err(refusal);
        }
        parsed.options.push(given);
        Ok(next)
    }
}

/// Why an option's value cannot take its declared role, if it cannot: a number that does not
/// look like one, or a date that names a zone file. `option` names the option, only when
/// needed. Grammars and find's hand-written expression parser both ask here.
pub fn value_refusal(value: &str, role: Role, option: impl FnOnce() -> String) -> Option<Refusal> {
    match role {
        Role::Number if !looks_numeric(value) => Some(Refusal::NotANumber(option(), value.to_owned())),
        Role::Date if names_a_zone(value) => Some(Refusal::ZoneInDate(option(), value.to_owned())),
        _ => None,
    }
}

/// Whether a date value carries a time zone rule (`TZ="…"`), which gnulib's date parser hands
/// to glibc, which opens the zone file it names. Any case and any quoting, so the test is wider
/// than the parser's own `TZ="`.
fn names_a_zone(value: &str) -> bool {
    value.as_bytes().windows(3).any(|window| window.eq_ignore_ascii_case(b"tz="))
}

/// A number as options take them: an optional sign, digits, then digits, `.`, `,`, `-`, `:`
/// and unit letters, with no letter right after a `.` (so never a file name with an
/// extension, such as `1.pem`).
fn looks_numeric(value: &str) -> bool {
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    let bytes = digits.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_digit)
        && bytes.iter().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b',' | b'-' | b':'))
        && !bytes.windows(2).any(|pair| pair[0] == b'.' && pair[1].is_ascii_alphabetic())
        && bytes.len() <= 24
}

/// Parses one option line: `"-o, --output=WRITE"`, `"--color[=TEXT]"`, `"-n NUM"`, `"-I[TEXT]"`,
/// `"--arg TEXT TEXT"`.
pub fn parse_option_line(line: &str) -> Result<OptionSpec, GrammarError> {
    let mut short = Vec::new();
    let mut long = Vec::new();
    let mut arity = Arity::Flag;
    let mut rest_roles: Vec<Role> = Vec::new();
    for token in line.split([',', ' ']).filter(|token| !token.is_empty()) {
        let (head, value) = split_value(token);
        if let Some(name) = head.strip_prefix("--") {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(GrammarError::LongOption { token: token.to_owned(), line: line.to_owned() });
            }
            long.push(name.to_owned());
        } else if let Some(letter) = head.strip_prefix('-') {
            let mut chars = letter.chars();
            match (chars.next(), chars.next()) {
                (Some(letter), None) => short.push(letter),
                _ => return Err(GrammarError::ShortOption { token: token.to_owned(), line: line.to_owned() }),
            }
        } else if let Some(role) = Role::from_placeholder(head) {
            rest_roles.push(role);
            continue;
        } else {
            return Err(GrammarError::Unreadable { token: token.to_owned(), line: line.to_owned() });
        }
        match value {
            ValueForm::None => {}
            ValueForm::Required(role) => arity = Arity::Required(vec![role]),
            ValueForm::Optional(role) => arity = Arity::Optional(role),
        }
    }
    if !rest_roles.is_empty() {
        arity = match arity {
            Arity::Flag => Arity::Required(rest_roles),
            Arity::Required(mut roles) => {
                roles.extend(rest_roles);
                Arity::Required(roles)
            }
            Arity::Optional(_) => return Err(GrammarError::ValueAfterOptional { line: line.to_owned() }),
        };
    }
    if short.is_empty() && long.is_empty() {
        return Err(GrammarError::NoName { line: line.to_owned() });
    }
    Ok(OptionSpec { short, long, arity })
}

fn unknown_role(token: &str) -> GrammarError {
    GrammarError::UnknownRole { token: token.to_owned() }
}

enum ValueForm {
    None,
    Required(Role),
    Optional(Role),
}

fn split_value(token: &str) -> (&str, ValueForm) {
    if let Some((head, value)) = token.split_once("[=").or_else(|| token.split_once('['))
        && let Some(value) = value.strip_suffix(']')
        && let Some(role) = Role::from_placeholder(value)
    {
        return (head, ValueForm::Optional(role));
    }
    if let Some((head, value)) = token.split_once('=')
        && let Some(role) = Role::from_placeholder(value)
    {
        return (head, ValueForm::Required(role));
    }
    (token, ValueForm::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    fn sort() -> Grammar {
        Grammar::new(
            Style::Gnu,
            &["-o, --output=WRITE", "-r, --reverse", "-n, --numeric-sort", "-k, --key=TEXT", "--debug"],
            "READ...",
        )
        .unwrap()
    }

    #[test]
    fn long_options_resolve_like_getopt() {
        let grammar = sort();
        let parsed = grammar.parse(&words("--output=x a")).unwrap();
        assert_eq!(parsed.options[0].values, vec![("x".to_owned(), Role::Write)]);
        let parsed = grammar.parse(&words("--output x a")).unwrap();
        assert_eq!(parsed.options[0].values, vec![("x".to_owned(), Role::Write)]);
        assert_eq!(grammar.parse(&words("--outp x")), Err(Refusal::Undeclared("--outp".into())));
        assert_eq!(
            grammar.parse(&words("--compress-program=sh")),
            Err(Refusal::Undeclared("--compress-program".into()))
        );
        assert_eq!(grammar.parse(&words("--reverse=1")), Err(Refusal::UnexpectedValue("--reverse".into())));
        assert_eq!(grammar.parse(&words("--output")), Err(Refusal::MissingValue("--output".into())));
    }

    #[test]
    fn long_names_are_matched_exactly() {
        let grammar = Grammar::new(Style::Gnu, &["--debug", "--attributes-only"], "READ...").unwrap();
        assert!(grammar.parse(&words("--debug")).is_ok());
        // busybox cp reads these as `--dereference` and `--archive`.
        assert_eq!(grammar.parse(&words("--de")), Err(Refusal::Undeclared("--de".into())));
        assert_eq!(grammar.parse(&words("--a")), Err(Refusal::Undeclared("--a".into())));
    }

    #[test]
    fn short_clusters_and_attached_values() {
        let grammar = sort();
        let parsed = grammar.parse(&words("-rno/tmp/x a b")).unwrap();
        assert_eq!(parsed.options.len(), 3);
        assert_eq!(parsed.options[2].values, vec![("/tmp/x".to_owned(), Role::Write)]);
        assert_eq!(parsed.operands.len(), 2);
        let parsed = grammar.parse(&words("a -o out -- -r")).unwrap();
        assert_eq!(parsed.operands.iter().map(|(word, _)| *word).collect::<Vec<_>>(), vec![0, 4]);
        assert_eq!(grammar.parse(&words("-x")), Err(Refusal::Undeclared("-x".into())));
    }

    #[test]
    fn operand_grammars() {
        let uniq = Operands::parse("READ? WRITE?").unwrap();
        assert_eq!(uniq.assign(0), Some(vec![]));
        assert_eq!(uniq.assign(1), Some(vec![Role::Read]));
        assert_eq!(uniq.assign(2), Some(vec![Role::Read, Role::Write]));
        assert_eq!(uniq.assign(3), None);
        let cp = Operands::parse("READ... WRITE").unwrap();
        assert_eq!(cp.assign(3), Some(vec![Role::Read, Role::Read, Role::Write]));
        assert_eq!(cp.assign(0), None);
        assert!(cp.in_repeated_section(1, 3));
        assert!(!cp.in_repeated_section(2, 3));
        let grep = Operands::parse("PATTERN READ...").unwrap();
        assert_eq!(grep.assign(1), Some(vec![Role::Pattern]));
        assert_eq!(grep.assign(0), None);
        assert!(!grep.in_repeated_section(0, 2));
        assert!(grep.in_repeated_section(1, 2));
    }

    #[test]
    fn clusters_can_take_values_from_the_following_words() {
        let mut grammar = Grammar::new(Style::Gnu, &["-P PATTERN", "-o WRITE", "-i"], "READ...").unwrap();
        grammar.cluster_values_follow = true;
        let parsed = grammar.parse(&words("-iPo x out dir")).unwrap();
        assert_eq!(parsed.options[1].values, vec![("x".to_owned(), Role::Pattern)]);
        assert_eq!(parsed.options[2].values, vec![("out".to_owned(), Role::Write)]);
        assert_eq!(parsed.operands, vec![(3, Role::Read)]);
    }

    #[test]
    fn posix_style_stops_at_the_first_operand() {
        let grammar = Grammar::new(Style::Posix, &["-n NUM"], "TEXT...").unwrap();
        let parsed = grammar.parse(&words("-n 5 ls -la")).unwrap();
        assert_eq!(parsed.operands.len(), 2);
    }

    #[test]
    fn option_lines() {
        let option = parse_option_line("--arg TEXT TEXT").unwrap();
        assert_eq!(option.arity, Arity::Required(vec![Role::Text, Role::Text]));
        let option = parse_option_line("--color[=TEXT]").unwrap();
        assert_eq!(option.arity, Arity::Optional(Role::Text));
        let option = parse_option_line("-A, --after-context=NUM").unwrap();
        assert_eq!((option.short, option.long.clone()), (vec!['A'], vec!["after-context".to_owned()]));
        let option = parse_option_line("-q, --quiet, --silent").unwrap();
        assert_eq!(option.long, vec!["quiet".to_owned(), "silent".to_owned()]);
        assert!(parse_option_line("--x=BOGUS").is_err());
        assert!(parse_option_line("-ab").is_err());
    }

    #[test]
    fn declaration_errors_quote_the_declaration() {
        let message = |result: Result<OptionSpec, GrammarError>| result.unwrap_err().to_string();
        assert_eq!(message(parse_option_line("-ab")), "a short option is one letter: `-ab` in `-ab`");
        assert_eq!(message(parse_option_line("--a_b")), "cannot read the long option `--a_b` in `--a_b`");
        assert_eq!(message(parse_option_line("-o, x")), "cannot read `x` in option line `-o, x`");
        assert_eq!(
            message(parse_option_line("--c[=TEXT] TEXT")),
            "an optional value cannot be followed by more in `--c[=TEXT] TEXT`"
        );
        assert_eq!(message(parse_option_line("TEXT")), "no option name in `TEXT`");
        let message = |result: Result<Operands, GrammarError>| result.unwrap_err().to_string();
        assert_eq!(message(Operands::parse("READ BOGUS...")), "unknown operand role `BOGUS...`");
        assert_eq!(message(Operands::parse("READ... TEXT...")), "two repeated operands in `READ... TEXT...`");
        assert_eq!(
            message(Operands::parse("READ... WRITE?")),
            "an optional operand after a repeated one in `READ... WRITE?`"
        );
        assert_eq!(
            message(Operands::parse("READ? WRITE")),
            "a required operand after an optional one in `READ? WRITE`"
        );
        let message = |result: Result<Grammar, GrammarError>| result.unwrap_err().to_string();
        assert_eq!(
            message(Grammar::new(Style::Gnu, &["-n", "-n, --lines=NUM"], "")),
            "option `--lines` is declared twice"
        );
        assert_eq!(message(sort().with_overrides(Style::Posix, &["-z"])), "the override `-z` names no declared option");
    }
}
