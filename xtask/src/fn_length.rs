//! No function longer than [`LIMIT`] lines in the crates' `src/` (the libraries, the bindings,
//! soe-sim, soe-bench, soe-netem, the CLI) and in xtask's own: each should read as a short
//! list of named steps.
//!
//! A function runs from the line of its `fn` to the line of the brace that closes its body.
//! The source is read by a small lexer that knows Rust's comments (nested block comments too),
//! strings (raw, byte, C), character literals and lifetimes, so a brace in any of those does not
//! count; then each `fn NAME` is followed to its body's `{` (a `;` first means no body) and the
//! braces are matched. Tests (`tests/`, `benches/`, `examples/`) are not looked at.
//!
//! The check is the unit test `no_function_is_longer_than_the_limit`, run by `cargo test
//! --workspace` (CI's test step); it lists every offender as `path:line name (N lines)`.

use std::path::{Path, PathBuf};

/// The most lines a function may span.
pub(crate) const LIMIT: usize = 120;

/// Functions over the limit in files another change is rewriting, allowed until it lands: the
/// file, the function, and why. An entry that no longer matches an offender fails the check too,
/// so the list only shrinks.
const KNOWN: &[(&str, &str, &str)] = &[];

/// One function: where it starts, its name and its length in lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Function {
    /// The name after `fn`.
    pub(crate) name: String,
    /// The line of `fn`, from 1.
    pub(crate) line: usize,
    /// Lines from `fn` to the closing brace, both included.
    pub(crate) lines: usize,
}

/// A token that matters for finding functions: an identifier or one of `{}()[];`, with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String, usize),
    Punct(char, usize),
}

/// The functions with a body in `source`.
pub(crate) fn functions(source: &str) -> Vec<Function> {
    let tokens = lex(source);
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Token::Ident(word, line) = token else {
            continue;
        };
        if word != "fn" {
            continue;
        }
        // `fn(u8) -> u8` is a pointer type, not a function.
        let Some(Token::Ident(name, _)) = tokens.get(i + 1) else {
            continue;
        };
        if let Some(end) = body_end(&tokens[i + 2..]) {
            found.push(Function {
                name: name.clone(),
                line: *line,
                lines: end - line + 1,
            });
        }
    }
    found
}

/// The line of the brace that closes the body of the function whose signature `tokens` starts
/// after its name; `None` for a declaration without a body.
fn body_end(tokens: &[Token]) -> Option<usize> {
    let mut parens = 0usize;
    let mut braces = 0usize;
    let mut in_body = false;
    for token in tokens {
        let Token::Punct(c, line) = token else {
            continue;
        };
        match (*c, in_body) {
            ('(' | '[', false) => parens += 1,
            (')' | ']', false) => parens = parens.saturating_sub(1),
            (';', false) if parens == 0 => return None,
            ('{', false) if parens == 0 => {
                in_body = true;
                braces = 1;
            }
            ('{', true) => braces += 1,
            ('}', true) => {
                braces -= 1;
                if braces == 0 {
                    return Some(*line);
                }
            }
            _ => {}
        }
    }
    None
}

/// The identifiers and brackets of `source`, outside comments, strings and character literals.
fn lex(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            i = block_comment_end(&chars, i);
        } else if c == '"' {
            i = string_end(&chars, i + 1);
        } else if c == '\'' {
            i = quote_end(&chars, i);
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // A raw string (`r"`, `r#"`, `br"`, `cr#"`) or a byte string or byte (`b"`, `b'`).
            let raw = matches!(word.as_str(), "r" | "br" | "cr")
                && matches!(at(i), '"' | '#')
                && raw_string_start(&chars, i).is_some();
            if raw {
                i = raw_string_end(&chars, i);
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                i = string_end(&chars, i + 1);
            } else if word == "b" && at(i) == '\'' {
                i = quote_end(&chars, i);
            } else {
                tokens.push(Token::Ident(word, line));
            }
        } else {
            if matches!(c, '{' | '}' | '(' | ')' | '[' | ']' | ';') {
                tokens.push(Token::Punct(c, line));
            }
            i += 1;
        }
        line += chars[start..i.min(chars.len())]
            .iter()
            .filter(|&&c| c == '\n')
            .count();
    }
    tokens
}

