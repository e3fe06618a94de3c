//! `cargo xtask install-c --target x86_64-pc-windows-gnu --prefix DIR`: the C library laid out
//! the way Windows C libraries are taken (as MinGW-w64 and vcpkg lay out zstd or libcurl):
//!
//! ```text
//! DIR/include/soe.h
//! DIR/bin/soe.dll                     the DLL (found beside the program or on PATH)
//! DIR/lib/soe.dll.a                   its import library for MinGW (`-lsoe` finds it)
//! DIR/lib/soe.lib                     the same for MSVC's link.exe (made by dlltool)
//! DIR/lib/libsoe.a                    the static library
//! DIR/lib/pkgconfig/soe.pc
//! DIR/lib/cmake/soe/soeConfig.cmake   soe::soe (the DLL, IMPORTED_IMPLIB), soe::soe_static
//! DIR/lib/cmake/soe/soeConfigVersion.cmake
//! ```
//!
//! The files come from `cargo xtask cross --target win` (the `c-release` profile). The prefix
//! is relocatable, as on Linux.

use std::path::Path;

use crate::cmd;
use crate::cross::{self, Target};
use crate::install_c::{self, Version};
use crate::{Error, Result};

/// What the static library needs from Windows when linked into a C program (rustc's
/// `--print native-static-libs` for `x86_64-pc-windows-gnu`, the C runtime left to the
/// compiler driver).
const NATIVE_STATIC_LIBS: [&str; 5] = ["ws2_32", "userenv", "ntdll", "kernel32", "advapi32"];

