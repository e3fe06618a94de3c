//! `cargo xtask cross`: the release artifacts of every platform we ship, built on this Linux
//! x86-64 machine, laid out under `target/cross/<triple>/` and checked there:
//!
//! ```text
//! target/cross/x86_64-pc-windows-gnu/    soe.exe  soe.dll  soe.dll.a  soe.lib  libsoe.a  soe.h
//!                                        soe-node.win32-x64.node
//! target/cross/aarch64-unknown-linux-gnu/ soe  libsoe.so.X.Y.Z  libsoe.a  soe.h
//!                                        soe-node.linux-arm64-gnu.node
//! target/cross/x86_64-unknown-linux-musl/ soe (static)  libsoe.a  soe.h
//!                                        soe-node.linux-x64-musl.node
//! target/cross/x86_64-apple-darwin/      soe  libsoe.dylib  libsoe.a  soe.h
//! target/cross/aarch64-apple-darwin/       soe-node.darwin-x64.node / darwin-arm64.node
//! ```
//!
//! cargo's own output goes to one target directory of its own, `target/cross/build`.
//!
//! Each target is built with rustup's standard library where rustup has the target installed,
//! and otherwise with Debian's Rust (`rustc-web`, `cargo-web`, `rust-web-src`) building the
//! standard library from source (`-Zbuild-std`, allowed on a stable compiler by
//! `RUSTC_BOOTSTRAP=1`). What each target needs (Debian's Rust, mingw-w64, the aarch64 cross
//! compiler, musl-tools, zig and cargo-zigbuild for macOS) is installed when missing, as `.ci/run`
//! installs things: `cross_tools`.
//!
//! The checks read each file's format, the libraries it needs and the symbols it exports with
//! LLVM's tools (`llvm-readobj`, `llvm-nm`): the Windows DLLs import no MinGW runtime DLL and the
//! addon nothing from `node.exe`; the musl `soe` is static and runs here, the musl addon needs
//! musl's libc only; the arm64 `soe` runs under qemu-user; the macOS files are Mach-O for their
//! CPU. Every addon exports `napi_register_module_v1`, every C library the `soe_*` functions.
//! `cargo xtask wine` runs the Windows ones. Each target's npm platform package is staged in
//! `crates/soe-node/npm/<platform>/` (`scripts/stage-platform.js`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::cmd;
use crate::cross_tools::{self, Toolchain};
use crate::install_c::{self, Version};
use crate::{Error, Result};

/// A target of `cargo xtask cross --target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Pick {
    /// Windows x86-64 (`x86_64-pc-windows-gnu`, MinGW-w64).
    Win,
    /// Linux arm64, glibc (`aarch64-unknown-linux-gnu`).
    LinuxArm64,
    /// Linux x86-64, musl (`x86_64-unknown-linux-musl`): Alpine.
    LinuxMusl,
    /// macOS x86-64 and arm64 (built with zig as the linker; not run here).
    Macos,
    /// macOS x86-64 alone.
    MacosX64,
    /// macOS arm64 alone.
    MacosArm64,
    /// Every target above.
    All,
}

impl Pick {
    /// The targets this pick stands for.
    pub(crate) fn targets(self) -> &'static [Target] {
        match self {
            Self::Win => &[Target::Win],
            Self::LinuxArm64 => &[Target::LinuxArm64],
            Self::LinuxMusl => &[Target::LinuxMusl],
            Self::Macos => &[Target::MacosX64, Target::MacosArm64],
            Self::MacosX64 => &[Target::MacosX64],
            Self::MacosArm64 => &[Target::MacosArm64],
            Self::All => &Target::ALL,
        }
    }
}

/// A platform we build for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Win,
    LinuxArm64,
    LinuxMusl,
    MacosX64,
    MacosArm64,
}

/// The operating system family of a target, which decides file names and checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Os {
    Windows,
    Linux,
    Macos,
}

impl Target {
    /// Every target, in build order.
    pub(crate) const ALL: [Self; 5] = [
        Self::Win,
        Self::LinuxMusl,
        Self::LinuxArm64,
        Self::MacosX64,
        Self::MacosArm64,
    ];

