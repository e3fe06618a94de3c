//! `cargo xtask links`: the links of the project's Markdown pages (the top-level README, the
//! changelog, `docs/*.md`, every crate's and binding's README), checked by remark-validate-links,
//! the link checker of the remark (unified) project, as GitHub renders them: a relative link must
//! name a file that exists, and a `#anchor` a heading of the page it points at, by GitHub's slug
//! rule. Links with a scheme are not fetched (the machines reach no web site).
//!
//! The checker and its CLI are pinned in `xtask/remark/package.json` and its lock file, and
//! installed with `npm ci` under `target/xtask-tools/remark` (seconds, once per lock file). The
//! step skips without Node and npm, except under `CI=true`, where that fails (`ci` decides).
//!
//! The README's length (at most 250 lines: a newcomer reads it in one sitting) is a unit test
//! here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::{Error, Result};

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

/// Whether the step can run here: Node and npm.
pub(crate) fn present() -> bool {
    crate::node::present()
}

/// Installs the pinned checker (when its lock file changed) and runs it over [`pages`].
pub(crate) fn run() -> Result<()> {
    let root = cmd::workspace_root();
    let tools = install(&root)?;
    let plugin = tools.join("node_modules/remark-validate-links/index.js");
    let mut check = Command::new("node");
    check
        .arg(tools.join("node_modules/remark-cli/cli.js"))
        .args(["--no-config", "--frail", "--quiet", "--no-stdout"])
        // `repository: false`: the links are checked as files of this tree, whatever its remote.
        .arg("--use")
        .arg(format!("{}=repository:false", plugin.display()))
        .current_dir(&root);
    let pages = pages(&root);
    for page in &pages {
        check.arg(page.strip_prefix(&root).unwrap_or(page));
    }
    println!(
        "==> links: remark-validate-links over {} pages",
        pages.len()
    );
    cmd::run_timed(&mut check).map(|_| ()).map_err(|e| {
        Error::new(format!(
            "{e}: a link of the Markdown pages does not resolve"
        ))
    })
}

/// `npm ci` of `xtask/remark` into `target/xtask-tools/remark`, skipped when the installed lock
/// file is the committed one. Returns the folder.
fn install(root: &Path) -> Result<PathBuf> {
    let source = root.join("xtask/remark");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let tools = target.join("xtask-tools/remark");
    let lock = std::fs::read(source.join("package-lock.json"))
        .map_err(|e| Error::new(format!("xtask/remark/package-lock.json: {e}")))?;
    let installed = std::fs::read(tools.join("package-lock.json")).ok();
    if installed.as_deref() == Some(&lock[..]) && tools.join("node_modules").is_dir() {
        return Ok(tools);
    }
    std::fs::create_dir_all(&tools).map_err(|e| Error::new(format!("{}: {e}", tools.display())))?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), tools.join(file))
            .map_err(|e| Error::new(format!("copying {file}: {e}")))?;
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&tools);
    println!("==> links: {}", cmd::describe(&npm));
    cmd::run_timed(&mut npm)?;
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most lines the top-level README may have.
    const README_MAX_LINES: usize = 250;

    #[test]
    fn the_readme_stays_under_250_lines() {
        let root = cmd::workspace_root();
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
        let lines = readme.lines().count();
        assert!(
            lines <= README_MAX_LINES,
            "README.md has {lines} lines; keep it under {README_MAX_LINES}"
        );
    }

    #[test]
    fn every_page_is_listed() {
        let root = cmd::workspace_root();
        let pages = pages(&root);
        for page in ["README.md", "CHANGELOG.md", "docs/architecture.md"] {
            assert!(pages.contains(&root.join(page)), "{page} is not checked");
        }
        assert!(
            pages
                .iter()
                .any(|p| p.ends_with("crates/soe-node/README.md")),
            "the crates' READMEs are not checked"
        );
    }
}
