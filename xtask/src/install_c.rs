//! `cargo xtask install-c --prefix DIR`: the C library installed the way C libraries are taken
//! (zstd, libcurl), on Linux and other ELF platforms:
//!
//! ```text
//! DIR/include/soe.h
//! DIR/lib/libsoe.a                  one prelinked object; only the soe_* symbols are global
//! DIR/lib/libsoe.so.0.3.0            SONAME libsoe.so.1 (set by crates/soe-ffi/build.rs)
//! DIR/lib/libsoe.so.1 -> libsoe.so.0.3.0
//! DIR/lib/libsoe.so   -> libsoe.so.1
//! DIR/lib/pkgconfig/soe.pc           shared (`--static`: a `-static` program)
//! DIR/lib/pkgconfig/soe-static.pc    libsoe.a into an otherwise dynamic program
//! DIR/lib/cmake/soe/soeConfig.cmake          imported targets soe::soe (shared), soe::soe_static
//! DIR/lib/cmake/soe/soeConfigVersion.cmake
//! ```
//!
//! The prefix is relocatable: the pkg-config files name it as `${pcfiledir}/../..` and the
//! CMake package from its own place, so a prefix copied or moved elsewhere still works. The
//! build machine's paths stay out of the libraries (`--remap-path-prefix` for the workspace and
//! the cargo home).
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
/// `--print native-static-libs` for Linux, duplicates removed), but `-lgcc_s` and `-lc`: the
/// compiler driver links the unwinder itself (libgcc_s, or libgcc_eh under `-static`, where a
/// `-lgcc_s` fails) and libc.
const NATIVE_STATIC_LIBS: [&str; 5] = ["util", "rt", "pthread", "m", "dl"];

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

    /// Moves the installed prefix to `to` (as a packager or a user who copies a prefix does):
    /// what was installed, at its new place. Nothing in the prefix names its old place.
    pub(crate) fn moved_to(self, to: &Path) -> Result<Self> {
        let _ = std::fs::remove_dir_all(to);
        std::fs::rename(&self.prefix, to).map_err(|e| {
            Error::new(format!(
                "move {} to {}: {e}",
                self.prefix.display(),
                to.display()
            ))
        })?;
        let prefix = absolute(to)?;
        println!("==> install-c: prefix moved to {}", prefix.display());
        Ok(Self {
            static_lib: prefix.join("lib/libsoe.a"),
            prefix,
            version: self.version,
        })
    }

    /// The shared library's real file.
    pub(crate) fn shared_lib(&self) -> PathBuf {
        self.libdir().join(self.version.real_name())
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
    let rustflags = remap_rustflags(&root);
    for crate_type in ["staticlib", "cdylib"] {
        let mut build = cmd::cargo();
        build.env("RUSTFLAGS", &rustflags);
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
    prelink_static(&out.join("libsoe_ffi.a"), &static_lib)?;
    let shared_lib = lib.join(version.real_name());
    copy(&out.join("libsoe_ffi.so"), &shared_lib)?;
    symlink(&version.real_name(), &lib.join(version.soname()))?;
    symlink(&version.soname(), &lib.join("libsoe.so"))?;
    if strip {
        strip_debug(&[&static_lib, &shared_lib])?;
    }
    write(&pkgconfig.join("soe.pc"), &pkg_config(version))?;
    write(
        &pkgconfig.join("soe-static.pc"),
        &pkg_config_static(version),
    )?;
    write(&cmake.join("soeConfig.cmake"), &cmake_config(version))?;
    write(
        &cmake.join("soeConfigVersion.cmake"),
        &cmake_config_version(version),
    )?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    println!(
        "==> install-c: soe {} (ABI {}) installed under {}: libsoe.a {} bytes, {} {} bytes \
         (SONAME {}), soe.h, soe.pc, soe-static.pc, soeConfig.cmake",
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

/// The start of both pkg-config files: a relocatable prefix (the `.pc` file's own directory,
/// two levels up), the name and the version.
fn pc_head(name: &str, what: &str, version: Version) -> String {
    format!(
        "prefix=${{pcfiledir}}/../..\n\
         includedir=${{prefix}}/include\n\
         libdir=${{prefix}}/lib\n\
         \n\
         Name: {name}\n\
         Description: SOE protocol (v3) endpoint, sans-I/O, for C, C++ and C# hosts (soe-ffi){what}\n\
         Version: {}\n\
         Cflags: -I${{includedir}}\n",
        version.string()
    )
}

/// `-lutil -lrt ...`: what the static library needs from the system.
fn native_libs() -> String {
    NATIVE_STATIC_LIBS
        .iter()
        .map(|l| format!("-l{l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `soe.pc`: `pkg-config --cflags --libs soe` links the shared library; `--static` adds what
/// the static library needs, for a program linked with `-static` (where `-lsoe` can only be
/// `libsoe.a`).
pub(crate) fn pkg_config(version: Version) -> String {
    let mut pc = pc_head("soe", "", version);
    pc.push_str("Libs: -L${libdir} -lsoe\n");
    let _ = writeln!(pc, "Libs.private: {}", native_libs());
    pc
}

/// `soe-static.pc`: `pkg-config --cflags --libs soe-static` links `libsoe.a` (named by its
/// path, so the shared library beside it cannot be picked) into an otherwise dynamic program.
pub(crate) fn pkg_config_static(version: Version) -> String {
    let mut pc = pc_head("soe-static", ", static library", version);
    let _ = writeln!(pc, "Libs: ${{libdir}}/libsoe.a {}", native_libs());
    pc
}

/// `RUSTFLAGS` for the library's build: the caller's, then `--remap-path-prefix` for the
/// workspace (`/soe`) and the cargo home (`/cargo`), so that no path of the build machine (in
/// panic locations, which the stripped libraries keep) is in the binaries.
fn remap_rustflags(root: &Path) -> String {
    let home = cmd::cargo_home();
    let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    let _ = write!(flags, " --remap-path-prefix={}=/soe", root.display());
    if let Some(home) = home {
        let _ = write!(flags, " --remap-path-prefix={}=/cargo", home.display());
    }
    flags.trim().to_owned()
}

/// Makes `libsoe.a` from rustc's static library: the objects a program of the `soe_*`
/// functions needs, linked into one relocatable object (`ld -r`), whose symbols are then made
/// local but the `soe_*` ones (`objcopy --keep-global-symbols`). A program that links this
/// and another Rust static library then meets no second `rust_eh_personality`, `__rust_*` or
/// compiler-rt helper (`__udivti3`...), and none of std's. Without `ld`, `objcopy` and `nm`, the archive is
/// copied as rustc made it, with a loud word (an error under `CI=true`).
fn prelink_static(from: &Path, to: &Path) -> Result<()> {
    let tools = ["ld", "objcopy", "nm", "ar"];
    if let Some(missing) = tools.iter().find(|t| !cmd::program_runs(t)) {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            return Err(Error::new(format!(
                "{missing} is not installed, and CI=true requires it to hide the Rust runtime \
                 symbols of libsoe.a"
            )));
        }
        println!(
            "==> install-c: {missing} is not installed: libsoe.a keeps the Rust runtime's global \
             symbols (see docs/c-api.md)"
        );
        return copy(from, to);
    }
    let exported = soe_symbols(from)?;
    let dir = to.with_extension("prelink");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let (object, list) = (dir.join("soe.o"), dir.join("soe.syms"));
    write(&list, &(exported.join("\n") + "\n"))?;
    let mut ld = Command::new("ld");
    ld.arg("-r").arg("-o").arg(&object);
    for symbol in &exported {
        ld.arg("-u").arg(symbol);
    }
    ld.arg(from);
    cmd::run_timed(&mut ld)?;
    let mut objcopy = Command::new("objcopy");
    // rustc's LTO object also carries its LLVM bitcode (`.llvmbc`, `.llvmcmd`), which C
    // toolchains' LTO plugins try and fail to read (`nm`, `ar` then see no symbols).
    objcopy
        .arg(format!("--keep-global-symbols={}", list.display()))
        .args(["--remove-section=.llvmbc", "--remove-section=.llvmcmd"])
        .arg(&object);
    cmd::run_timed(&mut objcopy)?;
    let _ = std::fs::remove_file(to);
    let mut ar = Command::new("ar");
    ar.arg("rcs").arg(to).arg(&object);
    cmd::run_timed(&mut ar)?;
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "==> install-c: libsoe.a prelinked, {} soe_* symbols global, the rest local",
        exported.len()
    );
    Ok(())
}

/// The `soe_*` functions an archive defines (`nm --defined-only -g`).
fn soe_symbols(archive: &Path) -> Result<Vec<String>> {
    let listing = crate::c_abi_install::nm_globals(archive)?;
    let mut symbols: Vec<String> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| s.starts_with("soe_"))
        .map(str::to_owned)
        .collect();
    symbols.sort();
    symbols.dedup();
    if symbols.is_empty() {
        return Err(Error::new(format!(
            "{} defines no soe_* symbol",
            archive.display()
        )));
    }
    Ok(symbols)
}

/// The CMake package: relocatable (paths from the file's own place), two imported targets.
pub(crate) fn cmake_config(version: Version) -> String {
    let libs: Vec<&str> = NATIVE_STATIC_LIBS
        .iter()
        .copied()
        .filter(|l| !matches!(*l, "pthread" | "dl"))
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
    fn the_pkg_config_files_are_relocatable_and_link_statically_without_gcc_s() {
        let v = Version {
            major: 0,
            minor: 3,
            patch: 0,
            abi: 1,
        };
        let pc = pkg_config(v);
        assert!(pc.starts_with("prefix=${pcfiledir}/../..\n"), "{pc}");
        assert!(pc.contains("\nVersion: 0.3.0\n"));
        assert!(pc.contains("\nLibs: -L${libdir} -lsoe\n"));
        assert!(
            pc.contains("\nLibs.private: -lutil -lrt -lpthread -lm -ldl\n"),
            "{pc}"
        );
        assert!(pc.contains("\nCflags: -I${includedir}\n"));
        let st = pkg_config_static(v);
        assert!(st.starts_with("prefix=${pcfiledir}/../..\n"), "{st}");
        assert!(st.contains("\nName: soe-static\n"));
        assert!(st.contains("\nLibs: ${libdir}/libsoe.a -lutil"), "{st}");
        for text in [&pc, &st] {
            assert!(!text.contains("gcc_s") && !text.contains("/work"), "{text}");
        }
    }

    #[test]
    fn the_build_remaps_the_workspace_and_the_cargo_home() {
        let flags = remap_rustflags(Path::new("/build/here"));
        assert!(
            flags.contains("--remap-path-prefix=/build/here=/soe"),
            "{flags}"
        );
        assert!(flags.contains("=/cargo"), "{flags}");
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
