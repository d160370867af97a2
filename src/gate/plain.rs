//! The fast path for plain command lines: `git status && cargo build 2>&1 | tail -n 20`.
//!
//! Most commands agents run are plain words joined by `&&`, `||`, `;` and `|`, with a few
//! redirections. brush-parser's tokenizer and PEG grammar spend most of the gate's time on
//! them (every word is tried as an assignment, as a reserved word, as an I/O number…). This
//! module recognises a strict subset of bash, where each byte has one meaning whatever its
//! context, and builds the **same AST** brush-parser builds for it, so the walker judges the
//! line exactly as it would have. `tests::the_fast_path_builds_brush_parsers_ast` checks that
//! on thousands of generated lines against brush-parser itself.
//!
//! Why hand-written: no library offers a cheap path for a subset of bash, and brush-parser's
//! cost is its grammar's generality. The subset is kept small enough to reason about:
//! - word bytes are ASCII letters, digits and `_ . / , : + @ % ^ - * ? [ ]`: no quotes,
//!   escapes, `$`, backquotes, `~`, `=`, `{`, `}`, `(`, `)`, `#`, `!` or non-ASCII, so a word
//!   needs no quote removal and cannot be an assignment, a comment or a brace expansion;
//! - no reserved word anywhere (`if`, `[[`, `time`, `in`, …);
//! - operators `&&`, `||`, `;`, `|`, and redirections `[N]>`, `[N]>>`, `[N]<`, `[N]>&W`,
//!   `[N]<&W` with N at most four digits;
//! - blanks are spaces and tabs; one newline is allowed, at the very end.
//!
//! On failure: anything outside the subset, an empty command, a dangling operator or
//! redirection, or a line with [`super::shell`]'s maximum number of operators returns `None`,
//! and the caller takes brush-parser's path, with all its checks. This module never decides
//! anything itself and never returns an AST brush-parser would not have built.

use brush_parser::ast;

/// Bash's reserved words, and the words brush-parser treats as such in command position.
fn is_reserved(word: &str) -> bool {
    matches!(
        word,
        "!" | "[["
            | "]]"
            | "{"
            | "}"
            | "case"
            | "coproc"
            | "do"
            | "done"
            | "elif"
            | "else"
            | "esac"
            | "fi"
            | "for"
            | "function"
            | "if"
            | "in"
            | "select"
            | "then"
            | "time"
            | "until"
            | "while"
    )
}

const fn word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'_' | b'.' | b'/' | b',' | b':' | b'+' | b'@' | b'%' | b'^' | b'-' | b'*' | b'?' | b'[' | b']'
        )
}

/// [`word_byte`] for every byte, looked up once per byte of the line.
static WORD_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = word_byte(byte as u8);
        byte += 1;
    }
    table
};

fn is_word_byte(byte: u8) -> bool {
    WORD_BYTES[usize::from(byte)]
}

enum Token<'a> {
    Word(&'a str),
    And,
    Or,
    Semicolon,
    Pipe,
    /// A redirection's descriptor, operator and target word: small, so tokens are cheap to hand
    /// over; [`redirect_node`] makes brush-parser's node.
    Redirect(Option<ast::IoFd>, ast::IoFileRedirectKind, &'a str),
}

fn word(text: &str) -> ast::Word {
    ast::Word { value: text.to_owned(), loc: None }
}

/// A byte outside the subset, or too many operators: the line takes the full parser.
struct OutsideSubset;

/// The line's tokens, read as the parser asks for them (no list of them is kept).
struct Tokens<'a> {
    body: &'a str,
    at: usize,
    operators: usize,
    max_operators: usize,
}

impl<'a> Tokens<'a> {
    fn new(source: &'a str, max_operators: usize) -> Self {
        Tokens { body: source.strip_suffix('\n').unwrap_or(source), at: 0, operators: 0, max_operators }
    }

