//! The committed `include/soe.h` is what cbindgen generates from the source today.

use std::path::Path;

#[test]
fn the_committed_header_matches_the_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate")
        .write(&mut generated);
    let path = dir.join("include/soe.h");
    if std::env::var_os("SOE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/soe.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/soe.h is stale: regenerate it with \
         `SOE_BLESS=1 cargo test -p soe-ffi --test header` and commit it"
    );
}

/// Every macro `include/soe.h` defines is used in `tests/c/macros.c`, and that file compiles
/// against the header with `-Woverflow -Werror`: a constant evaluated in `int` that overflows
/// (`SOE_MAX_DURATION_MS` was `(((365 * 24) * 3600) * 1000)`) or a negative macro without
/// parentheses (`SOE_NEVER` was `-1`, so `x-SOE_NEVER` was a decrement) fails here. `cargo
/// xtask c-abi` builds and runs the same file as C11 and C++17 against the installed header.
#[test]
fn every_macro_of_the_header_compiles_where_it_is_used() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(dir.join("include/soe.h")).expect("include/soe.h");
    let source = dir.join("tests/c/macros.c");
    let uses = std::fs::read_to_string(&source).expect("tests/c/macros.c");
    let missing: Vec<&str> = header
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split([' ', '(']).next())
        .filter(|name| !uses.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "tests/c/macros.c does not use {missing:?}: add each to it"
    );
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = std::process::Command::new(&compiler)
        .args([
            "-std=c11",
            "-fsyntax-only",
            "-Wall",
            "-Wextra",
            "-Woverflow",
            "-Werror",
        ])
        .arg(format!("-I{}", dir.join("include").display()))
        .arg(&source)
        .output();
    match out {
        Ok(out) => assert!(
            out.status.success(),
            "{compiler} rejects tests/c/macros.c with include/soe.h:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if std::env::var_os("CI").is_none() => {
            println!("SKIPPED the C compile of tests/c/macros.c: no C compiler ({compiler}: {e})");
        }
        Err(e) => panic!("no C compiler ({compiler}: {e}); CI needs one"),
    }
}