    /// The Rust target triple.
    pub(crate) const fn triple(self) -> &'static str {
        match self {
            Self::Win => "x86_64-pc-windows-gnu",
            Self::LinuxArm64 => "aarch64-unknown-linux-gnu",
            Self::LinuxMusl => "x86_64-unknown-linux-musl",
            Self::MacosX64 => "x86_64-apple-darwin",
            Self::MacosArm64 => "aarch64-apple-darwin",
        }
    }

    pub(crate) const fn os(self) -> Os {
        match self {
            Self::Win => Os::Windows,
            Self::LinuxArm64 | Self::LinuxMusl => Os::Linux,
            Self::MacosX64 | Self::MacosArm64 => Os::Macos,
        }
    }

    /// The npm platform name (`soe-node-<name>`, `crates/soe-node/scripts/platforms.js`).
    pub(crate) const fn npm(self) -> &'static str {
        match self {
            Self::Win => "win32-x64",
            Self::LinuxArm64 => "linux-arm64-gnu",
            Self::LinuxMusl => "linux-x64-musl",
            Self::MacosX64 => "darwin-x64",
            Self::MacosArm64 => "darwin-arm64",
        }
    }

    /// The .NET runtime identifier (`runtimes/<rid>/native/` in the NuGet package).
    pub(crate) const fn rid(self) -> &'static str {
        match self {
            Self::Win => "win-x64",
            Self::LinuxArm64 => "linux-arm64",
            Self::LinuxMusl => "linux-musl-x64",
            Self::MacosX64 => "osx-x64",
            Self::MacosArm64 => "osx-arm64",
        }
    }

    /// What `llvm-readobj --file-headers` calls the format of this target's files.
    const fn format(self) -> &'static str {
        match self {
            Self::Win => "COFF-x86-64",
            Self::LinuxArm64 => "elf64-littleaarch64",
            Self::LinuxMusl => "elf64-x86-64",
            Self::MacosX64 => "Mach-O 64-bit x86-64",
            Self::MacosArm64 => "Mach-O arm64",
        }
    }

    /// The folder the artifacts are laid out in.
    pub(crate) fn dist(self) -> PathBuf {
        root().join(self.triple())
    }

    /// The `soe` tool's file name.
    pub(crate) const fn soe_exe(self) -> &'static str {
        if matches!(self.os(), Os::Windows) {
            "soe.exe"
        } else {
            "soe"
        }
    }

    /// The shared C library's file name as shipped (NuGet's `runtimes/<rid>/native/` name is
    /// [`Self::native_name`]).
    pub(crate) fn shared_lib(self, version: Version) -> String {
        match self.os() {
            Os::Windows => "soe.dll".into(),
            Os::Linux => version.real_name(),
            Os::Macos => "libsoe.dylib".into(),
        }
    }

    /// The name the C# binding's `[DllImport("soe")]` finds on this platform.
    pub(crate) const fn native_name(self) -> &'static str {
        match self.os() {
            Os::Windows => "soe.dll",
            Os::Linux => "libsoe.so",
            Os::Macos => "libsoe.dylib",
        }
    }

    /// The Node addon's file name (as in its npm platform package).
    pub(crate) fn addon(self) -> String {
        format!("soe-node.{}.node", self.npm())
    }
}

/// `target/cross`: cargo's build directory and the artifacts.
pub(crate) fn root() -> PathBuf {
    install_c::target_dir().join("cross")
}

/// cargo's target directory for every cross build: `target/cross/build`, or the folder named
/// by `SOE_CROSS_BUILD_DIR` (to build two targets at once: cargo locks its target directory).
pub(crate) fn build_dir() -> PathBuf {
    std::env::var_os("SOE_CROSS_BUILD_DIR").map_or_else(|| root().join("build"), PathBuf::from)
}

/// The targets named by `picks` (all of them when none), each once, in build order.
pub(crate) fn chosen(picks: &[Pick]) -> Vec<Target> {
    let picks = if picks.is_empty() {
        &[Pick::All][..]
    } else {
        picks
    };
    Target::ALL
        .into_iter()
        .filter(|t| picks.iter().any(|p| p.targets().contains(t)))
        .collect()
}

