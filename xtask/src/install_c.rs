//! `cargo xtask install-c --prefix DIR`: the C library installed the way C libraries are taken
//! (zstd, libcurl), on Linux and other ELF platforms:
//!
//! ```text
//! DIR/include/soe.h
//! DIR/lib/libsoe.a
//! DIR/lib/libsoe.so.0.2.0            SONAME libsoe.so.0 (set by crates/soe-ffi/build.rs)
//! DIR/lib/libsoe.so.0 -> libsoe.so.0.2.0
//! DIR/lib/libsoe.so   -> libsoe.so.0
//! DIR/lib/pkgconfig/soe.pc
//! DIR/lib/cmake/soe/soeConfig.cmake          imported targets soe::soe (shared), soe::soe_static
//! DIR/lib/cmake/soe/soeConfigVersion.cmake
//! ```
//!
//! The libraries are built with the `c-release` profile (link-time optimisation across soe-ffi,
//! its dependencies and std, one codegen unit) unless `--profile` names another, and installed
//! with `strip --strip-debug` unless `--no-strip`. Each crate type is built alone
//! (`cargo rustc --crate-type`): rustc skips link-time optimisation for a build that also makes
//! the rlib, and the static library would keep all of std (23 MB instead of 3.4 MB).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::{Error, Result};

/// The profile the libraries are built with by default.
pub(crate) const DEFAULT_PROFILE: &str = "c-release";

/// What the static library needs from the system when linked into a program (rustc's
/// `--print native-static-libs` for Linux, duplicates removed).
const NATIVE_STATIC_LIBS: [&str; 7] = ["gcc_s", "util", "rt", "pthread", "m", "dl", "c"];

/// The library's version and ABI version, read from `crates/soe-ffi/src/version.rs` (which
/// build.rs checks against Cargo.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) patch: u32,
    pub(crate) abi: u32,
}

impl Version {
    /// Reads the constants of `version.rs`.
    pub(crate) fn read() -> Result<Self> {
        let path = cmd::workspace_root().join("crates/soe-ffi/src/version.rs");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
        Self::parse(&text)
            .ok_or_else(|| Error::new(format!("{}: a SOE_* constant is missing", path.display())))
    }

    fn parse(text: &str) -> Option<Self> {
        let constant = |name: &str| -> Option<u32> {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("pub const {name}: u32 = ")))?;
            line.rsplit_once("= ")?
                .1
                .trim_end_matches(';')
                .replace('_', "")
                .parse()
                .ok()
        };
        Some(Self {
            major: constant("SOE_VERSION_MAJOR")?,
            minor: constant("SOE_VERSION_MINOR")?,
            patch: constant("SOE_VERSION_PATCH")?,
            abi: constant("SOE_ABI_VERSION")?,
        })
    }

    /// `MAJOR.MINOR.PATCH`.
    pub(crate) fn string(self) -> String {
        format!("{}.{}.{}", self.major, self.minor, self.patch)
    }

    /// The SONAME: `libsoe.so.ABI`.
    pub(crate) fn soname(self) -> String {
        format!("libsoe.so.{}", self.abi)
    }

    /// The shared library's file name: `libsoe.so.MAJOR.MINOR.PATCH`.
    pub(crate) fn real_name(self) -> String {
        format!("libsoe.so.{}", self.string())
    }
}

/// What was installed, for the caller (c-abi, csharp) and the summary.
#[derive(Debug, Clone)]
pub(crate) struct Installed {
    pub(crate) prefix: PathBuf,
    pub(crate) version: Version,
    pub(crate) static_lib: PathBuf,
}

impl Installed {
    /// `DIR/lib`.
    pub(crate) fn libdir(&self) -> PathBuf {
        self.prefix.join("lib")
    }

    /// `DIR/lib/pkgconfig`, for `PKG_CONFIG_PATH`.
    pub(crate) fn pkgconfig_dir(&self) -> PathBuf {
        self.libdir().join("pkgconfig")
    }
}

