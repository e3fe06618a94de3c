//! The links of the project's Markdown pages, checked as GitHub renders them: the top-level
//! README, `docs/*.md`, every crate's and binding's README and the changelog.
//!
//! A relative link must name a file or directory that exists (relative to the page, or to the
//! repository root when it starts with `/`), and a `#anchor` on a Markdown page (the same page,
//! or the one linked) must match one of its headings under GitHub's rule: the heading's text,
//! lowercased, with spaces turned into `-` and every other character that is neither a letter, a
//! digit, `-` nor `_` dropped; a repeated heading gets `-1`, `-2`, ... Links with a scheme
//! (`https:`, `mailto:`) are not fetched. Code (fenced blocks and inline spans) is skipped.
//!
//! The check is the unit test `every_link_in_the_docs_resolves`, run by `cargo test
//! --workspace` (CI's test step), beside `the_readme_stays_under_250_lines`.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

/// The pages checked, relative to the workspace root, that exist.
pub(crate) fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    for (dir, file) in [
        ("docs", None),
        ("crates", Some("README.md")),
        ("bindings", Some("README.md")),
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| match file {
                None => (p.extension().is_some_and(|x| x == "md")).then_some(p),
                Some(name) => Some(p.join(name)),
            })
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        pages.extend(found);
    }
    pages.retain(|p| p.is_file());
    pages
}

/// A link that does not resolve: where it is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Broken {
    /// The page, relative to the root.
    pub(crate) page: String,
    /// Its line, from 1.
    pub(crate) line: usize,
    /// The link's target as written.
    pub(crate) target: String,
    /// What is wrong with it.
    pub(crate) why: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: ({}) {}",
            self.page, self.line, self.target, self.why
        )
    }
}

/// Every broken link of `pages` (paths under `root`).
pub(crate) fn check(root: &Path, pages: &[PathBuf]) -> Vec<Broken> {
    let mut broken = Vec::new();
    for page in pages {
        let name = page
            .strip_prefix(root)
            .unwrap_or(page)
            .display()
            .to_string();
        let text = match std::fs::read_to_string(page) {
            Ok(text) => text,
            Err(e) => {
                broken.push(Broken {
                    page: name,
                    line: 0,
                    target: String::new(),
                    why: format!("cannot read the page: {e}"),
                });
                continue;
            }
        };
        for (line, target) in links(&text) {
            if let Err(why) = resolve(root, page, &text, &target) {
                broken.push(Broken {
                    page: name.clone(),
                    line,
                    target,
                    why,
                });
            }
        }
    }
    broken
}

/// Whether `target`, linked from `page` (whose text is `text`), resolves.
fn resolve(root: &Path, page: &Path, text: &str, target: &str) -> Result<(), String> {
    if has_scheme(target) {
        return Ok(());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let (file, target_text) = if path.is_empty() {
        (page.to_path_buf(), Some(text.to_owned()))
    } else {
        let base = if path.starts_with('/') {
            root.to_path_buf()
        } else {
            page.parent().unwrap_or(root).to_path_buf()
        };
        let file = normalize(&base.join(percent_decode(path.trim_start_matches('/'))));
        if !file.starts_with(root) {
            return Err("points outside the repository".into());
        }
        if !file.exists() {
            return Err(format!("no such file: {}", file.display()));
        }
        let markdown = file.is_file() && file.extension().is_some_and(|x| x == "md");
        let text = if markdown {
            Some(std::fs::read_to_string(&file).map_err(|e| e.to_string())?)
        } else {
            None
        };
        (file, text)
    };
    match (anchor, target_text) {
        (Some(anchor), Some(text)) if !anchor.is_empty() => {
            if anchors(&text).contains(&percent_decode(anchor).to_lowercase()) {
                Ok(())
            } else {
                Err(format!("no heading for #{anchor} in {}", file.display()))
            }
        }
        // An anchor into source code (`#L10`) or a directory is GitHub's business.
        _ => Ok(()),
    }
}

/// Whether a link target has a URL scheme (`https:`, `mailto:`): not a file of the repository.
fn has_scheme(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `%20` and the like decoded (invalid escapes are kept as written).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |at: usize| bytes.get(at).and_then(|&b| char::from(b).to_digit(16));
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) {
                // Two hex digits: at most 255.
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'%'));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The lines of `text` outside fenced code blocks, with their numbers (from 1).
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fence: Option<(char, usize)> = None;
    text.lines().enumerate().filter_map(move |(i, line)| {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'));
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|&c| c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => {
                fence = Some((m, run));
                None
            }
            (Some((m, n)), Some(c)) if c == m && run >= n && trimmed[run..].trim().is_empty() => {
                fence = None;
                None
            }
            (Some(_), _) => None,
            (None, _) => Some((i + 1, line)),
        }
    })
}

