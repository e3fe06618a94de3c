// The C library's version and ABI version. This file is also `include!`d by build.rs, which
// names the shared library after them (the SONAME) and fails the build when the version here
// differs from Cargo.toml's, so the header's macros cannot go stale. Literals only: cbindgen
// turns each into a `#define` of soe.h (SOE_VERSION_STRING is built from them there, by
// cbindgen.toml's `after_includes`).

/// The library's major version (`SOE_VERSION_MAJOR`).
pub const SOE_VERSION_MAJOR: u32 = 0;
/// The library's minor version. Before 1.0, a new minor version may change the ABI (it then
/// also raises `SOE_ABI_VERSION`).
pub const SOE_VERSION_MINOR: u32 = 3;
/// The library's patch version.
pub const SOE_VERSION_PATCH: u32 = 0;
/// The version as one number, `MAJOR * 10000 + MINOR * 100 + PATCH`, for `#if` tests.
pub const SOE_VERSION_NUMBER: u32 = 300;
/// The ABI version: the number in the shared library's SONAME (`libsoe.so.1`). It changes
/// when, and only when, a program built against an earlier header of the same ABI version
/// could misbehave with this library: a function's parameters or a struct's layout changed, a
/// constant's meaning changed, a function was removed, or a function returns a status its
/// documentation did not list. Additions keep it: new functions, constants, options and
/// reasons. ABI 1 (0.3.0) replaced the public `soe_config` struct of ABI 0 by an opaque config
/// set option by option, and added `user` to `soe_event`.
pub const SOE_ABI_VERSION: u32 = 1;