/// Builds and checks the artifacts of each target in `picks` (with `tests`, also runs the
/// test suites of soe-session and soe-runtime where they can run:
/// [`crate::cross_run::run_tests`]); every target is tried, and the run fails at the end if any
/// failed.
pub(crate) fn run(picks: &[Pick], tests: bool) -> Result<()> {
    let started = Instant::now();
    let mut failed = Vec::new();
    let mut summary = Vec::new();
    for target in chosen(picks) {
        let step = Instant::now();
        let outcome = build(target)
            .and_then(|()| check(target))
            .and_then(|()| stage_npm(target))
            .and_then(|()| {
                if tests {
                    crate::cross_run::run_tests(target)
                } else {
                    Ok(())
                }
            });
        let took = cmd::format_duration(step.elapsed());
        match outcome {
            Ok(()) => summary.push(format!("  ok      {:<28} {took}", target.triple())),
            Err(e) => {
                summary.push(format!("  FAILED  {:<28} {took}: {e}", target.triple()));
                failed.push(target.triple());
            }
        }
    }
    println!("\ncross summary (artifacts in {}):", root().display());
    for line in &summary {
        println!("{line}");
    }
    println!("  total {}", cmd::format_duration(started.elapsed()));
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::new(format!("cross: {} failed", failed.join(", "))))
    }
}

/// Builds `soe`, the C library and the addon for `target` and lays them out in its folder.
pub(crate) fn build(target: Target) -> Result<()> {
    let toolchain = cross_tools::prepare(target)?;
    let dist = target.dist();
    std::fs::create_dir_all(&dist).map_err(|e| Error::new(format!("{}: {e}", dist.display())))?;
    println!(
        "==> cross {}: {} ({})",
        target.triple(),
        toolchain.describe(),
        dist.display()
    );
    let mut errors = Vec::new();
    let mut step = |what: &str, result: Result<()>| {
        if let Err(e) = result {
            println!("==> cross {}: {what} FAILED: {e}", target.triple());
            errors.push(format!("{what}: {e}"));
        }
    };
    step("soe", build_soe(target, &toolchain));
    step("C library", build_c_library(target, &toolchain));
    step("Node addon", build_addon(target, &toolchain));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::new(errors.join("; ")))
    }
}

/// The C library alone (`cargo xtask install-c --target`).
pub(crate) fn build_c_library_only(target: Target) -> Result<()> {
    let toolchain = cross_tools::prepare(target)?;
    let dist = target.dist();
    std::fs::create_dir_all(&dist).map_err(|e| Error::new(format!("{}: {e}", dist.display())))?;
    build_c_library(target, &toolchain)
}

/// The release build of the `soe` tool. On musl it is a static executable that is not
/// position-independent (`-C relocation-model=static`, the tool's own crate only): musl-gcc's
/// specs know no `-static-pie`, and rustc's default static PIE came out with musl's dynamic
/// loader (`/lib/ld-musl-x86_64.so.1`) as its interpreter, which a glibc system lacks.
fn build_soe(target: Target, toolchain: &Toolchain) -> Result<()> {
    let mut build = if target == Target::LinuxMusl {
        toolchain.cargo(target, "rustc")
    } else {
        toolchain.cargo(target, "build")
    };
    build.args(["--release", "-p", "soe-cli", "--bin", "soe"]);
    if target == Target::LinuxMusl {
        build.args(["--", "-C", "relocation-model=static"]);
    }
    run_step(target, &mut build)?;
    copy(
        &toolchain.out(target, "release").join(target.soe_exe()),
        &target.dist().join(target.soe_exe()),
    )
}

