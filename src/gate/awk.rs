//! awk programs the gate can vouch for: a small allowlisted subset of the language that only
//! selects, counts and prints fields of the input it was given.
//!
//! Decides whether one awk program text is in the subset. It never judges the files awk reads
//! (the `safe.awk` entry hands those to the path rules) and never guesses: any character,
//! token or construct outside the subset makes the program unknown, so the part is not
//! known-safe (fail closed).
//!
//! What the subset leaves out, and why:
//! - every way awk reaches outside its input: `system()`, pipes (`|`, `|&`), redirections of
//!   `print` (`>`, `>>`, `|`), `getline`, `close`, `printf`, and gawk's `@load`/`@include`
//!   and indirect calls (`@f()`);
//! - the environment and the process: `ENVIRON`, `PROCINFO`, `SYMTAB`, and any other
//!   upper-case name except the record counters and separators;
//! - user functions, arrays, loops, and plain `=` assignment (a string built up record by
//!   record, `s = s s`, grows without bound); numeric `+=`, `-=`, `++` and `--` remain;
//! - division: whether `/` divides or opens a regular expression depends on the lexer's state,
//!   and awks differ, so a `/` is accepted only where every awk reads a regex literal;
//! - comments, line continuations, `?:`, non-ASCII text (a Big5 or GBK locale reads the byte
//!   after a non-ASCII one as part of the character) and anything else not listed here.
//!
//! Hand-written: no crate parses awk, and the question is not "is this valid awk" but "is
//! every token one this subset allows", which a token scan answers exactly.

/// Upper-case names the subset reads: record and field counters and separators.
const SPECIAL_VARIABLES: [&str; 8] = ["NR", "NF", "FNR", "FS", "OFS", "RS", "ORS", "SUBSEP"];

/// Pure built-in functions (no I/O, no state, output bounded by the input).
const PURE_FUNCTIONS: [&str; 6] = ["length", "substr", "tolower", "toupper", "index", "int"];

/// Keywords and built-in function names of POSIX awk, gawk, mawk and BusyBox awk. A lower-case
/// name outside this list is a user variable; one inside it is allowed only if it is one of
/// the few keywords or [`PURE_FUNCTIONS`] the subset uses.
const RESERVED: [&str; 62] = [
    "BEGIN",
    "END",
    "BEGINFILE",
    "ENDFILE",
    "function",
    "func",
    "if",
    "else",
    "while",
    "for",
    "do",
    "break",
    "continue",
    "next",
    "nextfile",
    "exit",
    "return",
    "delete",
    "in",
    "getline",
    "print",
    "printf",
    "system",
    "close",
    "fflush",
    "length",
    "substr",
    "index",
    "split",
    "sub",
    "gsub",
    "match",
    "sprintf",
    "sin",
    "cos",
    "atan2",
    "exp",
    "log",
    "sqrt",
    "int",
    "rand",
    "srand",
    "tolower",
    "toupper",
    "gensub",
    "patsplit",
    "asort",
    "asorti",
    "strftime",
    "systime",
    "mktime",
    "and",
    "or",
    "xor",
    "compl",
    "lshift",
    "rshift",
    "strtonum",
    "isarray",
    "typeof",
    "bindtextdomain",
    "dcgettext",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Token<'a> {
    Word(&'a str),
    Number,
    String,
    Regex,
    Operator(&'a str),
    /// `;`, a newline, `{` or `}`: a statement boundary.
    Boundary(char),
}

/// Whether `program` is in the subset described in the module header.
pub fn program_is_safe(program: &str) -> bool {
    // Under a Big5 or GBK locale gawk reads a byte after a non-ASCII one as part of the same
    // character (`"中\"` ends the string, `[中]` leaves the bracket open): ASCII only.
    if !program.is_ascii() {
        return false;
    }
    let Some(tokens) = tokenize(program) else { return false };
    tokens_are_safe(&tokens)
}

fn tokenize(program: &str) -> Option<Vec<Token<'_>>> {
    let bytes = program.as_bytes();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let start = index;
        match byte {
            b' ' | b'\t' => index += 1,
            b'\n' | b';' | b'{' | b'}' => {
                tokens.push(Token::Boundary(byte as char));
                index += 1;
            }
            b'"' => {
                index += 1;
                loop {
                    match bytes.get(index)? {
                        b'\\' => index = after_escape(bytes, index)?,
                        b'"' => break,
                        b'\n' | b'\r' => return None,
                        _ => index += 1,
                    }
                }
                index += 1;
                tokens.push(Token::String);
            }
            b'/' => {
                // A regex literal only where an operand is expected; elsewhere `/` divides,
                // which the subset leaves out.
                if !expects_operand(tokens.last()) {
                    return None;
                }
                index += 1;
                loop {
                    match bytes.get(index)? {
                        b'\\' => {
                            index = after_escape(bytes, index)?;
                            continue;
                        }
                        b'\n' | b'\r' => return None,
                        b'/' => break,
                        // A bracket expression is where awks and POSIX disagree with a naive
                        // scan (`[]…]` and `[^]…]` hold a `]`, `[:…:]` nests, `/` may or may
                        // not end the literal inside): only plain ones are read.
                        b'[' => {
                            index = after_plain_bracket(bytes, index)?;
                            continue;
                        }
                        _ => {}
                    }
                    index += 1;
                }
                index += 1;
                tokens.push(Token::Regex);
            }
            b'0'..=b'9' | b'.' => {
                while index < bytes.len() && (bytes[index].is_ascii_digit() || bytes[index] == b'.') {
                    index += 1;
                }
                tokens.push(Token::Number);
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                while index < bytes.len() && (bytes[index].is_ascii_alphanumeric() || bytes[index] == b'_') {
                    index += 1;
                }
                tokens.push(Token::Word(&program[start..index]));
            }
            _ => {
                let operator = [
                    "&&", "||", "==", "!=", "<=", ">=", "!~", "++", "--", "+=", "-=", "$", "(", ")", ",", "+", "-",
                    "*", "%", "!", "~", "<", ">",
                ]
                .into_iter()
                .find(|operator| program[index..].starts_with(operator))?;
                index += operator.len();
                tokens.push(Token::Operator(operator));
            }
        }
    }
    Some(tokens)
}

