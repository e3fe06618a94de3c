//! Build script: the linker settings a Node addon needs (napi-build).

fn main() {
    napi_build::setup();
}