/// Builds the libraries with `profile` and installs them, the header, the pkg-config file and
/// the CMake package under `prefix`.
pub(crate) fn run(prefix: &Path, profile: &str, strip: bool) -> Result<Installed> {
    let os = std::env::consts::OS;
    if matches!(os, "macos" | "ios" | "windows") {
        return Err(Error::new(format!(
            "install-c lays out an ELF shared library (SONAME, libsoe.so symlinks); {os} needs \
             its own naming (install name, DLL) that this step does not do yet"
        )));
    }
    let root = cmd::workspace_root();
    let prefix = absolute(prefix)?;
    let version = Version::read()?;
    for crate_type in ["staticlib", "cdylib"] {
        let mut build = cmd::cargo();
        build.args([
            "rustc",
            "--quiet",
            "-p",
            "soe-ffi",
            "--lib",
            "--profile",
            profile,
        ]);
        build.args(["--crate-type", crate_type]);
        println!("==> install-c: {}", cmd::describe(&build));
        let took = cmd::run_timed(&mut build)?;
        println!("    {crate_type} built in {}", cmd::format_duration(took));
    }
    let out = target_dir().join(profile_dir(profile));
    let include = prefix.join("include");
    let lib = prefix.join("lib");
    let pkgconfig = lib.join("pkgconfig");
    let cmake = lib.join("cmake/soe");
    for dir in [&include, &lib, &pkgconfig, &cmake] {
        std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    }
    copy(
        &root.join("crates/soe-ffi/include/soe.h"),
        &include.join("soe.h"),
    )?;
    let static_lib = lib.join("libsoe.a");
    copy(&out.join("libsoe_ffi.a"), &static_lib)?;
    let shared_lib = lib.join(version.real_name());
    copy(&out.join("libsoe_ffi.so"), &shared_lib)?;
    symlink(&version.real_name(), &lib.join(version.soname()))?;
    symlink(&version.soname(), &lib.join("libsoe.so"))?;
    if strip {
        strip_debug(&[&static_lib, &shared_lib])?;
    }
    write(&pkgconfig.join("soe.pc"), &pkg_config(&prefix, version))?;
    write(&cmake.join("soeConfig.cmake"), &cmake_config(version))?;
    write(
        &cmake.join("soeConfigVersion.cmake"),
        &cmake_config_version(version),
    )?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    println!(
        "==> install-c: soe {} (ABI {}) installed under {}: libsoe.a {} bytes, {} {} bytes \
         (SONAME {}), soe.h, soe.pc, soeConfig.cmake",
        version.string(),
        version.abi,
        prefix.display(),
        size(&static_lib),
        version.real_name(),
        size(&shared_lib),
        version.soname(),
    );
    Ok(Installed {
        prefix,
        version,
        static_lib,
    })
}

/// The target directory (`$CARGO_TARGET_DIR`, else `target/` in the workspace).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| {
            if p.is_absolute() {
                p
            } else {
                cmd::workspace_root().join(p)
            }
        })
        .unwrap_or_else(|| cmd::workspace_root().join("target"))
}

/// The directory under the target directory that a profile's artefacts go to.
fn profile_dir(profile: &str) -> &str {
    match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    // Replace, not overwrite in place: a running program may have the old file mapped.
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| Error::new(format!("copy {} to {}: {e}", from.display(), to.display())))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

#[cfg(unix)]
fn symlink(target: &str, link: &Path) -> Result<()> {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| Error::new(format!("symlink {} -> {target}: {e}", link.display())))
}

#[cfg(not(unix))]
fn symlink(target: &str, link: &Path) -> Result<()> {
    Err(Error::new(format!(
        "symlink {} -> {target}: not supported on this platform",
        link.display()
    )))
}

/// `strip --strip-debug` on each file: the debug information of std and of our crates, most
/// of the static library's weight. Symbols stay (a debugger and valgrind still name
/// functions).
fn strip_debug(files: &[&Path]) -> Result<()> {
    let strip = std::env::var("STRIP").unwrap_or_else(|_| "strip".into());
    if !cmd::program_runs(&strip) {
        println!("==> install-c: `{strip}` not found: the libraries keep their debug information");
        return Ok(());
    }
    let mut c = Command::new(&strip);
    c.arg("--strip-debug").args(files);
    println!("==> install-c: {}", cmd::describe(&c));
    cmd::run_timed(&mut c).map(|_| ())
}

/// The pkg-config file: `pkg-config --cflags --libs soe` links the shared library;
/// `--static` adds what the static library needs.
pub(crate) fn pkg_config(prefix: &Path, version: Version) -> String {
    let mut pc = String::new();
    let _ = writeln!(pc, "prefix={}", prefix.display());
    pc.push_str(
        "includedir=${prefix}/include\n\
         libdir=${prefix}/lib\n\
         \n\
         Name: soe\n\
         Description: SOE protocol (v3) endpoint, sans-I/O, for C, C++ and C# hosts (soe-ffi)\n",
    );
    let _ = writeln!(pc, "Version: {}", version.string());
    pc.push_str("Cflags: -I${includedir}\nLibs: -L${libdir} -lsoe\n");
    let private: Vec<String> = NATIVE_STATIC_LIBS
        .iter()
        .map(|l| format!("-l{l}"))
        .collect();
    let _ = writeln!(pc, "Libs.private: {}", private.join(" "));
    pc
}

