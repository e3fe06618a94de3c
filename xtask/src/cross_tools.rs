//! What `cargo xtask cross` builds with, and how it reads what it built.
//!
//! * The toolchain of a target: rustup's cargo where rustup has the target's standard library,
//!   else Debian's (`/usr/bin/cargo`, `/usr/bin/rustc`, with `RUSTC_BOOTSTRAP=1` and
//!   `-Zbuild-std`); for macOS, cargo-zigbuild on Debian's cargo, with zig as the linker.
//! * The tools each target needs, installed when missing the way `.ci/run` installs things:
//!   OS packages with apt-get (as root), `ziglang` from PyPI into `target/cross/tools/zig`,
//!   `cargo-zigbuild` from crates.io.
//! * The import library the Node addon's Windows build links (`LIBNODE_PATH`), the import
//!   libraries of `soe.dll`, and the readers of formats, needed libraries and exports (LLVM's
//!   `llvm-readobj` and `llvm-nm`, which read PE, ELF and Mach-O alike).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::cross::{self, Os, Target};
use crate::{Error, Result};

/// Debian's Rust: the compiler, cargo and the standard library's sources.
const DEBIAN_RUSTC: &str = "/usr/bin/rustc";
const DEBIAN_CARGO: &str = "/usr/bin/cargo";
const DEBIAN_RUSTDOC: &str = "/usr/bin/rustdoc";
/// Debian's clippy for that compiler (`rust-web-clippy`).
const DEBIAN_CLIPPY: &str = "/usr/bin/cargo-clippy";
const DEBIAN_STD_SOURCES: &str = "/usr/lib/rustlib/src/rust/library/Cargo.lock";

/// How a target is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Toolchain {
    /// rustup's cargo and the target's prebuilt standard library.
    Rustup,
    /// Debian's cargo and rustc, the standard library built from source.
    BuildStd,
    /// As [`Self::BuildStd`], through cargo-zigbuild (zig links).
    Zig { zig: PathBuf },
}

impl Toolchain {
    /// For the summary line.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Rustup => "rustup's standard library".into(),
            Self::BuildStd => "Debian's rustc with -Zbuild-std".into(),
            Self::Zig { zig } => format!(
                "Debian's rustc with -Zbuild-std, cargo-zigbuild and {}",
                zig.display()
            ),
        }
    }

    /// `cargo SUBCOMMAND --target T` (in the workspace, into `target/cross/build`) with what
    /// the target needs: the linker, build-std, and the flags that keep the build machine's
    /// paths out of the binaries.
    pub(crate) fn cargo(&self, target: Target, subcommand: &str) -> Command {
        let mut command = match self {
            Self::Rustup => {
                let mut c = cmd::cargo();
                c.arg(subcommand);
                c
            }
            Self::BuildStd => {
                let mut c = debian_cargo();
                c.args([subcommand, "-Zbuild-std"]);
                c
            }
            Self::Zig { zig } => {
                // cargo-zigbuild's `zigbuild` is cargo's `build` (and it has `rustc` too); it
                // runs the cargo named by $CARGO, with zig as the linker.
                let mut c = debian_cargo();
                c.env("CARGO", DEBIAN_CARGO)
                    .env("CARGO_ZIGBUILD_ZIG_PATH", zig);
                let mut z = Command::new("cargo-zigbuild");
                z.current_dir(cmd::workspace_root());
                for (key, value) in c.get_envs() {
                    match value {
                        Some(v) => z.env(key, v),
                        None => z.env_remove(key),
                    };
                }
                z.arg(if subcommand == "build" {
                    "zigbuild"
                } else {
                    subcommand
                });
                z.arg("-Zbuild-std");
                z
            }
        };
        let triple = target.triple();
        let upper = triple.to_uppercase().replace('-', "_");
        command
            .env("CARGO_TARGET_DIR", cross::build_dir())
            .env(
                format!("CARGO_TARGET_{upper}_RUSTFLAGS"),
                target_rustflags(target),
            )
            .args(["--target", triple, "--quiet"]);
        if let Some(linker) = linker(target) {
            command.env(format!("CARGO_TARGET_{upper}_LINKER"), linker);
        }
        if let Self::Zig { .. } = self {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs = std::iter::once(tools_dir().join("bin")).chain(std::env::split_paths(&path));
            if let Ok(joined) = std::env::join_paths(dirs) {
                command.env("PATH", joined);
            }
        }
        command
    }

    /// As [`Self::cargo`], for the files a dynamic host program loads: on musl, the addon and
    /// `libsoe.so`, linked against musl's `libc.so` (Node on Alpine is a dynamic musl program;
    /// rustc makes no cdylib for a target that links its C runtime statically). The whole
    /// build, the standard library included, takes `-C target-feature=-crt-static`, so it has a
    /// target directory of its own ([`Self::loadable_out`]): the static `soe`'s is not rebuilt.
    /// Other targets: [`Self::cargo`].
    pub(crate) fn cargo_loadable(&self, target: Target, subcommand: &str) -> Command {
        let mut command = self.cargo(target, subcommand);
        if target == Target::LinuxMusl {
            let upper = target.triple().to_uppercase().replace('-', "_");
            command.env("CARGO_TARGET_DIR", musl_dynamic_dir()).env(
                format!("CARGO_TARGET_{upper}_RUSTFLAGS"),
                format!("{} -C target-feature=-crt-static", target_rustflags(target)),
            );
        }
        command
    }

    /// Where [`Self::cargo_loadable`] puts `profile`'s output for `target`.
    pub(crate) fn loadable_out(&self, target: Target, profile: &str) -> PathBuf {
        if target == Target::LinuxMusl {
            let dir = if profile == "dev" { "debug" } else { profile };
            musl_dynamic_dir().join(target.triple()).join(dir)
        } else {
            self.out(target, profile)
        }
    }

    /// Where cargo puts `profile`'s output for `target`.
    pub(crate) fn out(&self, target: Target, profile: &str) -> PathBuf {
        let dir = if profile == "dev" { "debug" } else { profile };
        cross::build_dir().join(target.triple()).join(dir)
    }
}