/// Builds the C library for Windows (when not built yet) and installs it under `prefix`.
pub(crate) fn run(prefix: &Path) -> Result<()> {
    let target = Target::Win;
    let dist = target.dist();
    if !["soe.dll", "soe.dll.a", "soe.lib", "libsoe.a", "soe.h"]
        .iter()
        .all(|f| dist.join(f).is_file())
    {
        cross::build_c_library_only(target)?;
    }
    let prefix = std::path::absolute(prefix)
        .map_err(|e| Error::new(format!("{}: {e}", prefix.display())))?;
    let version = Version::read()?;
    let include = prefix.join("include");
    let bin = prefix.join("bin");
    let lib = prefix.join("lib");
    let cmake = lib.join("cmake/soe");
    let pkgconfig = lib.join("pkgconfig");
    for dir in [&include, &bin, &lib, &cmake, &pkgconfig] {
        std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    }
    let copy = |file: &str, to: &Path| {
        std::fs::copy(dist.join(file), to.join(file))
            .map(|_| ())
            .map_err(|e| Error::new(format!("copy {file} to {}: {e}", to.display())))
    };
    copy("soe.h", &include)?;
    copy("soe.dll", &bin)?;
    for file in ["soe.dll.a", "soe.lib", "libsoe.a"] {
        copy(file, &lib)?;
    }
    write(&pkgconfig.join("soe.pc"), &pkg_config(version))?;
    write(&cmake.join("soeConfig.cmake"), &cmake_config(version))?;
    write(
        &cmake.join("soeConfigVersion.cmake"),
        &install_c::cmake_config_version(version),
    )?;
    println!(
        "==> install-c: soe {} for Windows (x86_64-pc-windows-gnu) installed under {}: \
         bin/soe.dll, lib/soe.dll.a, lib/soe.lib, lib/libsoe.a, soe.h, soe.pc, soeConfig.cmake",
        version.string(),
        prefix.display()
    );
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

/// `soe.pc`: `-lsoe` links the DLL through `soe.dll.a`; `--static` adds what `libsoe.a`
/// needs (MinGW's ld prefers `soe.dll.a` to `libsoe.a` for `-lsoe`, so a static link names
/// the archive).
fn pkg_config(version: Version) -> String {
    let libs: Vec<String> = NATIVE_STATIC_LIBS
        .iter()
        .map(|l| format!("-l{l}"))
        .collect();
    format!(
        "prefix=${{pcfiledir}}/../..\n\
         includedir=${{prefix}}/include\n\
         libdir=${{prefix}}/lib\n\
         \n\
         Name: soe\n\
         Description: SOE protocol (v3) endpoint, sans-I/O, for C, C++ and C# hosts (soe-ffi), \
         Windows\n\
         Version: {}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -lsoe\n\
         Libs.private: {}\n",
        version.string(),
        libs.join(" ")
    )
}

/// The CMake package: `soe::soe` is the DLL with its import library (MinGW's `soe.dll.a`, or
/// `soe.lib` under MSVC), `soe::soe_static` the archive.
fn cmake_config(version: Version) -> String {
    format!(
        r#"# soe {v} (ABI {abi}) for Windows x86-64: the SOE protocol endpoint's C library (soe-ffi),
# installed by `cargo xtask install-c --target x86_64-pc-windows-gnu`. Generated; do not edit.
#
#   find_package(soe 0.{minor} REQUIRED)
#   target_link_libraries(my_server PRIVATE soe::soe)         # bin/soe.dll
#   target_link_libraries(my_server PRIVATE soe::soe_static)  # lib/libsoe.a (MinGW)
#
# Sets soe_VERSION and SOE_ABI_VERSION ({abi}). Copy bin/soe.dll beside your program.

get_filename_component(_soe_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
set(SOE_ABI_VERSION {abi})

if(NOT TARGET soe::soe)
  add_library(soe::soe SHARED IMPORTED)
  if(MSVC)
    set(_soe_implib "${{_soe_prefix}}/lib/soe.lib")
  else()
    set(_soe_implib "${{_soe_prefix}}/lib/soe.dll.a")
  endif()
  set_target_properties(soe::soe PROPERTIES
    IMPORTED_LOCATION "${{_soe_prefix}}/bin/soe.dll"
    IMPORTED_IMPLIB "${{_soe_implib}}"
    INTERFACE_INCLUDE_DIRECTORIES "${{_soe_prefix}}/include")
  unset(_soe_implib)
endif()

if(NOT TARGET soe::soe_static)
  add_library(soe::soe_static STATIC IMPORTED)
  set_target_properties(soe::soe_static PROPERTIES
    IMPORTED_LOCATION "${{_soe_prefix}}/lib/libsoe.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${{_soe_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "{libs}")
endif()

unset(_soe_prefix)
"#,
        v = version.string(),
        abi = version.abi,
        minor = version.minor,
        libs = NATIVE_STATIC_LIBS.join(";"),
    )
}

/// Builds `examples/c` (the C examples) with CMake and MinGW-w64 against the prefix's
/// `soe::soe`, into `build`; the folder holding `echo_server.exe`.
pub(crate) fn cmake_examples(prefix: &Path, build: &Path) -> Result<std::path::PathBuf> {
    let toolchain = build.join("mingw-w64.cmake");
    std::fs::create_dir_all(build).map_err(|e| Error::new(format!("{}: {e}", build.display())))?;
    write(
        &toolchain,
        "set(CMAKE_SYSTEM_NAME Windows)\n\
         set(CMAKE_SYSTEM_PROCESSOR x86_64)\n\
         set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc)\n\
         set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++)\n\
         set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)\n",
    )?;
    let mut configure = std::process::Command::new("cmake");
    configure
        .arg("-S")
        .arg(cmd::workspace_root().join("examples/c"))
        .arg("-B")
        .arg(build)
        .arg(format!("-DCMAKE_TOOLCHAIN_FILE={}", toolchain.display()))
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .arg("-DCMAKE_BUILD_TYPE=Release");
    println!("==> install-c: {}", cmd::describe(&configure));
    cmd::output(&mut configure)?;
    let mut make = std::process::Command::new("cmake");
    make.arg("--build")
        .arg(build)
        .args(["--target", "echo_server", "echo_client"]);
    println!("==> install-c: {}", cmd::describe(&make));
    cmd::output(&mut make)?;
    Ok(build.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_windows_package_names_the_dll_and_both_import_libraries() {
        let v = Version {
            major: 0,
            minor: 3,
            patch: 0,
            abi: 1,
        };
        let config = cmake_config(v);
        assert!(config.contains("IMPORTED_LOCATION \"${_soe_prefix}/bin/soe.dll\""));
        assert!(config.contains("/lib/soe.lib\""));
        assert!(config.contains("/lib/soe.dll.a\""));
        assert!(config.contains("INTERFACE_LINK_LIBRARIES \"ws2_32;userenv;ntdll"));
        let pc = pkg_config(v);
        assert!(pc.starts_with("prefix=${pcfiledir}/../..\n"), "{pc}");
        assert!(pc.contains("\nLibs: -L${libdir} -lsoe\n"), "{pc}");
        assert!(pc.contains("\nVersion: 0.3.0\n"), "{pc}");
    }
}