/// Just past the `*/` that closes the block comment opening at `i` (nested ones included).
fn block_comment_end(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// Just past the `"` that closes a string whose contents start at `i` (escapes skipped).
fn string_end(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The number of `#` of a raw string whose `#`s (or `"`) start at `i`, if one starts there.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
    (chars.get(i + hashes) == Some(&'"')).then_some(hashes)
}

/// Just past the end of the raw string whose `#`s (or `"`) start at `i`.
fn raw_string_end(chars: &[char], i: usize) -> usize {
    let hashes = raw_string_start(chars, i).unwrap_or(0);
    let mut j = i + hashes + 1;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return j + 1 + hashes;
        }
        j += 1;
    }
    j
}

/// Just past a character literal (`'x'`, `'\n'`, `'\u{1F600}'`) at `i`, or past the `'` of a
/// lifetime or label (`'a`, `'static`).
fn quote_end(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        // An escape: the literal ends at the next quote.
        let mut j = i + 2;
        while j < chars.len() && chars[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    i + 1
}

/// The Rust files the check reads: every `src/` of the crates, and xtask's.
pub(crate) fn sources(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("xtask/src")];
    if let Ok(entries) = std::fs::read_dir(root.join("crates")) {
        dirs.extend(entries.filter_map(|e| e.ok().map(|e| e.path().join("src"))));
    }
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd;

    #[test]
    fn no_function_is_longer_than_the_limit() {
        let root = cmd::workspace_root();
        let files = sources(&root);
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("soe-session/src/endpoint.rs")),
            "the crates' sources were not found"
        );
        let mut offenders = Vec::new();
        let mut known_seen = Vec::new();
        let mut count = 0;
        for file in &files {
            let source = std::fs::read_to_string(file).unwrap();
            let relative = file.strip_prefix(&root).unwrap_or(file);
            let relative = relative.to_string_lossy().replace('\\', "/");
            for f in functions(&source) {
                count += 1;
                if f.lines <= LIMIT {
                    continue;
                }
                if KNOWN.iter().any(|(p, n, _)| *p == relative && *n == f.name) {
                    known_seen.push((relative.clone(), f.name.clone()));
                    continue;
                }
                offenders.push(format!(
                    "{relative}:{} {} ({} lines)",
                    f.line, f.name, f.lines
                ));
            }
        }
        assert!(
            count > 1000,
            "only {count} functions found: the lexer lost them"
        );
        assert!(
            offenders.is_empty(),
            "functions over {LIMIT} lines (split each into named steps):\n{}",
            offenders.join("\n")
        );
        for (path, name, why) in KNOWN {
            assert!(
                known_seen.iter().any(|(p, n)| p == path && n == name),
                "{path} {name} is no longer over {LIMIT} lines ({why}): remove it from KNOWN"
            );
        }
    }

    #[test]
    fn a_function_spans_from_fn_to_its_closing_brace() {
        let source = "\
fn short() {}
/// A doc.
pub(crate) async fn longer<T: Fn(u8) -> u8>(f: T) -> Result<(), E>
where
    T: Copy,
{
    let s = \"}}}\"; let r = r#\"{ \" }\"#; let c = '}'; let b = b'{';
    // } in a comment
    /* { nested /* } */ } */
    let f: fn(u8) -> u8 = |x| x;
    fn inner<'a>(x: &'a str) -> &'a str { x }
    'outer: loop { break 'outer; }
}
trait T { fn declared(&self); fn defaulted(&self) { } }
";
        let found: Vec<(String, usize, usize)> = functions(source)
            .into_iter()
            .map(|f| (f.name, f.line, f.lines))
            .collect();
        assert_eq!(
            found,
            [
                ("short".into(), 1, 1),
                ("longer".into(), 3, 11),
                ("inner".into(), 11, 1),
                ("defaulted".into(), 14, 1),
            ]
        );
    }

    #[test]
    fn a_long_function_is_counted_in_full() {
        let body: String = (0..LIMIT)
            .map(|i| format!("    let _x{i} = {{ {i} }};\n"))
            .collect();
        let source = format!("fn long() {{\n{body}}}\n");
        let found = functions(&source);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].lines, LIMIT + 2);
        assert!(found[0].lines > LIMIT);
    }
}
