//! The fallback of the `msrv` step when the MSRV toolchain is not installed: compare the
//! `rust-version` that every crate the library crates build on declares with ours.
//!
//! This is no substitute for compiling with the old toolchain (a crate may use newer features
//! without declaring it), but it catches the common break: a dependency bump whose own MSRV is
//! newer than the one we claim.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use crate::cmd;
use crate::{Error, Result};

/// The parts of `cargo metadata --format-version 1` this check reads.
#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    resolve: Option<Resolve>,
}

/// One package of the dependency graph.
#[derive(Debug, Deserialize)]
struct Package {
    id: String,
    name: String,
    version: String,
    rust_version: Option<String>,
}

/// The resolved graph.
#[derive(Debug, Deserialize)]
struct Resolve {
    nodes: Vec<Node>,
}

/// One package's resolved dependencies.
#[derive(Debug, Deserialize)]
struct Node {
    id: String,
    deps: Vec<NodeDep>,
}

/// One edge, with the kinds (normal, build, dev) that bring it in.
#[derive(Debug, Deserialize)]
struct NodeDep {
    pkg: String,
    dep_kinds: Vec<DepKind>,
}

/// `kind` is `null` for a normal dependency, `"build"` or `"dev"` otherwise.
#[derive(Debug, Deserialize)]
struct DepKind {
    kind: Option<String>,
}

/// The crates, among those `roots` build on (normal and build dependencies, every platform),
/// whose declared `rust-version` is newer than `msrv`, as `name version (rust-version)`.
pub(crate) fn newer_than(roots: &[&str], msrv: &str) -> Result<Vec<String>> {
    let mut command = cmd::cargo();
    command.args(["metadata", "--format-version", "1", "--locked"]);
    let text = cmd::output(&mut command)?;
    let meta: Metadata = serde_json::from_str(&text)
        .map_err(|err| Error::new(format!("cannot read `cargo metadata` output: {err}")))?;
    Ok(offenders(&meta, roots, msrv))
}

/// The graph walk of [`newer_than`].
fn offenders(meta: &Metadata, roots: &[&str], msrv: &str) -> Vec<String> {
    let packages: HashMap<&str, &Package> =
        meta.packages.iter().map(|p| (p.id.as_str(), p)).collect();
    let edges: HashMap<&str, &[NodeDep]> = meta
        .resolve
        .iter()
        .flat_map(|r| &r.nodes)
        .map(|n| (n.id.as_str(), n.deps.as_slice()))
        .collect();
    let mut stack: Vec<&str> = meta
        .packages
        .iter()
        .filter(|p| roots.contains(&p.name.as_str()))
        .map(|p| p.id.as_str())
        .collect();
    let mut seen: HashSet<&str> = stack.iter().copied().collect();
    while let Some(id) = stack.pop() {
        for dep in edges.get(id).copied().unwrap_or_default() {
            let built = dep
                .dep_kinds
                .iter()
                .any(|k| k.kind.as_deref() != Some("dev"));
            if built && seen.insert(dep.pkg.as_str()) {
                stack.push(dep.pkg.as_str());
            }
        }
    }
    let limit = version_key(msrv);
    let mut found: Vec<String> = seen
        .iter()
        .filter_map(|id| packages.get(id))
        .filter_map(|p| {
            let declared = p.rust_version.as_deref()?;
            (version_key(declared) > limit)
                .then(|| format!("{} {} (rust-version {declared})", p.name, p.version))
        })
        .collect();
    found.sort();
    found
}

/// `1.85` / `1.85.1` as comparable numbers; missing parts are 0, unreadable ones too.
fn version_key(version: &str) -> [u64; 3] {
    let mut key = [0; 3];
    for (slot, part) in key.iter_mut().zip(version.split('.')) {
        *slot = part.parse().unwrap_or(0);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        assert!(version_key("1.88") > version_key("1.85"));
        assert!(version_key("1.85.1") > version_key("1.85"));
        assert_eq!(version_key("1.85.0"), version_key("1.85"));
        assert!(version_key("1.100") > version_key("1.85"));
    }

    #[test]
    fn only_built_dependencies_of_the_roots_count() {
        let meta: Metadata = serde_json::from_str(
            r#"{
              "packages": [
                {"id": "lib", "name": "lib", "version": "0.1.0", "rust_version": "1.85"},
                {"id": "new", "name": "new", "version": "2.0.0", "rust_version": "1.90"},
                {"id": "old", "name": "old", "version": "1.0.0", "rust_version": "1.60"},
                {"id": "devonly", "name": "devonly", "version": "1.0.0", "rust_version": "1.99"},
                {"id": "other", "name": "other", "version": "1.0.0", "rust_version": "1.99"}
              ],
              "resolve": {"nodes": [
                {"id": "lib", "deps": [
                  {"pkg": "old", "dep_kinds": [{"kind": null}]},
                  {"pkg": "devonly", "dep_kinds": [{"kind": "dev"}]}
                ]},
                {"id": "old", "deps": [{"pkg": "new", "dep_kinds": [{"kind": "build"}]}]},
                {"id": "new", "deps": []},
                {"id": "devonly", "deps": []},
                {"id": "other", "deps": []}
              ]}
            }"#,
        )
        .unwrap();
        assert_eq!(
            offenders(&meta, &["lib"], "1.85"),
            ["new 2.0.0 (rust-version 1.90)"]
        );
    }
}
