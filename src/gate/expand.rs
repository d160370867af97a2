//! Brace expansion as bash performs it, on a word's source text, before any other expansion.
//!
//! Decides which words one source word becomes: `a{b,c}d` is `abd acd`, `{"x",}` is `x`,
//! `{1..3}` is `1 2 3`. Quoted and escaped braces and commas are literal, `${` is a parameter,
//! and `$(…)`, `` `…` `` and `$((…))` are skipped whole, as bash skips them. The results keep
//! their quotes: quote removal, tilde and parameter expansion happen afterwards, word by word,
//! in the shell walker. An unquoted word that brace expansion leaves empty is dropped, as bash
//! drops it.
//!
//! Hand-written: brush-parser's brace grammar does not honour quotes inside members (its own
//! TODO), which is exactly where the red team hid flags. Checked against real bash in
//! `tests/expansion_vs_bash.rs`. Fails closed: more than [`MAX_WORDS`] results, or a source it
//! cannot scan (an unterminated quote), is an error, and the caller treats the word as unknown.

/// At most this many words come out of one source word.
pub const MAX_WORDS: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BraceError {
    #[error("brace expansion makes more than {MAX_WORDS} words")]
    TooMany,
    #[error("an unterminated quote or substitution")]
    Unterminated,
    #[error("a sequence zsh or bash reads again (punctuation), or zsh reads otherwise (an increment, a sign)")]
    Unsupported,
}

/// The words `word` becomes after brace expansion (quotes kept). A word with no brace
/// expression comes back alone and unchanged.
pub fn brace_expand(word: &str) -> Result<Vec<String>, BraceError> {
    let mut out = brace_expand_keeping_empty(word)?;
    // An unquoted word left empty is removed; a quoted empty word (`''`) stays.
    out.retain(|word| !word.is_empty());
    Ok(out)
}

/// [`brace_expand`] without bash's removal of empty words: zsh keeps them (`{,x}` is `''` and
/// `x` there), so a caller can tell when the two shells disagree.
pub fn brace_expand_keeping_empty(word: &str) -> Result<Vec<String>, BraceError> {
    if !word.contains('{') {
        return Ok(vec![word.to_owned()]);
    }
    let mut out = Vec::new();
    expand_into(word, &mut out)?;
    Ok(out)
}

/// Whether a word (after bash's brace expansion) still holds an unquoted `{…}` with something
/// inside, which zsh's `braceccl` option expands as a character class (`{-}o` is `-o`).
/// Parameter expansions (`${x}`) and git's `@{…}` revision suffix do not count; `{}` is
/// literal in every shell.
pub fn has_literal_brace_group(word: &str) -> bool {
    let bytes = word.as_bytes();
    let (mut single, mut double) = (false, false);
    let mut open: Option<usize> = None;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        match byte {
            b'\\' if !single => index += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'{' if !single && !double => {
                let after_dollar_or_at = index > 0 && matches!(bytes[index - 1], b'$' | b'@');
                if after_dollar_or_at {
                    // Skip to the matching `}`.
                    let mut depth = 0usize;
                    while index < bytes.len() {
                        match bytes[index] {
                            b'{' => depth += 1,
                            b'}' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        index += 1;
                    }
                } else {
                    open = Some(index);
                }
            }
            b'}' if !single && !double => {
                if let Some(start) = open.take()
                    && index > start + 1
                {
                    return true;
                }
            }
            _ => {}
        }
        index += 1;
    }
    false
}

fn expand_into(word: &str, out: &mut Vec<String>) -> Result<(), BraceError> {
    match find_brace_expression(word)? {
        Found::Nothing => push(out, word.to_owned()),
        Found::Literal { close } => {
            // `{x}` and failed sequences stay as written; the rest of the word still expands.
            let mut tails = Vec::new();
            expand_into(&word[close + 1..], &mut tails)?;
            for tail in tails {
                push(out, format!("{}{tail}", &word[..=close]))?;
            }
            Ok(())
        }
        Found::Expression { open, close, members } => {
            let preamble = &word[..open];
            // The postscript may hold more brace expressions; expand it once and reuse it.
            let mut tails = Vec::new();
            expand_into(&word[close + 1..], &mut tails)?;
            for member in members {
                let mut heads = Vec::new();
                expand_into(&member, &mut heads)?;
                for head in &heads {
                    for tail in &tails {
                        push(out, format!("{preamble}{head}{tail}"))?;
                    }
                }
            }
            Ok(())
        }
    }
}

fn push(out: &mut Vec<String>, word: String) -> Result<(), BraceError> {
    if out.len() >= MAX_WORDS {
        return Err(BraceError::TooMany);
    }
    out.push(word);
    Ok(())
}

