//! Names the shared library after its ABI version (the SONAME `libsoe.so.N` on ELF platforms),
//! and refuses to build when `src/version.rs`, which soe.h's version macros come from, is not
//! the version in Cargo.toml.

#[allow(dead_code, unreachable_pub)]
mod version {
    include!("src/version.rs");
}

fn main() {
    println!("cargo:rerun-if-changed=src/version.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let cargo = |part: &str| -> u32 {
        std::env::var(format!("CARGO_PKG_VERSION_{part}"))
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(u32::MAX)
    };
    let (major, minor, patch) = (cargo("MAJOR"), cargo("MINOR"), cargo("PATCH"));
    let ours = (
        version::SOE_VERSION_MAJOR,
        version::SOE_VERSION_MINOR,
        version::SOE_VERSION_PATCH,
    );
    assert!(
        ours == (major, minor, patch)
            && version::SOE_VERSION_NUMBER == major * 10_000 + minor * 100 + patch,
        "src/version.rs says {ours:?} (number {}) but Cargo.toml says {major}.{minor}.{patch}: \
         update src/version.rs (and regenerate soe.h: SOE_BLESS=1 cargo test -p soe-ffi \
         --test header)",
        version::SOE_VERSION_NUMBER,
    );
    // ELF platforms: the SONAME carries the ABI version, so a program linked against this
    // library records `libsoe.so.N` and never loads an incompatible one. (Apple's install name
    // and Windows' DLL naming are not set here.)
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let family = std::env::var("CARGO_CFG_TARGET_FAMILY").unwrap_or_default();
    if family == "unix"
        && !matches!(
            os.as_str(),
            "macos" | "ios" | "tvos" | "watchos" | "visionos"
        )
    {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,-soname,libsoe.so.{}",
            version::SOE_ABI_VERSION
        );
    }
}
