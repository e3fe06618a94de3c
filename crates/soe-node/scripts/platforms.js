// The platforms the package ships a prebuilt addon for: the name of each platform package
// (soe-node-<name>), the npm fields that let npm install it only where it runs, the file cargo
// builds there, and the Rust target that builds it.
'use strict';

const PLATFORMS = {
  'linux-x64-gnu': { os: 'linux', cpu: 'x64', libc: 'glibc', built: 'libsoe_node.so', target: 'x86_64-unknown-linux-gnu' },
  'linux-arm64-gnu': { os: 'linux', cpu: 'arm64', libc: 'glibc', built: 'libsoe_node.so', target: 'aarch64-unknown-linux-gnu' },
  'linux-x64-musl': { os: 'linux', cpu: 'x64', libc: 'musl', built: 'libsoe_node.so', target: 'x86_64-unknown-linux-musl' },
  'linux-arm64-musl': { os: 'linux', cpu: 'arm64', libc: 'musl', built: 'libsoe_node.so', target: 'aarch64-unknown-linux-musl' },
  'darwin-x64': { os: 'darwin', cpu: 'x64', built: 'libsoe_node.dylib', target: 'x86_64-apple-darwin' },
  'darwin-arm64': { os: 'darwin', cpu: 'arm64', built: 'libsoe_node.dylib', target: 'aarch64-apple-darwin' },
  'win32-x64-msvc': { os: 'win32', cpu: 'x64', built: 'soe_node.dll', target: 'x86_64-pc-windows-msvc' },
};

/** The platform package's name. */
function packageName(platform) {
  return `soe-node-${platform}`;
}

/** The addon's file name inside its platform package. */
function addonFile(platform) {
  return `soe-node.${platform}.node`;
}

module.exports = { PLATFORMS, packageName, addonFile };