enum Found {
    Nothing,
    /// Braces that expand to themselves (`{x}`, `{1.5..3}`), ending at byte `close`.
    Literal {
        close: usize,
    },
    Expression {
        open: usize,
        close: usize,
        members: Vec<String>,
    },
}

/// What bash's `brace_gobbler` (braces.c) looks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Satisfy {
    Open,
    Close,
    Comma,
}

/// Scans `bytes` from `from` the way bash's `brace_gobbler` does, for the first unquoted `{`,
/// the `}` closing a brace expression (only after a top-level `,` or `..`), or a top-level `,`.
/// Backslashes escape (outside single quotes), quotes and `$(…)` are skipped, `${` nests.
/// Returns the byte offset found, or `None`.
fn gobble(bytes: &[u8], from: usize, satisfy: Satisfy) -> Result<Option<usize>, BraceError> {
    let mut level = 0usize;
    let mut separators = usize::from(satisfy != Satisfy::Close);
    let mut quoted: Option<u8> = None;
    let mut index = from;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte == b'\\' && quoted != Some(b'\'') {
            index += 2;
            continue;
        }
        if let Some(quote) = quoted {
            if byte == quote {
                quoted = None;
            } else if quote == b'"' && byte == b'$' && bytes.get(index + 1) == Some(&b'(') {
                index = skip_nested(bytes, index + 2, b'(', b')')?;
                continue;
            }
            index += 1;
            continue;
        }
        match byte {
            b'"' | b'\'' | b'`' => {
                quoted = Some(byte);
                index += 1;
                continue;
            }
            b'$' if bytes.get(index + 1) == Some(&b'(') => {
                index = skip_nested(bytes, index + 2, b'(', b')')?;
                continue;
            }
            b'$' if bytes.get(index + 1) == Some(&b'{') => {
                // `${…}` is a parameter: its braces nest but never expand.
                level += 1;
                index += 2;
                continue;
            }
            _ => {}
        }
        let wanted = match satisfy {
            Satisfy::Open => b'{',
            Satisfy::Close => b'}',
            Satisfy::Comma => b',',
        };
        if byte == wanted && level == 0 && separators > 0 {
            // bash ignores a `{` followed by `}` (`{}`) that starts the text or follows a blank
            // (`\ {},}` stays as written; `a{},b}` expands).
            let after_blank = index == 0 || matches!(bytes[index - 1], b' ' | b'\t' | b'\n');
            let empty_pair = satisfy == Satisfy::Open && after_blank && bytes.get(index + 1) == Some(&b'}');
            if !empty_pair {
                return Ok(Some(index));
            }
            index += 1;
            continue;
        }
        if byte == b'{' {
            level += 1;
        } else if byte == b'}' && level > 0 {
            level -= 1;
        } else if satisfy == Satisfy::Close && level == 0 {
            let sequence_dots =
                byte == b'.' && bytes.get(index + 1) == Some(&b'.') && bytes.get(index + 2) != Some(&b'}');
            if byte == b',' || sequence_dots {
                separators += 1;
            }
        }
        index += 1;
    }
    Ok(None)
}

fn skip_single_quoted(bytes: &[u8], from: usize) -> Result<usize, BraceError> {
    bytes[from.min(bytes.len())..]
        .iter()
        .position(|byte| *byte == b'\'')
        .map(|offset| from + offset + 1)
        .ok_or(BraceError::Unterminated)
}

fn skip_double_quoted(bytes: &[u8], mut index: usize) -> Result<usize, BraceError> {
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'"' => return Ok(index + 1),
            b'`' => index = skip_backquoted(bytes, index + 1)?,
            b'$' if bytes.get(index + 1) == Some(&b'(') => index = skip_nested(bytes, index + 2, b'(', b')')?,
            _ => index += 1,
        }
    }
    Err(BraceError::Unterminated)
}

fn skip_backquoted(bytes: &[u8], mut index: usize) -> Result<usize, BraceError> {
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'`' => return Ok(index + 1),
            _ => index += 1,
        }
    }
    Err(BraceError::Unterminated)
}

/// Skips to after the bracket closing one already opened, honouring quotes inside.
fn skip_nested(bytes: &[u8], mut index: usize, open: u8, close: u8) -> Result<usize, BraceError> {
    let mut depth = 1usize;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'\'' => index = skip_single_quoted(bytes, index + 1)?,
            b'"' => index = skip_double_quoted(bytes, index + 1)?,
            b'`' => index = skip_backquoted(bytes, index + 1)?,
            byte if byte == open => {
                depth += 1;
                index += 1;
            }
            byte if byte == close => {
                depth -= 1;
                index += 1;
                if depth == 0 {
                    return Ok(index);
                }
            }
            _ => index += 1,
        }
    }
    Err(BraceError::Unterminated)
}

