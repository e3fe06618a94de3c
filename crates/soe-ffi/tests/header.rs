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