/// The target directory of the musl build without the static C runtime (beside the cross
/// build's own).
fn musl_dynamic_dir() -> PathBuf {
    let build = cross::build_dir();
    let name = build
        .file_name()
        .map_or_else(|| "build".into(), |n| n.to_string_lossy().into_owned());
    build.with_file_name(format!("{name}-musl-dynamic"))
}

/// Debian's cargo, compiling with Debian's rustc (cargo would otherwise take rustup's rustc
/// from the `PATH`), with unstable flags allowed on the stable compiler.
pub(crate) fn debian_cargo() -> Command {
    debian_command(DEBIAN_CARGO)
}

/// `program` (Debian's cargo or its clippy) in the workspace, set to compile with Debian's
/// rustc, with unstable flags allowed on the stable compiler.
fn debian_command(program: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(cmd::workspace_root())
        .env("RUSTC", DEBIAN_RUSTC)
        .env("RUSTDOC", DEBIAN_RUSTDOC)
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WRAPPER");
    c
}

/// Whether Debian's clippy (`rust-web-clippy`), the one that matches Debian's compiler, is
/// installed.
pub(crate) fn debian_clippy_present() -> bool {
    Path::new(DEBIAN_CLIPPY).exists()
}

/// `cargo clippy` for `target` with Debian's clippy, compiler and standard library sources
/// (`-Zbuild-std`), into `target/cross/clippy`. Called by its full path: rustup's
/// `cargo-clippy`, found first on most `PATH`s, would drive rustup's clippy against Debian's
/// standard library sources, a different release.
pub(crate) fn debian_clippy(target: Target) -> Command {
    let mut clippy = debian_command(DEBIAN_CLIPPY);
    let triple = target.triple();
    clippy
        .env("CARGO", DEBIAN_CARGO)
        .env("CARGO_TARGET_DIR", cross::root().join("clippy"))
        .args(["clippy", "-Zbuild-std", "--target", triple, "--quiet"]);
    if let Some(linker) = linker(target) {
        let upper = triple.to_uppercase().replace('-', "_");
        clippy.env(format!("CARGO_TARGET_{upper}_LINKER"), linker);
    }
    clippy
}

/// The target's linker, where cargo's default is not it (macOS: cargo-zigbuild sets zig).
fn linker(target: Target) -> Option<&'static str> {
    match target {
        Target::Win => Some("x86_64-w64-mingw32-gcc"),
        Target::LinuxArm64 => Some("aarch64-linux-gnu-gcc"),
        Target::LinuxMusl => Some("musl-gcc"),
        Target::MacosX64 | Target::MacosArm64 => None,
    }
}