/// The CMake package: relocatable (paths from the file's own place), two imported targets.
pub(crate) fn cmake_config(version: Version) -> String {
    let libs: Vec<&str> = NATIVE_STATIC_LIBS
        .iter()
        .copied()
        .filter(|l| !matches!(*l, "pthread" | "dl" | "c"))
        .collect();
    format!(
        r#"# soe {v} (ABI {abi}): the SOE protocol endpoint's C library (soe-ffi), installed by
# `cargo xtask install-c`. Generated; do not edit.
#
#   find_package(soe 0.{minor} REQUIRED)
#   target_link_libraries(my_server PRIVATE soe::soe)         # libsoe.so.{abi}
#   target_link_libraries(my_server PRIVATE soe::soe_static)  # libsoe.a
#
# Sets soe_VERSION and SOE_ABI_VERSION ({abi}).

include(CMakeFindDependencyMacro)
find_dependency(Threads)

get_filename_component(_soe_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
set(SOE_ABI_VERSION {abi})

if(NOT TARGET soe::soe)
  add_library(soe::soe SHARED IMPORTED)
  set_target_properties(soe::soe PROPERTIES
    IMPORTED_LOCATION "${{_soe_prefix}}/lib/{real}"
    IMPORTED_SONAME "{soname}"
    INTERFACE_INCLUDE_DIRECTORIES "${{_soe_prefix}}/include")
endif()

if(NOT TARGET soe::soe_static)
  add_library(soe::soe_static STATIC IMPORTED)
  set_target_properties(soe::soe_static PROPERTIES
    IMPORTED_LOCATION "${{_soe_prefix}}/lib/libsoe.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${{_soe_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${{CMAKE_DL_LIBS}};{libs}")
endif()

unset(_soe_prefix)
"#,
        v = version.string(),
        abi = version.abi,
        minor = version.minor,
        real = version.real_name(),
        soname = version.soname(),
        libs = libs.join(";"),
    )
}

/// The version file: a request is met by this library when it asks for no newer a version in
/// the same ABI series (before 1.0, the same `0.MINOR`; from 1.0, the same major), for the
/// same pointer size.
pub(crate) fn cmake_config_version(version: Version) -> String {
    format!(
        r#"# The version check of soe's CMake package (see soeConfig.cmake). Generated.
set(PACKAGE_VERSION "{v}")
if(CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  set(PACKAGE_VERSION "{v} (64-bit)")
  return()
endif()
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif({major} EQUAL 0 AND NOT (PACKAGE_FIND_VERSION_MAJOR EQUAL 0 AND PACKAGE_FIND_VERSION_MINOR EQUAL {minor}))
  # Before 1.0, each minor version is its own ABI series.
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif(NOT {major} EQUAL 0 AND NOT PACKAGE_FIND_VERSION_MAJOR EQUAL {major})
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
"#,
        v = version.string(),
        major = version.major,
        minor = version.minor,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_version_rs() {
        let v = Version::read().unwrap();
        let text = std::fs::read_to_string(cmd::workspace_root().join("crates/soe-ffi/Cargo.toml"))
            .unwrap();
        assert!(
            text.contains(&format!("\nversion = \"{}\"", v.string())),
            "crates/soe-ffi/Cargo.toml's version is not {}",
            v.string()
        );
        assert_eq!(v.soname(), format!("libsoe.so.{}", v.abi));
        assert!(v.real_name().starts_with("libsoe.so."));
        assert_eq!(
            Version::parse(
                "pub const SOE_VERSION_MAJOR: u32 = 1;\npub const SOE_VERSION_MINOR: u32 = 10;\npub const SOE_VERSION_PATCH: u32 = 3;\npub const SOE_ABI_VERSION: u32 = 4;"
            ),
            Some(Version {
                major: 1,
                minor: 10,
                patch: 3,
                abi: 4
            })
        );
        assert_eq!(
            Version::parse("pub const SOE_VERSION_MAJOR: u32 = 1;"),
            None
        );
    }

    #[test]
    fn the_pkg_config_file_names_the_prefix_the_version_and_the_static_needs() {
        let v = Version {
            major: 0,
            minor: 2,
            patch: 0,
            abi: 0,
        };
        let pc = pkg_config(Path::new("/opt/soe"), v);
        assert!(pc.starts_with("prefix=/opt/soe\n"), "{pc}");
        assert!(pc.contains("\nVersion: 0.2.0\n"));
        assert!(pc.contains("\nLibs: -L${libdir} -lsoe\n"));
        assert!(pc.contains("\nLibs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc\n"));
        assert!(pc.contains("\nCflags: -I${includedir}\n"));
    }

    #[test]
    fn the_cmake_package_names_both_targets_and_checks_the_abi_series() {
        let v = Version {
            major: 0,
            minor: 2,
            patch: 1,
            abi: 0,
        };
        let config = cmake_config(v);
        assert!(config.contains("add_library(soe::soe SHARED IMPORTED)"));
        assert!(config.contains("/lib/libsoe.so.0.2.1\""));
        assert!(config.contains("IMPORTED_SONAME \"libsoe.so.0\""));
        assert!(config.contains("add_library(soe::soe_static STATIC IMPORTED)"));
        let version = cmake_config_version(v);
        assert!(version.contains("set(PACKAGE_VERSION \"0.2.1\")"));
        assert!(version.contains("PACKAGE_FIND_VERSION_MINOR EQUAL 2"));
    }
}