    /// Reads the token that starts at `self.at`, a byte that is not a blank.
    fn token(&mut self) -> Result<Token<'a>, OutsideSubset> {
        let (body, bytes, at) = (self.body, self.body.as_bytes(), self.at);
        let byte = bytes[at];
        let token = match byte {
            b'&' => {
                // `&&` only: a lone `&` (background) and `&>` take the full parser.
                if bytes.get(at + 1) != Some(&b'&') {
                    return Err(OutsideSubset);
                }
                self.operators += 1;
                self.at += 2;
                Token::And
            }
            b'|' => match bytes.get(at + 1) {
                Some(b'|') => {
                    self.operators += 1;
                    self.at += 2;
                    Token::Or
                }
                Some(b'&') => return Err(OutsideSubset),
                _ => {
                    self.operators += 1;
                    self.at += 1;
                    Token::Pipe
                }
            },
            b';' => {
                if bytes.get(at + 1) == Some(&b';') {
                    return Err(OutsideSubset);
                }
                self.operators += 1;
                self.at += 1;
                Token::Semicolon
            }
            b'<' | b'>' => {
                let (kind, target, next) = redirection(bytes, body, at).ok_or(OutsideSubset)?;
                self.at = next;
                Token::Redirect(None, kind, target)
            }
            _ if is_word_byte(byte) => {
                let start = at;
                let mut end = at;
                while end < bytes.len() && is_word_byte(bytes[end]) {
                    end += 1;
                }
                let text = &body[start..end];
                let io_number =
                    matches!(bytes.get(end), Some(b'<' | b'>')) && text.bytes().all(|byte| byte.is_ascii_digit());
                if io_number {
                    if text.len() > 4 {
                        return Err(OutsideSubset);
                    }
                    let fd = text.parse().map_err(|_| OutsideSubset)?;
                    let (kind, target, next) = redirection(bytes, body, end).ok_or(OutsideSubset)?;
                    self.at = next;
                    Token::Redirect(Some(fd), kind, target)
                } else {
                    if is_reserved(text) {
                        return Err(OutsideSubset);
                    }
                    self.at = end;
                    Token::Word(text)
                }
            }
            _ => return Err(OutsideSubset),
        };
        Ok(token)
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Result<Token<'a>, OutsideSubset>;

    fn next(&mut self) -> Option<Self::Item> {
        // Blanks (spaces and tabs) only separate tokens.
        let bytes = self.body.as_bytes();
        while matches!(bytes.get(self.at), Some(b' ' | b'\t')) {
            self.at += 1;
        }
        if self.at >= bytes.len() {
            return None;
        }
        let token = self.token();
        // Operators only change at an operator, so checking after each token checks them all.
        Some(token.and_then(|token| if self.operators >= self.max_operators { Err(OutsideSubset) } else { Ok(token) }))
    }
}

/// The redirection whose operator starts at `at`, and where the input continues after its word.
fn redirection<'a>(bytes: &[u8], body: &'a str, at: usize) -> Option<(ast::IoFileRedirectKind, &'a str, usize)> {
    let (kind, mut next) = match (bytes[at], bytes.get(at + 1)) {
        (b'>', Some(b'>')) => (ast::IoFileRedirectKind::Append, at + 2),
        (b'>', Some(b'&')) => (ast::IoFileRedirectKind::DuplicateOutput, at + 2),
        (b'<', Some(b'&')) => (ast::IoFileRedirectKind::DuplicateInput, at + 2),
        // `>|`, `<>`, `<<`, `<<<`, `<(`, `>(`: the full parser.
        (b'>', Some(b'|' | b'<' | b'(')) | (b'<', Some(b'<' | b'>' | b'(')) => return None,
        (b'>', _) => (ast::IoFileRedirectKind::Write, at + 1),
        (b'<', _) => (ast::IoFileRedirectKind::Read, at + 1),
        _ => return None,
    };
    while matches!(bytes.get(next), Some(b' ' | b'\t')) {
        next += 1;
    }
    let start = next;
    while next < bytes.len() && is_word_byte(bytes[next]) {
        next += 1;
    }
    let target = &body[start..next];
    if target.is_empty() || is_reserved(target) {
        return None;
    }
    Some((kind, target, next))
}

/// brush-parser's node for a redirection of the subset.
fn redirect_node(fd: Option<ast::IoFd>, kind: ast::IoFileRedirectKind, target: &str) -> ast::IoRedirect {
    let target = match kind {
        ast::IoFileRedirectKind::DuplicateOutput | ast::IoFileRedirectKind::DuplicateInput => {
            ast::IoFileRedirectTarget::Duplicate(word(target))
        }
        _ => ast::IoFileRedirectTarget::Filename(word(target)),
    };
    ast::IoRedirect::File(fd, kind, target)
}