/// `RUSTFLAGS` for the target's crates: the paths of this machine remapped (as
/// `cargo xtask install-c` does), and for musl the C runtime and unwinder from musl-gcc (the
/// standard library built from source has no self-contained copy of them).
fn target_rustflags(target: Target) -> String {
    let root = cmd::workspace_root();
    let mut flags = format!("--remap-path-prefix={}=/soe", root.display());
    if let Some(cargo_home) = cmd::cargo_home() {
        flags.push_str(&format!(
            " --remap-path-prefix={}=/cargo",
            cargo_home.display()
        ));
    }
    if target == Target::LinuxMusl {
        flags.push_str(&format!(
            " -C link-self-contained=no -L native={}",
            tools_dir().join("musl").display()
        ));
    }
    flags
}

/// `target/cross/tools`: what the builds and runs make or fetch for themselves.
pub(crate) fn tools_dir() -> PathBuf {
    cross::root().join("tools")
}

/// Makes sure `target` can be built here, installing what is missing; returns its toolchain.
pub(crate) fn prepare(target: Target) -> Result<Toolchain> {
    let mut packages: Vec<&str> = Vec::new();
    let toolchain = if rustup_has(target.triple()) {
        Toolchain::Rustup
    } else {
        if !Path::new(DEBIAN_CARGO).exists() || !Path::new(DEBIAN_RUSTC).exists() {
            packages.extend(["rustc-web", "cargo-web"]);
        }
        if !Path::new(DEBIAN_STD_SOURCES).exists() {
            packages.push("rust-web-src");
        }
        Toolchain::BuildStd
    };
    let (program, package): (&[&str], &[&str]) = match target {
        Target::Win => (
            &[
                "x86_64-w64-mingw32-gcc",
                "x86_64-w64-mingw32-dlltool",
                "gendef",
            ],
            &[
                "gcc-mingw-w64-x86-64",
                "binutils-mingw-w64-x86-64",
                "mingw-w64-tools",
            ],
        ),
        Target::LinuxArm64 => (
            &["aarch64-linux-gnu-gcc", "qemu-aarch64"],
            &[
                "gcc-aarch64-linux-gnu",
                "libc6-dev-arm64-cross",
                "qemu-user",
            ],
        ),
        Target::LinuxMusl => (&["musl-gcc"], &["musl-tools"]),
        Target::MacosX64 | Target::MacosArm64 => (&[], &[]),
    };
    if program.iter().any(|p| !on_path(p)) {
        packages.extend(package);
    }
    if !on_path("llvm-readobj") || !on_path("llvm-nm") {
        packages.push("llvm");
    }
    apt_install(&packages)?;
    if target == Target::LinuxMusl {
        musl_libunwind()?;
        musl_libgcc_s()?;
    }
    if target.os() == Os::Macos {
        rust_objcopy()?;
        return Ok(Toolchain::Zig { zig: zig()? });
    }
    Ok(toolchain)
}

/// Whether `target`'s standard library is to be had without installing anything: rustup's,
/// or Debian's Rust with the sources to build it.
pub(crate) fn can_build(target: Target) -> bool {
    rustup_has(target.triple())
        || (Path::new(DEBIAN_CARGO).exists()
            && Path::new(DEBIAN_RUSTC).exists()
            && Path::new(DEBIAN_STD_SOURCES).exists())
}

/// Whether rustup has `triple`'s standard library for the toolchain xtask runs on.
fn rustup_has(triple: &str) -> bool {
    let mut list = Command::new("rustup");
    list.args(["target", "list", "--installed"]);
    cmd::output(&mut list).is_ok_and(|out| out.lines().any(|l| l.trim() == triple))
}

/// Whether `program` is an executable file in a folder of the `PATH`.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// `apt-get install` of `packages` (none: nothing), as root, after one `apt-get update`.
pub(crate) fn apt_install(packages: &[&str]) -> Result<()> {
    if packages.is_empty() {
        return Ok(());
    }
    println!("==> cross: installing {} (apt-get)", packages.join(" "));
    let root = cmd::output(Command::new("id").arg("-u")).is_ok_and(|id| id.trim() == "0");
    if !root || !on_path("apt-get") {
        return Err(Error::new(format!(
            "{} missing, and this machine has no apt-get or this is not root: install them \
             (Debian: apt-get install {})",
            packages.join(", "),
            packages.join(" ")
        )));
    }
    let mut update = Command::new("apt-get");
    update.args(["update", "-qq"]);
    cmd::run_timed(&mut update)?;
    let mut install = Command::new("apt-get");
    install
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(packages);
    cmd::run_timed(&mut install).map(|_| ())
}