/// The C library, each crate type built alone with the `c-release` profile (as
/// `cargo xtask install-c` builds it), renamed to the names C users link: `soe.dll` with its
/// import libraries on Windows, `libsoe.so.X.Y.Z` (SONAME `libsoe.so.ABI`) on Linux,
/// `libsoe.dylib` on macOS, and `libsoe.a`; with `soe.h`.
fn build_c_library(target: Target, toolchain: &Toolchain) -> Result<()> {
    let profile = install_c::DEFAULT_PROFILE;
    for crate_type in ["cdylib", "staticlib"] {
        // A shared library on Alpine links musl's libc dynamically, as the addon does.
        let mut build = if crate_type == "cdylib" {
            toolchain.cargo_loadable(target, "rustc")
        } else {
            toolchain.cargo(target, "rustc")
        };
        build.args(["-p", "soe-ffi", "--lib", "--profile", profile]);
        build.args(["--crate-type", crate_type]);
        if crate_type == "cdylib" {
            install_name(target, &mut build, "libsoe.dylib");
        }
        run_step(target, &mut build)?;
    }
    let out = toolchain.out(target, profile);
    let dist = target.dist();
    let version = Version::read()?;
    copy(&out.join("libsoe_ffi.a"), &dist.join("libsoe.a"))?;
    copy(
        &cmd::workspace_root().join("crates/soe-ffi/include/soe.h"),
        &dist.join("soe.h"),
    )?;
    let built = match target.os() {
        Os::Windows => "soe_ffi.dll",
        Os::Linux => "libsoe_ffi.so",
        Os::Macos => "libsoe_ffi.dylib",
    };
    let shared = dist.join(target.shared_lib(version));
    copy(
        &toolchain.loadable_out(target, profile).join(built),
        &shared,
    )?;
    if target.os() == Os::Windows {
        cross_tools::import_libraries(&shared)?;
    }
    Ok(())
}

/// The Node addon, as its npm platform package names it.
fn build_addon(target: Target, toolchain: &Toolchain) -> Result<()> {
    // Node on Alpine is a dynamic musl program: an addon linked with musl's static C runtime
    // could not be loaded into it.
    let mut build = toolchain.cargo_loadable(target, "rustc");
    build.args(["--release", "-p", "soe-node", "--lib"]);
    install_name(target, &mut build, &target.addon());
    if target == Target::Win {
        build.env("LIBNODE_PATH", cross_tools::libnode_dir()?);
    }
    run_step(target, &mut build)?;
    let built = match target.os() {
        Os::Windows => "soe_node.dll",
        Os::Linux => "libsoe_node.so",
        Os::Macos => "libsoe_node.dylib",
    };
    copy(
        &toolchain.loadable_out(target, "release").join(built),
        &target.dist().join(target.addon()),
    )
}

/// On macOS, the install name of a library `cargo rustc` links (`@rpath/NAME`), instead of
/// its path in this machine's build directory, which programs linked against it would record.
fn install_name(target: Target, build: &mut Command, name: &str) {
    if target.os() == Os::Macos {
        build.args(["--", "-C"]);
        build.arg(format!("link-arg=-Wl,-install_name,@rpath/{name}"));
    }
}

fn run_step(target: Target, command: &mut Command) -> Result<()> {
    println!("==> cross {}: {}", target.triple(), cmd::describe(command));
    let took = cmd::run_timed(command)?;
    println!("    done in {}", cmd::format_duration(took));
    Ok(())
}

/// Checks the laid-out artifacts of `target`: formats, needed libraries, exported symbols,
/// and whatever runs here.
pub(crate) fn check(target: Target) -> Result<()> {
    let dist = target.dist();
    let version = Version::read()?;
    let soe = dist.join(target.soe_exe());
    let shared = dist.join(target.shared_lib(version));
    let addon = dist.join(target.addon());
    for file in [&soe, &shared, &addon] {
        let format = cross_tools::file_format(file)?;
        if format != target.format() {
            return Err(Error::new(format!(
                "{} is {format}, not {}",
                file.display(),
                target.format()
            )));
        }
    }
    let c_exports = cross_tools::exports(&shared)?;
    let soe_functions = c_exports.iter().filter(|s| s.starts_with("soe_")).count();
    if soe_functions < 20 || !c_exports.iter().any(|s| s == "soe_endpoint_new") {
        return Err(Error::new(format!(
            "{} exports {soe_functions} soe_* functions (soe_endpoint_new among them?)",
            shared.display()
        )));
    }
    let addon_exports = cross_tools::exports(&addon)?;
    if !addon_exports.iter().any(|s| s == "napi_register_module_v1") {
        return Err(Error::new(format!(
            "{} does not export napi_register_module_v1",
            addon.display()
        )));
    }
    check_needed(target, &soe, &shared, &addon)?;
    if target.os() == Os::Macos {
        let id = cross_tools::dylib_id(&shared)?.unwrap_or_default();
        if id != "@rpath/libsoe.dylib" {
            return Err(Error::new(format!(
                "libsoe.dylib's install name is {id:?}, not @rpath/libsoe.dylib"
            )));
        }
        println!("    libsoe.dylib: install name {id}");
    }
    println!(
        "==> cross {}: {} formats; {} exports {soe_functions} soe_* functions; the addon exports \
         napi_register_module_v1",
        target.triple(),
        target.format(),
        shared.file_name().unwrap_or_default().to_string_lossy()
    );
    run_here(target, &soe)
}