/// Ends the pipeline being built and joins it to the and-or list: its first pipeline, or the
/// next after `&&` (`Some(true)`) or `||` (`Some(false)`). `None` when the operator is missing.
fn close_pipeline(
    pipeline: &mut Vec<ast::Command>,
    and_or: &mut Option<ast::AndOrList>,
    operator: Option<bool>,
) -> Option<()> {
    let finished = ast::Pipeline { timed: None, bang: false, seq: std::mem::take(pipeline) };
    match (and_or.as_mut(), operator) {
        (None, _) => *and_or = Some(ast::AndOrList { first: finished, additional: Vec::new() }),
        (Some(list), Some(true)) => list.additional.push(ast::AndOr::And(finished)),
        (Some(list), Some(false)) => list.additional.push(ast::AndOr::Or(finished)),
        (Some(_), None) => return None,
    }
    Some(())
}

/// brush-parser's AST for `source`, when the line is in the plain subset; else `None`.
pub(crate) fn parse(source: &str, max_operators: usize) -> Option<ast::Program> {
    // No tokens at all ends below as a missing command.
    let mut items = Vec::new();
    let mut and_or: Option<ast::AndOrList> = None;
    let mut pending_and_or: Option<bool> = None;
    let mut pipeline: Vec<ast::Command> = Vec::new();
    let mut command: Option<ast::SimpleCommand> = None;
    let mut expect_command = true;

    for token in Tokens::new(source, max_operators) {
        let token = token.ok()?;
        match token {
            Token::Word(text) => {
                let simple =
                    command.get_or_insert(ast::SimpleCommand { prefix: None, word_or_name: None, suffix: None });
                if simple.word_or_name.is_none() {
                    simple.word_or_name = Some(word(text));
                } else {
                    simple
                        .suffix
                        .get_or_insert_with(|| ast::CommandSuffix(Vec::with_capacity(4)))
                        .0
                        .push(ast::CommandPrefixOrSuffixItem::Word(word(text)));
                }
                expect_command = false;
            }
            Token::Redirect(fd, kind, target) => {
                let simple =
                    command.get_or_insert(ast::SimpleCommand { prefix: None, word_or_name: None, suffix: None });
                let item = ast::CommandPrefixOrSuffixItem::IoRedirect(redirect_node(fd, kind, target));
                if simple.word_or_name.is_none() {
                    simple.prefix.get_or_insert_with(|| ast::CommandPrefix(Vec::new())).0.push(item);
                } else {
                    simple.suffix.get_or_insert_with(|| ast::CommandSuffix(Vec::new())).0.push(item);
                }
                expect_command = false;
            }
            Token::Pipe | Token::And | Token::Or | Token::Semicolon => {
                // An operator needs a command before it.
                let simple = command.take()?;
                if expect_command {
                    return None;
                }
                pipeline.push(ast::Command::Simple(simple));
                if matches!(token, Token::Pipe) {
                    expect_command = true;
                    continue;
                }
                close_pipeline(&mut pipeline, &mut and_or, pending_and_or.take())?;
                match token {
                    Token::And => {
                        pending_and_or = Some(true);
                        expect_command = true;
                    }
                    Token::Or => {
                        pending_and_or = Some(false);
                        expect_command = true;
                    }
                    _ => {
                        items.push(ast::CompoundListItem(and_or.take()?, ast::SeparatorOperator::Sequence));
                        expect_command = false;
                    }
                }
            }
        }
    }
    match command.take() {
        Some(simple) => {
            pipeline.push(ast::Command::Simple(simple));
            close_pipeline(&mut pipeline, &mut and_or, pending_and_or.take())?;
            items.push(ast::CompoundListItem(and_or.take()?, ast::SeparatorOperator::Sequence));
        }
        // A line may end in `;` but not in `|`, `&&` or `||`.
        None if expect_command || !pipeline.is_empty() || and_or.is_some() => return None,
        None => {}
    }
    if items.is_empty() {
        return None;
    }
    Some(ast::Program { complete_commands: vec![ast::CompoundList(items)] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use brush_parser::{ParserOptions, parse_tokens, uncached_tokenize_str};
    use proptest::prelude::*;
    use proptest::strategy::Strategy;

    /// brush-parser's AST for `source`, printed without source locations (the fast path has
    /// none, and the walker reads none).
    fn brush(source: &str) -> Option<String> {
        let options = ParserOptions::default();
        let tokens = uncached_tokenize_str(source, &options.tokenizer_options()).ok()?;
        let program = parse_tokens(&tokens, &options).ok()?;
        Some(strip_locations(&format!("{program:?}")))
    }

    /// Removes every `loc: …` field (a `Some(SourceSpan { … })` or `None`) from a Debug print.
    fn strip_locations(debug: &str) -> String {
        let mut out = String::with_capacity(debug.len());
        let mut rest = debug;
        while let Some(at) = rest.find(", loc: ") {
            out.push_str(&rest[..at]);
            let after = &rest[at + ", loc: ".len()..];
            if let Some(tail) = after.strip_prefix("None") {
                rest = tail;
                continue;
            }
            // Skip a balanced `Some(...)`.
            let mut depth = 0usize;
            let mut end = after.len();
            for (index, c) in after.char_indices() {
                match c {
                    '(' | '{' => depth += 1,
                    ')' | '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = index + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &after[end..];
        }
        out.push_str(rest);
        out
    }

    fn fast(source: &str) -> Option<String> {
        parse(source, 256).map(|program| strip_locations(&format!("{program:?}")))
    }

    #[test]
    fn the_bench_lines_take_the_fast_path_and_match_brush() {
        for line in [
            "git status && cargo build 2>&1 | tail -n 20; ls -la src || echo failed\n",
            "ls\n",
            "wc -l src/*.rs tests/*.rs\n",
            "cat a >> b; sort < input > out 2> err\n",
            ">out echo hi\n",
            "echo a2>f 3<&0 1>&2\n",
            "a; b;\n",
            "a | b | c && d || e ; f\n",
        ] {
            let fast = fast(line).unwrap_or_else(|| panic!("`{line}` should take the fast path"));
            assert_eq!(Some(fast), brush(line), "{line}");
        }
    }

    #[test]
    fn lines_outside_the_subset_take_the_full_parser() {
        for line in [
            "echo $HOME\n",
            "echo 'a'\n",
            "A=1 b\n",
            "echo a=b\n",
            "if true; then ls; fi\n",
            "time ls\n",
            "[[ a ]]\n",
            "ls &\n",
            "ls |& cat\n",
            "cat <<EOF\nx\nEOF\n",
            "echo > \n",
            "a &&\n",
            "| a\n",
            "a ;; b\n",
            "ls ~\n",
            "echo {a,b}\n",
            "echo # c\n",
            "a\nb\n",
            "99999>f\n",
            "ls >| f\n",
            "ls &> f\n",
            ";\n",
            "\n",
        ] {
            assert!(fast(line).is_none(), "`{line}` should take the full parser");
        }
    }

    fn plain_line() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            12 => prop::sample::select(vec![
                "ls", "-la", "src", "a", "2", "10", "x.rs", "*.rs", "a?b", "[ab]", "--x", "a,b", "x:y", "@", "%1", "^", "-",
                ".", "/dev/null", "a]", "0", "12345", "[", "]",
            ]),
            1 => prop::sample::select(vec!["if", "in", "time", "]]", "[[", "!", "a=b", "$x", "'q'", "{a,b}", "#c", "~"]),
        ];
        let glue = prop_oneof![
            12 => prop::sample::select(vec![
                " ", "  ", "\t", " && ", "&&", " || ", "||", "; ", ";", " | ", "|", " > ", ">", ">>", " < ", "<", " 2>",
                "2>&", ">&", "<&", " 1>&", " 2>&1 ", ">", "",
            ]),
            1 => prop::sample::select(vec!["&", ";;", "|&", "<>", ">|", "<<", "&>", "\n", "(", ")"]),
        ];
        prop::collection::vec((word, glue), 1..10).prop_map(|pieces| {
            let mut line = String::new();
            for (index, (word, glue)) in pieces.iter().enumerate() {
                if index > 0 {
                    line.push_str(glue);
                }
                line.push_str(word);
            }
            line.push('\n');
            line
        })
    }

    /// Whenever the fast path answers, brush-parser parses the line to the same AST; and the
    /// generator reaches the fast path often enough for that to mean something.
    #[test]
    fn the_fast_path_builds_brush_parsers_ast() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut fast_lines, mut total) = (0, 0);
        for _ in 0..6000 {
            let line = plain_line().new_tree(&mut runner).expect("a generated line").current();
            total += 1;
            if let Some(fast) = fast(&line) {
                fast_lines += 1;
                assert_eq!(Some(fast), brush(&line), "{line}");
            }
        }
        assert!(fast_lines * 5 > total, "only {fast_lines} of {total} generated lines took the fast path");
    }
}