/// The first brace expression in `word`, following bash's `brace_expand`: the first `{` whose
/// closing `}` exists (else the next `{`); a list when the text between holds a comma (bash
/// looks past quotes and levels here), split at top-level commas; else a sequence; else
/// literal.
fn find_brace_expression(word: &str) -> Result<Found, BraceError> {
    let bytes = word.as_bytes();
    let mut from = 0;
    loop {
        let Some(open) = gobble(bytes, from, Satisfy::Open)? else { return Ok(Found::Nothing) };
        let Some(close) = gobble(bytes, open + 1, Satisfy::Close)? else {
            from = open + 1;
            continue;
        };
        let amble = &word[open + 1..close];
        if has_unescaped_comma(amble) {
            let amble_bytes = amble.as_bytes();
            let mut members = Vec::new();
            let mut start = 0;
            while let Some(comma) = gobble(amble_bytes, start, Satisfy::Comma)? {
                members.push(amble[start..comma].to_owned());
                start = comma + 1;
            }
            members.push(amble[start..].to_owned());
            return Ok(Found::Expression { open, close, members });
        }
        return Ok(match sequence(amble)? {
            Some(members) => Found::Expression { open, close, members },
            None => Found::Literal { close },
        });
    }
}

/// bash's test for a list: any comma not right after a backslash, quoted or not.
fn has_unescaped_comma(amble: &str) -> bool {
    let bytes = amble.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b',' => return true,
            _ => index += 1,
        }
    }
    false
}

/// `1..5`, `a..e`, `10..1..3`, `01..10` (zero-padded), as bash generates them.
fn sequence(inner: &str) -> Result<Option<Vec<String>>, BraceError> {
    let parts: Vec<&str> = inner.split("..").collect();
    if !(parts.len() == 2 || parts.len() == 3) {
        return Ok(None);
    }
    // zsh reads an increment (`{1..5..-2}` is `5 3 1`, `{a..c..2}` stays literal), a `+` sign
    // and `-0` (`{-0..1}` is `00 01`) otherwise than bash: such a sequence is not modelled
    // (found by the zsh grammar of tests/parser_vs_shells.rs).
    let signed = |text: &str| text.starts_with('+') || text.starts_with("-0");
    if parts.len() == 3 || signed(parts[0]) || signed(parts[1]) {
        let plausible = parts.iter().all(|part| parse_integer(part).is_some())
            || (parts[..2].iter().all(|part| part.len() == 1 && part.bytes().all(|byte| byte.is_ascii_alphabetic()))
                && parts.get(2).is_none_or(|step| parse_integer(step).is_some()));
        return if plausible { Err(BraceError::Unsupported) } else { Ok(None) };
    }
    let step = match parts.get(2) {
        Some(step) => match parse_integer(step) {
            Some(step) => step.unsigned_abs().max(1),
            None => return Ok(None),
        },
        None => 1,
    };
    if let (Some(start), Some(end)) = (parse_integer(parts[0]), parse_integer(parts[1])) {
        let count = start.abs_diff(end) / step + 1;
        if count > MAX_WORDS as u64 {
            return Err(BraceError::TooMany);
        }
        // bash pads when an end is written `0…` or `-0…` (not `0` alone, not `+0…`), to the
        // longer end's length, sign included.
        let padded =
            |text: &str| (text.starts_with('0') && text.len() > 1) || (text.starts_with("-0") && text.len() > 2);
        let width = if padded(parts[0]) || padded(parts[1]) { parts[0].len().max(parts[1].len()) } else { 0 };
        let mut out = Vec::with_capacity(count as usize);
        let mut value = start;
        for _ in 0..count {
            out.push(if width > 0 {
                if value < 0 {
                    format!("-{:0>width$}", value.unsigned_abs(), width = width - 1)
                } else {
                    format!("{value:0>width$}")
                }
            } else {
                value.to_string()
            });
            value = if start <= end { value + step as i64 } else { value - step as i64 };
        }
        return Ok(Some(out));
    }
    let letter = |text: &str| {
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => Some(c as u8),
            _ => None,
        }
    };
    if let (Some(start), Some(end)) = (letter(parts[0]), letter(parts[1])) {
        let count = u64::from(start.abs_diff(end)) / step + 1;
        let mut out = Vec::with_capacity(count as usize);
        let mut value = i64::from(start);
        for _ in 0..count {
            // bash steps through the ASCII table, so `Z..a` passes `[`, `\\`, `]`, `^`, `_` and a
            // backquote, which bash then reads again: not modelled, so the word is unknown.
            let letter = char::from(value as u8);
            if !letter.is_ascii_alphabetic() {
                return Err(BraceError::Unsupported);
            }
            out.push(letter.to_string());
            value = if start <= end { value + step as i64 } else { value - step as i64 };
        }
        return Ok(Some(out));
    }
    Ok(None)
}