/// The index after the escape that starts at `bytes[at]` (a backslash). An escaped newline
/// continues the string or regex in some awks and not others: `None`, refused.
fn after_escape(bytes: &[u8], at: usize) -> Option<usize> {
    if matches!(bytes.get(at + 1)?, b'\n' | b'\r') {
        return None;
    }
    Some(at + 2)
}

/// The index after a plain bracket expression starting at `bytes[at]` (a `[`): an optional
/// `^`, then at least one letter, digit, blank, `_`, `-` or `.`, then `]`. Anything else
/// (a leading `]`, a nested `[`, a `/`, a backslash) is `None`, refused.
fn after_plain_bracket(bytes: &[u8], at: usize) -> Option<usize> {
    let mut index = at + 1;
    if bytes.get(index) == Some(&b'^') {
        index += 1;
    }
    let start = index;
    while bytes.get(index).is_some_and(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b' ' | b'_' | b'-' | b'.'))
    {
        index += 1;
    }
    (index > start && bytes.get(index) == Some(&b']')).then_some(index + 1)
}

/// Whether the lexer, after `previous`, reads `/` as the start of a regex literal. After an
/// operand (a name, a number, a string, `)`, a postfix `++`) every awk reads division.
fn expects_operand(previous: Option<&Token<'_>>) -> bool {
    match previous {
        None | Some(Token::Boundary(_)) => true,
        Some(Token::Operator(operator)) => !matches!(*operator, ")" | "++" | "--" | "$"),
        Some(Token::Word(word)) => *word == "print",
        Some(Token::Number | Token::String | Token::Regex) => false,
    }
}