/// `libunwind.a` for the musl link, in `target/cross/tools/musl`: the standard library asks for
/// an unwinder by that name (rustup's musl target ships LLVM's; the standard library built from
/// source has none). It is GCC's unwinder, the build machine's `libgcc_eh.a`, plus
/// `xtask/musl/dl_find_object.c` compiled by musl-gcc when that copy calls glibc's
/// `_dl_find_object` (GCC 12 and later built against glibc 2.35 or later do), which musl lacks.
/// Rebuilt when the shim's source is newer than the archive.
fn musl_libunwind() -> Result<()> {
    let dir = tools_dir().join("musl");
    let archive = dir.join("libunwind.a");
    let shim = cmd::workspace_root().join("xtask/musl/dl_find_object.c");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if archive.is_file() && modified(&archive) >= modified(&shim) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let libgcc_eh = gcc_file("libgcc_eh.a")?;
    let _ = std::fs::remove_file(&archive);
    std::fs::copy(&libgcc_eh, &archive)
        .map_err(|e| Error::new(format!("copy {}: {e}", libgcc_eh.display())))?;
    let mut nm = Command::new("llvm-nm");
    nm.args(["--quiet", "--undefined-only", "--format=just-symbols"])
        .arg(&archive);
    let wants_dlfo = cmd::output(&mut nm)?
        .lines()
        .any(|l| l.trim() == "_dl_find_object");
    if wants_dlfo {
        let object = dir.join("dl_find_object.o");
        let mut cc = Command::new("musl-gcc");
        cc.args(["-O2", "-fPIC", "-Wall", "-Werror", "-c"])
            .arg(&shim)
            .arg("-o")
            .arg(&object);
        cmd::run_timed(&mut cc)?;
        let mut ar = Command::new("ar");
        ar.arg("rs").arg(&archive).arg(&object);
        cmd::run_timed(&mut ar)?;
    }
    println!(
        "    libunwind.a (musl): {}{}",
        libgcc_eh.display(),
        if wants_dlfo {
            " with _dl_find_object over dl_iterate_phdr (xtask/musl/dl_find_object.c)"
        } else {
            ""
        }
    );
    Ok(())
}

/// `target/cross/tools/musl/libgcc_s.so`, a link to the build machine's `libgcc_s.so.1`, for
/// the musl builds without the static C runtime (the addon, `libsoe.so`): their standard
/// library links GCC's unwinder as `-lgcc_s`, and musl-gcc's library path holds only GCC's
/// `libgcc_s.so`, a linker script naming `libgcc_s.so.1` in a folder musl-gcc does not search.
/// The file only names the library (its SONAME, `libgcc_s.so.1`) and the `GCC_*` symbol
/// versions, which Alpine's `libgcc` provides; nothing of it is copied into the output.
fn musl_libgcc_s() -> Result<()> {
    let link = tools_dir().join("musl/libgcc_s.so");
    if link.exists() {
        return Ok(());
    }
    let real = gcc_file("libgcc_s.so.1")?;
    let _ = std::fs::remove_file(&link);
    symlink(&real, &link)
}

/// Where musl-gcc (GCC) finds its file `name`.
fn gcc_file(name: &str) -> Result<PathBuf> {
    let mut print = Command::new("musl-gcc");
    print.arg(format!("-print-file-name={name}"));
    let path = PathBuf::from(cmd::output(&mut print)?.trim());
    if path.is_absolute() && path.is_file() {
        Ok(path)
    } else {
        Err(Error::new(format!(
            "GCC's {name} not found (musl-gcc printed {})",
            path.display()
        )))
    }
}

/// `target/cross/tools/bin/rust-objcopy`, a link to LLVM's `llvm-objcopy`: rustc strips the
/// debug information of Apple binaries with `rust-objcopy` (rustup ships it; Debian's Rust does
/// not) and finds it on the `PATH`, which [`Toolchain::cargo`] puts this folder first on.
fn rust_objcopy() -> Result<()> {
    let dir = tools_dir().join("bin");
    let link = dir.join("rust-objcopy");
    if link.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let objcopy = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("llvm-objcopy"))
        .find(|f| f.is_file())
        .ok_or_else(|| {
            Error::new("llvm-objcopy is not installed (Debian: apt-get install llvm)")
        })?;
    symlink(&objcopy, &link)
}

#[cfg(unix)]
fn symlink(from: &Path, to: &Path) -> Result<()> {
    std::os::unix::fs::symlink(from, to)
        .map_err(|e| Error::new(format!("symlink {}: {e}", to.display())))
}

#[cfg(not(unix))]
fn symlink(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| Error::new(format!("copy {}: {e}", to.display())))
}