/// `line` with its inline code spans (`` `...` ``, any run of backticks) blanked out.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + run..];
        let closer = "`".repeat(run);
        match after.find(&closer) {
            Some(end) => {
                out.push(' ');
                rest = &after[end + run..];
            }
            None => {
                out.push_str(&rest[start..start + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The link targets of a Markdown text, with their lines: inline links and images
/// (`[text](target "title")`, `<target>` too) and reference definitions (`[label]: target`).
pub(crate) fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = without_code_spans(line);
        if let Some(target) = reference_definition(&line) {
            found.push((number, target));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let (target, used) = inline_target(after);
            if !target.is_empty() {
                found.push((number, target));
            }
            rest = &after[used..];
        }
    }
    found
}

/// The target of `[label]: target`, when `line` is a reference definition.
fn reference_definition(line: &str) -> Option<String> {
    let line = line.trim_start();
    let label_end = line.strip_prefix('[')?.find("]:")? + 1;
    if line[1..label_end].is_empty() {
        return None;
    }
    let target = line[label_end + 2..].split_whitespace().next()?;
    Some(
        target
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_owned(),
    )
}

/// The target at the start of `s` (just after `](`), and how many bytes of `s` the link used.
fn inline_target(s: &str) -> (String, usize) {
    let s_trimmed = s.trim_start();
    let skipped = s.len() - s_trimmed.len();
    if let Some(inner) = s_trimmed.strip_prefix('<') {
        return match inner.find('>') {
            Some(end) => (inner[..end].to_owned(), skipped + end + 2),
            None => (String::new(), skipped),
        };
    }
    let mut depth = 0usize;
    for (i, c) in s_trimmed.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return (s_trimmed[..i].to_owned(), skipped + i + 1),
            ')' => depth -= 1,
            c if c.is_whitespace() && depth == 0 => {
                // A title follows: the target ends here; the link ends at its `)`.
                let end = s_trimmed[i..]
                    .find(')')
                    .map_or(s_trimmed.len(), |e| i + e + 1);
                return (s_trimmed[..i].to_owned(), skipped + end);
            }
            _ => {}
        }
    }
    (String::new(), s.len())
}

/// The anchors GitHub gives the headings of a Markdown text (and any explicit `id="..."` or
/// `name="..."` of an HTML element).
pub(crate) fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose_lines(text) {
        for attribute in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attribute) {
                let value = &rest[at + attribute.len()..];
                if let Some(end) = value.find('"') {
                    seen.insert(value[..end].to_owned());
                }
                rest = &rest[at + attribute.len()..];
            }
        }
        let Some(heading) = heading_text(line) else {
            continue;
        };
        let base = slug(&heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The text of an ATX heading (`## Text ##`), when `line` is one.
fn heading_text(line: &str) -> Option<String> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let line = &line[indent..];
    let level = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    // A closing run of `#` after a space is not part of the text.
    let rest = rest.trim();
    let rest = match rest.trim_end_matches('#') {
        stripped if stripped.is_empty() || stripped.ends_with([' ', '\t']) => stripped.trim_end(),
        _ => rest,
    };
    Some(rendered(rest))
}