fn tokens_are_safe(tokens: &[Token<'_>]) -> bool {
    let mut in_print = false;
    let mut depth = 0usize;
    for (index, token) in tokens.iter().enumerate() {
        let next = tokens.get(index + 1);
        match *token {
            // awk reads on past a newline after `,`, `&&`, `||` (and gawk after `?` and `:`):
            // the statement goes on, so `print A,⏎B > "FILE"` redirects (red-team round 42).
            Token::Boundary('\n')
                if index >= 1 && matches!(tokens[index - 1], Token::Operator("," | "&&" | "||" | "?" | ":")) =>
            {
                return false;
            }
            Token::Boundary(_) => {
                if depth != 0 {
                    return false;
                }
                in_print = false;
            }
            Token::Number | Token::String | Token::Regex => {}
            Token::Word(word) => {
                let called = next == Some(&Token::Operator("("));
                if PURE_FUNCTIONS.contains(&word) {
                    // `length` may stand alone (the length of `$0`); the others need arguments.
                    if !called && word != "length" {
                        return false;
                    }
                } else if word == "print" {
                    in_print = true;
                } else if called || !(matches!(word, "BEGIN" | "END" | "next") || is_plain_variable(word)) {
                    // A call of anything but a pure function, or a keyword or built-in outside
                    // the subset.
                    return false;
                }
            }
            Token::Operator(operator) => match operator {
                "(" => depth += 1,
                ")" => match depth.checked_sub(1) {
                    Some(outer) => depth = outer,
                    None => return false,
                },
                // In a print statement, outside parentheses, these redirect the output.
                "<" | ">" | "<=" | ">=" if in_print && depth == 0 => return false,
                // Only a counter statement (`n++`, `total += $2`) on a user variable: never a
                // field or `NF`, whose growth rebuilds the record with millions of fields.
                "++" | "--" => {
                    let after_variable = index >= 1 && is_counter_statement_start(tokens, index - 1);
                    if !after_variable || !matches!(next, None | Some(Token::Boundary(_))) {
                        return false;
                    }
                }
                "+=" | "-=" if !(index >= 1 && is_counter_statement_start(tokens, index - 1)) => return false,
                _ => {}
            },
        }
    }
    depth == 0
}

/// A name awk reads as a variable the subset may use: a record counter or separator, or a
/// lower-case user variable that is no keyword or built-in function.
fn is_plain_variable(word: &str) -> bool {
    SPECIAL_VARIABLES.contains(&word)
        || (!RESERVED.contains(&word) && !word.bytes().any(|byte| byte.is_ascii_uppercase()))
}

/// Whether `tokens[at]` is a lower-case user variable that starts a statement.
fn is_counter_statement_start(tokens: &[Token<'_>], at: usize) -> bool {
    let Token::Word(word) = tokens[at] else { return false };
    let starts_statement = at == 0 || matches!(tokens[at - 1], Token::Boundary(_));
    starts_statement && !RESERVED.contains(&word) && !word.bytes().any(|byte| byte.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::program_is_safe;

    #[test]
    fn programs_in_the_subset() {
        for program in [
            "{print $2}",
            "{ print $1, $3 }",
            "NR>1",
            "NR > 1 { print $0 }",
            "/error/ {print $2}",
            "$3 > 100 { print $1, $3 }",
            "{s+=$1} END {print s}",
            "{ total += $2; n++ } END { print total, n }",
            "length > 80",
            "{print length($0), NR}",
            "{print NF}",
            "{print $(NF-1)}",
            "$1 ~ /^a/ && $2 !~ /b/",
            "/^[0-9]+ [a-zA-Z_.-]/ {print $1}",
            "$2 ~ /[^ ]/",
            "{print tolower($1)}",
            "{print substr($0, 1, 80)}",
            "NR==5",
            "{print ($1 > 3)}",
            "BEGIN {print \"name\"} {print $1}",
            "{print \"a\\\"b\"}",
            "",
        ] {
            assert!(program_is_safe(program), "{program}");
        }
    }

    #[test]
    fn programs_outside_the_subset() {
        for program in [
            "BEGIN{system(\"id\")}",
            "BEGIN { system (\"id\") }",
            "{print | \"sh\"}",
            "{print > \"/home/dev/.bashrc\"}",
            "{print >> \"x\"}",
            "{print $1 > \"x\"}",
            "{print $1 >= \"x\"}",
            "BEGIN{\"id\" | getline x; print x}",
            "BEGIN{getline line < \"/etc/passwd\"; print line}",
            "{getline}",
            "BEGIN{print ENVIRON[\"AWS_SECRET_ACCESS_KEY\"]}",
            "BEGIN{print PROCINFO[\"pid\"]}",
            "@load \"filefuncs\"",
            "@include \"x.awk\"",
            "BEGIN{f=\"system\"; @f(\"id\")}",
            "function f(){} {f()}",
            "{printf \"%s\", $1}",
            "{s = s $0}",
            "{a[$1]++}",
            "{print $1 / 2}",
            "{x = 1 / 2 / system(\"id\")}",
            "$1 /x/ 2",
            "/[/]/ {print}",
            "{print} # comment",
            "{print \\\n $1}",
            "BEGIN{print \"x\",\n\"\" >> \"/home/dev/.bashrc\"}",
            "{print $0,\n\"\" > \".claude/settings.json\"}",
            "{print 1 &&\n1 > \"x\"}",
            "{print 1 ||\n1 > \"x\"}",
            "{print \"x\n\"}",
            "{close(\"x\")}",
            "{print $1 |& \"cat\"}",
            "{print (1}",
            "{print 1)}",
            "{ while (1) print }",
            "{$999999999++}",
            "{$x++}",
            "{NF += 999999999}",
            "{x++ y}",
            "{print x++}",
            "{++x}",
            "{print $1 -= 1}",
            "{print sprintf(\"%9999999d\", 1)}",
            "BEGIN{print `id`}",
            "{print \"\u{4e2d}\\\"; system($0) }#\"",
            "/[\u{4e2d}]/ {print}",
            "/[]/ {print \"]/{system($0)} #\"}",
            "/[^]/ {print \"]/{system($0)} #\"}",
            "/[[:]/ {print}",
            "/[a\\]/ {print}",
        ] {
            assert!(!program_is_safe(program), "{program}");
        }
    }
}