/// zig (PyPI's `ziglang`, in `target/cross/tools/zig`) and cargo-zigbuild (crates.io), each
/// installed when missing; returns zig's path.
fn zig() -> Result<PathBuf> {
    let dir = tools_dir().join("zig");
    let zig = dir.join("ziglang/zig");
    if !zig.is_file() {
        let python = if on_path("python3") {
            "python3"
        } else {
            "python"
        };
        let mut pip = Command::new(python);
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("--target")
        .arg(&dir)
        .arg("ziglang");
        println!("==> cross: {}", cmd::describe(&pip));
        cmd::run_timed(&mut pip)?;
    }
    if !cmd::program_runs("cargo-zigbuild") {
        let mut install = cmd::cargo();
        install.args([
            "install",
            "cargo-zigbuild",
            "--locked",
            "--debug",
            "--quiet",
        ]);
        println!("==> cross: {}", cmd::describe(&install));
        cmd::run_timed(&mut install)?;
    }
    Ok(zig)
}

/// The folder `LIBNODE_PATH` names for the Windows addon's build: napi-build's GNU path links
/// `-lnode` and checks that a `libnode.dll` is there. napi-sys looks every N-API function up in
/// the host process when the addon loads (on Windows it always does), so the addon imports
/// nothing from `node.exe`: an import library with no symbol (`libnode.dll.a`, made by
/// dlltool from a `.def` file) satisfies the link, and `libnode.dll` is an empty file.
pub(crate) fn libnode_dir() -> Result<PathBuf> {
    let dir = tools_dir().join("libnode");
    let import = dir.join("libnode.dll.a");
    if import.is_file() && dir.join("libnode.dll").is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let def = dir.join("node.def");
    write(&def, "LIBRARY node.exe\nEXPORTS\n")?;
    let mut dlltool = Command::new("x86_64-w64-mingw32-dlltool");
    dlltool.arg("-d").arg(&def).arg("-l").arg(&import);
    cmd::run_timed(&mut dlltool)?;
    write(&dir.join("libnode.dll"), "")?;
    Ok(dir)
}

/// `soe.dll.a` (MinGW) and `soe.lib` (MSVC's link.exe reads it too) beside `dll`, naming
/// `soe.dll`: rustc's own import library names `soe_ffi.dll`. The exports come from the DLL
/// (`gendef`).
pub(crate) fn import_libraries(dll: &Path) -> Result<()> {
    let dir = dll.parent().unwrap_or(Path::new("."));
    let mut gendef = Command::new("gendef");
    gendef.arg("-").arg(dll);
    let listing = cmd::output(&mut gendef)?;
    let exports: Vec<&str> = listing
        .lines()
        .skip_while(|l| l.trim() != "EXPORTS")
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .collect();
    let def = dir.join("soe.def");
    write(
        &def,
        &format!("LIBRARY soe.dll\nEXPORTS\n{}\n", exports.join("\n")),
    )?;
    for lib in ["soe.dll.a", "soe.lib"] {
        let mut dlltool = Command::new("x86_64-w64-mingw32-dlltool");
        dlltool
            .arg("-d")
            .arg(&def)
            .args(["-D", "soe.dll", "-l"])
            .arg(dir.join(lib));
        cmd::run_timed(&mut dlltool)?;
    }
    println!(
        "    soe.dll.a and soe.lib: import libraries of soe.dll, {} functions",
        exports.len()
    );
    Ok(())
}

/// `llvm-readobj --file-headers`'s `Format:` line: `COFF-x86-64`, `elf64-littleaarch64`,
/// `Mach-O arm64`...
pub(crate) fn file_format(file: &Path) -> Result<String> {
    let out = readobj(file, &["--file-headers"])?;
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Format: "))
        .map(str::to_owned)
        .ok_or_else(|| {
            Error::new(format!(
                "{}: no format in llvm-readobj's output",
                file.display()
            ))
        })
}

/// The libraries `file` needs: DLL imports, ELF `NEEDED` entries, Mach-O load commands.
pub(crate) fn needed(file: &Path) -> Result<Vec<String>> {
    if file_format(file)?.starts_with("COFF") {
        let out = readobj(file, &["--coff-imports"])?;
        let mut dlls: Vec<String> = out
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Name: "))
            .filter(|n| n.contains('.'))
            .map(str::to_ascii_lowercase)
            .collect();
        dlls.sort();
        dlls.dedup();
        return Ok(dlls);
    }
    let out = readobj(file, &["--needed-libs"])?;
    // llvm-readobj lists a Mach-O library's own install name (LC_ID_DYLIB) among them.
    let own = dylib_id(file)?;
    Ok(out
        .lines()
        .skip_while(|l| !l.contains("NeededLibraries ["))
        .skip(1)
        .take_while(|l| l.trim() != "]")
        .map(|l| l.trim().to_owned())
        .filter(|l| Some(l) != own.as_ref())
        .collect())
}