/// The libraries each file needs: only the operating system's.
fn check_needed(target: Target, soe: &Path, shared: &Path, addon: &Path) -> Result<()> {
    for file in [soe, shared, addon] {
        let needed = cross_tools::needed(file)?;
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        println!("    {name} needs: {}", needed.join(", "));
        let foreign: Vec<&String> = needed
            .iter()
            .filter(|lib| !system_library(target, lib))
            .collect();
        if !foreign.is_empty() {
            return Err(Error::new(format!(
                "{name} needs {foreign:?}, which the target's system does not provide"
            )));
        }
    }
    if target == Target::LinuxMusl {
        if !cross_tools::needed(soe)?.is_empty() || cross_tools::interpreter(soe)? {
            return Err(Error::new(
                "the musl `soe` is not static: it needs a library or a program interpreter",
            ));
        }
        println!("    soe: static (no library needed, no program interpreter)");
        // musl has no symbol versions: any `GLIBC_*` version would make a file unloadable on
        // Alpine.
        for file in [shared, addon] {
            let versions = cross_tools::version_needs(file)?;
            let glibc: Vec<&String> = versions.iter().filter(|v| v.contains("GLIBC_")).collect();
            if !glibc.is_empty() {
                return Err(Error::new(format!(
                    "{} requires glibc's symbol versions {glibc:?}",
                    file.display()
                )));
            }
            println!(
                "    {}: no glibc symbol version ({})",
                file.file_name().unwrap_or_default().to_string_lossy(),
                if versions.is_empty() {
                    "none at all".to_owned()
                } else {
                    versions.join(", ")
                }
            );
        }
    }
    Ok(())
}

/// Whether a needed library comes with the target's operating system (no MinGW runtime DLL,
/// no `node.exe`, no glibc in a musl file).
fn system_library(target: Target, lib: &str) -> bool {
    let lib = lib.to_ascii_lowercase();
    match target {
        Target::Win => {
            lib.starts_with("api-ms-win-")
                || [
                    "kernel32.dll",
                    "ntdll.dll",
                    "ws2_32.dll",
                    "advapi32.dll",
                    "userenv.dll",
                    "bcryptprimitives.dll",
                    "msvcrt.dll",
                    "iphlpapi.dll",
                    "user32.dll",
                    "shell32.dll",
                    "ole32.dll",
                    "secur32.dll",
                    "crypt32.dll",
                    "bcrypt.dll",
                    "mswsock.dll",
                    "synchronization.dll",
                ]
                .contains(&lib.as_str())
        }
        Target::LinuxMusl => {
            lib == "libc.so" || lib.starts_with("libc.musl-") || lib == "libgcc_s.so.1"
        }
        Target::LinuxArm64 => [
            "libc.so.6",
            "libm.so.6",
            "libgcc_s.so.1",
            "ld-linux-aarch64.so.1",
            "libpthread.so.0",
            "libdl.so.2",
            "librt.so.1",
        ]
        .contains(&lib.as_str()),
        Target::MacosX64 | Target::MacosArm64 => {
            lib.starts_with("/usr/lib/") || lib.starts_with("/system/library/frameworks/")
        }
    }
}

