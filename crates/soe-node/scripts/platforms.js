// The platforms the package ships a prebuilt addon for: the name of each platform package
// (soe-node-<name>), the npm fields that let npm install it only where it runs (os, cpu, libc),
// and the Rust target that builds it (`cargo xtask cross` builds all but linux-x64-gnu, which
// `cargo build` makes on the machines CI runs on).
'use strict';

const PLATFORMS = {
  'linux-x64-gnu': { os: 'linux', cpu: 'x64', libc: 'glibc', target: 'x86_64-unknown-linux-gnu' },
  'linux-x64-musl': { os: 'linux', cpu: 'x64', libc: 'musl', target: 'x86_64-unknown-linux-musl' },
  'linux-arm64-gnu': { os: 'linux', cpu: 'arm64', libc: 'glibc', target: 'aarch64-unknown-linux-gnu' },
  'darwin-x64': { os: 'darwin', cpu: 'x64', target: 'x86_64-apple-darwin' },
  'darwin-arm64': { os: 'darwin', cpu: 'arm64', target: 'aarch64-apple-darwin' },
  'win32-x64': { os: 'win32', cpu: 'x64', target: 'x86_64-pc-windows-gnu' },
};

/** The file cargo builds for a platform's addon (`target/<triple>/<profile>/<file>`). */
function builtFile(platform) {
  const { os } = PLATFORMS[platform];
  if (os === 'win32') return 'soe_node.dll';
  if (os === 'darwin') return 'libsoe_node.dylib';
  return 'libsoe_node.so';
}

/** The platform package's name. */
function packageName(platform) {
  return `soe-node-${platform}`;
}

/** The addon's file name inside its platform package. */
function addonFile(platform) {
  return `soe-node.${platform}.node`;
}

module.exports = { PLATFORMS, builtFile, packageName, addonFile };