/// Inline Markdown as text: links by their text, images by their alt text; what is left of the
/// markup (`*`, `` ` ``, `[`) is dropped by [`slug`] as punctuation.
fn rendered(inline: &str) -> String {
    let mut out = String::with_capacity(inline.len());
    let mut rest = inline;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..at]);
        let (_, used) = inline_target(&rest[at + 2..]);
        rest = &rest[at + 2 + used..];
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor for a heading's text.
pub(crate) fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd;

    #[test]
    fn every_link_in_the_docs_resolves() {
        let root = cmd::workspace_root();
        let pages = pages(&root);
        for must in [
            "README.md",
            "docs/architecture.md",
            "crates/soe-session/README.md",
        ] {
            assert!(pages.contains(&root.join(must)), "{must} is not checked");
        }
        let broken = check(&root, &pages);
        let list: Vec<String> = broken.iter().map(ToString::to_string).collect();
        assert!(
            broken.is_empty(),
            "{} broken link(s):\n{}",
            broken.len(),
            list.join("\n")
        );
        let total: usize = pages
            .iter()
            .map(|p| links(&std::fs::read_to_string(p).unwrap_or_default()).len())
            .sum();
        assert!(total > 50, "only {total} links found: the parser lost them");
    }

    /// The README is a newcomer's page: what the stack is, the two commands, a server per host,
    /// which crate to take, where to read on. The rest lives in docs/ and the crates' READMEs.
    #[test]
    fn the_readme_stays_under_250_lines() {
        let readme = std::fs::read_to_string(cmd::workspace_root().join("README.md")).unwrap();
        let lines = readme.lines().count();
        assert!(
            lines < 250,
            "README.md has {lines} lines: move detail to docs/ or a crate's README"
        );
    }

    #[test]
    fn anchors_follow_githubs_rule() {
        for (heading, anchor) in [
            ("Key defaults", "key-defaults"),
            (
                "soe-node/h1z1: h1z1-server's SOEServer",
                "soe-nodeh1z1-h1z1-servers-soeserver",
            ),
            ("The C ABI (`soe-ffi`)", "the-c-abi-soe-ffi"),
            ("RC4: when to switch", "rc4-when-to-switch"),
            ("snake_case and 3.14 — too", "snake_case-and-314--too"),
            ("Ünïcode Straße", "ünïcode-straße"),
        ] {
            assert_eq!(
                slug(&heading_text(&format!("## {heading}")).unwrap()),
                anchor
            );
        }
        let text = "# Title\n## Echo\n### echo\n```sh\n# not a heading\n```\n## [Linked](x.md) *em* ##\n#nospace\n";
        let found = anchors(text);
        let mut found: Vec<&str> = found.iter().map(String::as_str).collect();
        found.sort_unstable();
        assert_eq!(found, ["echo", "echo-1", "linked-em", "title"]);
    }

    #[test]
    fn links_are_found_outside_code_only() {
        let text = "See [a](a.md#x), ![img](pic.svg \"title\") and [b](<b c.md>).\n\
                    `[not](code.md)` and [`code` text](d.md)\n\
                    ```md\n[fenced](e.md)\n```\n\
                    [ref]: f.md\n\
                    [nested](g(1).md) [web](https://example.com/x(y))\n";
        let targets: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
        assert_eq!(
            targets,
            [
                "a.md#x",
                "pic.svg",
                "b c.md",
                "d.md",
                "f.md",
                "g(1).md",
                "https://example.com/x(y)"
            ]
        );
    }

    /// A page with a good and a broken link of each kind: exactly the broken ones are reported.
    #[test]
    fn a_broken_file_or_anchor_is_reported() {
        let root = std::env::temp_dir().join(format!("xtask-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/a.md"), "# A\n## Real heading\ntext\n").unwrap();
        std::fs::write(
            root.join("README.md"),
            "# Top\n\
             [ok](docs/a.md) [ok](docs/a.md#real-heading) [ok](#top) [ok](docs) [ok](/docs/a.md)\n\
             [web](https://example.com/nowhere.md)\n\
             [gone](docs/missing.md)\n\
             [bad anchor](docs/a.md#unreal-heading)\n\
             [bad local](#bottom)\n\
             [outside](../../etc/passwd)\n",
        )
        .unwrap();
        let broken = check(&root, &pages(&root));
        let _ = std::fs::remove_dir_all(&root);
        let got: Vec<(usize, &str)> = broken.iter().map(|b| (b.line, b.target.as_str())).collect();
        assert_eq!(
            got,
            [
                (4, "docs/missing.md"),
                (5, "docs/a.md#unreal-heading"),
                (6, "#bottom"),
                (7, "../../etc/passwd"),
            ],
            "{broken:#?}"
        );
    }
}