/// Runs `soe --version` where this machine can: the musl build natively, the arm64 one under
/// qemu-user. Windows runs are `cargo xtask wine`'s; macOS ones cannot run here.
fn run_here(target: Target, soe: &Path) -> Result<()> {
    let mut command = match target {
        Target::LinuxMusl => Command::new(soe),
        Target::LinuxArm64 => {
            let mut c = Command::new("qemu-aarch64");
            c.args(["-L", "/usr/aarch64-linux-gnu"]).arg(soe);
            c
        }
        Target::Win => {
            println!("    soe.exe runs under wine in `cargo xtask wine`");
            return Ok(());
        }
        Target::MacosX64 | Target::MacosArm64 => {
            println!("    built only: macOS binaries cannot run on this machine");
            return Ok(());
        }
    };
    command.arg("--version");
    let printed = cmd::output(&mut command)?;
    println!(
        "    {} printed: {}",
        cmd::describe(&command),
        printed.trim()
    );
    if !printed.starts_with("soe ") {
        return Err(Error::new(format!("`soe --version` printed {printed:?}")));
    }
    Ok(())
}

/// Stages the target's npm platform package (`crates/soe-node/npm/<platform>/`: package.json
/// with its `os`, `cpu` and `libc`, a README, the addon) with `scripts/stage-platform.js`, ready
/// for `npm pack` / `npm publish` there. Without Node it says so and stages nothing.
fn stage_npm(target: Target) -> Result<()> {
    if !cmd::program_runs("node") {
        println!(
            "    npm: node is not installed: soe-node-{} NOT staged",
            target.npm()
        );
        return Ok(());
    }
    let mut stage = Command::new("node");
    stage
        .args([
            "scripts/stage-platform.js",
            "--platform",
            target.npm(),
            "--addon",
        ])
        .arg(target.dist().join(target.addon()))
        .current_dir(cmd::workspace_root().join("crates/soe-node"));
    let said = cmd::output(&mut stage)?;
    println!("    npm: {}", said.trim());
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| Error::new(format!("copy {} to {}: {e}", from.display(), to.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_name_each_target_once_in_build_order() {
        assert_eq!(chosen(&[]), Target::ALL);
        assert_eq!(chosen(&[Pick::All, Pick::Win]), Target::ALL);
        assert_eq!(
            chosen(&[Pick::MacosArm64, Pick::Win, Pick::Macos]),
            [Target::Win, Target::MacosX64, Target::MacosArm64]
        );
        assert_eq!(chosen(&[Pick::LinuxMusl]), [Target::LinuxMusl]);
    }

    #[test]
    fn names_follow_each_ecosystem() {
        let v = Version {
            major: 0,
            minor: 3,
            patch: 0,
            abi: 1,
        };
        assert_eq!(Target::Win.addon(), "soe-node.win32-x64.node");
        assert_eq!(Target::Win.shared_lib(v), "soe.dll");
        assert_eq!(Target::LinuxArm64.shared_lib(v), "libsoe.so.0.3.0");
        assert_eq!(Target::MacosArm64.shared_lib(v), "libsoe.dylib");
        assert_eq!(Target::LinuxMusl.rid(), "linux-musl-x64");
        assert_eq!(Target::LinuxMusl.native_name(), "libsoe.so");
        let triples: Vec<&str> = Target::ALL.iter().map(|t| t.triple()).collect();
        assert!(triples.iter().all(|t| t.contains('-')), "{triples:?}");
        assert!(
            root().ends_with("target/cross") || root().ends_with("cross"),
            "{}",
            root().display()
        );
    }

    #[test]
    fn only_system_libraries_are_accepted() {
        assert!(system_library(Target::Win, "KERNEL32.dll"));
        assert!(system_library(
            Target::Win,
            "api-ms-win-core-synch-l1-2-0.dll"
        ));
        assert!(!system_library(Target::Win, "libgcc_s_seh-1.dll"));
        assert!(!system_library(Target::Win, "node.exe"));
        assert!(system_library(Target::LinuxMusl, "libc.musl-x86_64.so.1"));
        assert!(!system_library(Target::LinuxMusl, "libc.so.6"));
        assert!(system_library(Target::LinuxArm64, "libc.so.6"));
        assert!(system_library(
            Target::MacosX64,
            "/usr/lib/libSystem.B.dylib"
        ));
        assert!(!system_library(Target::MacosX64, "@rpath/libnode.dylib"));
    }
}