fn parse_integer(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || digits.len() > 17 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(word: &str) -> Vec<String> {
        brace_expand(word).unwrap()
    }

    #[test]
    fn lists_and_products() {
        assert_eq!(expand("a{b,c}d"), ["abd", "acd"]);
        assert_eq!(expand("{a,b}{1,2}"), ["a1", "a2", "b1", "b2"]);
        assert_eq!(expand("{a,{b,c}}"), ["a", "b", "c"]);
        assert_eq!(expand("x{,}"), ["x", "x"]);
        assert_eq!(expand("{,}"), Vec::<String>::new());
    }

    #[test]
    fn a_close_brace_counts_only_after_a_separator() {
        // bash's brace_gobbler: a `}` before any top-level `,` or `..` is literal.
        assert_eq!(expand("{x},-rf}"), ["x}", "-rf"]);
        assert_eq!(expand("{a},}"), ["a}"]);
        assert_eq!(expand("a{},b}"), ["a}", "ab"]);
        assert_eq!(expand("{{a,b}}c,d}"), ["a}c", "b}c", "d"]);
        // A comma anywhere in the text makes a list, even one with no top-level comma.
        assert_eq!(expand("{{a,b}0..t}"), ["a0..t", "b0..t"]);
        assert_eq!(expand("{'a,b'..c}"), ["'a,b'..c"]);
    }

    #[test]
    fn quoted_members_still_expand() {
        assert_eq!(expand("{\"x\",}"), ["\"x\""]);
        assert_eq!(expand("{\\-o,}"), ["\\-o"]);
        assert_eq!(expand("{'-',}-output=x"), ["'-'-output=x", "-output=x"]);
    }

    #[test]
    fn quoted_braces_and_commas_are_literal() {
        assert_eq!(expand("'{a,b}'"), ["'{a,b}'"]);
        assert_eq!(expand("\"{a,b}\""), ["\"{a,b}\""]);
        assert_eq!(expand("\\{a,b}"), ["\\{a,b}"]);
        assert_eq!(expand("{a\\,b}"), ["{a\\,b}"]);
        assert_eq!(expand("${a,b}"), ["${a,b}"]);
        assert_eq!(expand("{}"), ["{}"]);
        assert_eq!(expand("{x}"), ["{x}"]);
        assert_eq!(expand("{x}{a,b}"), ["{x}a", "{x}b"]);
        assert_eq!(expand("{a{b,c}"), ["{ab", "{ac"]);
        assert_eq!(expand("a{}{a,b}"), ["a{}a", "a{}b"]);
        assert_eq!(expand("{}{a,b}"), ["{}a", "{}b"]);
        assert_eq!(expand("{a..c}}"), ["a}", "b}", "c}"]);
        assert_eq!(expand("{a..}"), ["{a..}"]);
        assert_eq!(expand("{1..3..}"), ["{1..3..}"]);
        assert_eq!(expand("{a,b..}"), ["a", "b.."]);
        assert_eq!(expand("$(echo {a,b})"), ["$(echo {a,b})"]);
    }

    #[test]
    fn sequences() {
        assert_eq!(expand("{1..3}"), ["1", "2", "3"]);
        assert_eq!(expand("{3..1}"), ["3", "2", "1"]);
        assert_eq!(expand("{01..3}"), ["01", "02", "03"]);
        assert_eq!(expand("{-2..0}"), ["-2", "-1", "0"]);
        assert_eq!(brace_expand("{Z..a}"), Err(BraceError::Unsupported));
        // zsh reads increments, `+` and `-0` otherwise (`{1..5..-2}` is `5 3 1` there).
        for word in ["{-0..2}", "{+01..3}", "{1..10..4}", "{a..c..2}", "{1..2..0}", "{1..+3}"] {
            assert_eq!(brace_expand(word), Err(BraceError::Unsupported), "{word}");
        }
        assert_eq!(expand("{a..c}"), ["a", "b", "c"]);
        assert_eq!(expand("{a..1}"), ["{a..1}"]);
        assert_eq!(brace_expand("{1..100000}"), Err(BraceError::TooMany));
        assert_eq!(brace_expand("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"), Err(BraceError::TooMany));
    }
}