/// A Mach-O library's install name (`llvm-objdump --macho --dylib-id`); none for other files.
pub(crate) fn dylib_id(file: &Path) -> Result<Option<String>> {
    if !file_format(file)?.starts_with("Mach-O") {
        return Ok(None);
    }
    let mut objdump = Command::new("llvm-objdump");
    objdump.args(["--macho", "--dylib-id"]).arg(file);
    let out = cmd::output(&mut objdump)?;
    // The first line names the file; the second, if any, is the id.
    Ok(out.lines().nth(1).map(|l| l.trim().to_owned()))
}

/// Whether an ELF `file` names a program interpreter (`PT_INTERP`: the dynamic loader the
/// kernel starts it with).
pub(crate) fn interpreter(file: &Path) -> Result<bool> {
    let out = readobj(file, &["--program-headers"])?;
    Ok(out.lines().any(|l| l.contains("PT_INTERP")))
}

/// The symbol versions an ELF `file` requires of its libraries (`.gnu.version_r`), as
/// `library: version` (`libgcc_s.so.1: GCC_3.0`, `libc.so.6: GLIBC_2.34`); none for a file
/// linked against musl, which has no symbol versions.
pub(crate) fn version_needs(file: &Path) -> Result<Vec<String>> {
    let out = readobj(file, &["--version-info"])?;
    Ok(parse_version_needs(&out))
}

/// [`version_needs`] from `llvm-readobj --version-info`'s text.
fn parse_version_needs(out: &str) -> Vec<String> {
    let mut needs = Vec::new();
    let mut library = String::new();
    let section = out
        .lines()
        .skip_while(|l| !l.contains("VersionRequirements ["));
    // The section ends at its unindented `]`.
    for line in section.skip(1).take_while(|l| l.trim_end() != "]") {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("FileName: ") {
            name.clone_into(&mut library);
        } else if let Some(version) = line.strip_prefix("Name: ") {
            needs.push(format!("{library}: {version}"));
        }
    }
    needs
}

/// The symbols `file` exports (Mach-O's leading underscore removed).
pub(crate) fn exports(file: &Path) -> Result<Vec<String>> {
    let format = file_format(file)?;
    if format.starts_with("COFF") {
        let out = readobj(file, &["--coff-exports"])?;
        return Ok(out
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Name: "))
            .map(str::to_owned)
            .collect());
    }
    let mut nm = Command::new("llvm-nm");
    nm.args(["--defined-only", "--extern-only", "--format=just-symbols"]);
    if format.starts_with("elf") {
        nm.arg("--dynamic");
    }
    let out = cmd::output(nm.arg(file))?;
    let macho = format.starts_with("Mach-O");
    Ok(out
        .lines()
        .map(|s| {
            let s = s.trim();
            if macho {
                s.strip_prefix('_').unwrap_or(s)
            } else {
                s
            }
            .to_owned()
        })
        .collect())
}

fn readobj(file: &Path, args: &[&str]) -> Result<String> {
    let mut c = Command::new("llvm-readobj");
    c.args(args).arg(file);
    cmd::output(&mut c)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_versions_are_read_per_library() {
        let out = "VersionSymbols [\n]\nVersionDefinitions [\n]\nVersionRequirements [\n  Dependency {\n    Version: 1\n    FileName: libgcc_s.so.1\n    Entries [\n      Entry {\n        Flags [ (0x0)\n        ]\n        Name: GCC_3.0\n      }\n    ]\n  }\n  Dependency {\n    FileName: libc.so.6\n    Entries [\n      Entry {\n        Name: GLIBC_2.34\n      }\n      Entry {\n        Name: GLIBC_2.2.5\n      }\n    ]\n  }\n]\n";
        assert_eq!(
            parse_version_needs(out),
            [
                "libgcc_s.so.1: GCC_3.0",
                "libc.so.6: GLIBC_2.34",
                "libc.so.6: GLIBC_2.2.5"
            ]
        );
        assert!(parse_version_needs("VersionRequirements [\n]\n").is_empty());
    }
}
