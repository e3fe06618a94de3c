// Finds the native addon: the prebuilt one of this platform's package (soe-node-<platform>,
// installed by npm from the main package's optionalDependencies), else a local build next to
// this file (`npm run build`), else an error naming the platform. SOE_NODE_ADDON names a file
// to load instead of both (any name: cargo's libsoe_node.so, .dylib or soe_node.dll too).
'use strict';

const fs = require('node:fs');
const path = require('node:path');

/** Whether this Linux runs on musl (Alpine) rather than glibc. */
function isMusl() {
  try {
    const report = process.report.getReport();
    const header = typeof report === 'string' ? JSON.parse(report).header : report.header;
    return !header.glibcVersionRuntime;
  } catch {
    return false;
  }
}

/**
 * The platform name of this process, as the platform packages are named: `linux-x64-gnu`,
 * `linux-arm64-musl`, `darwin-arm64`, `win32-x64-msvc`, ...
 */
function platformName(platform = process.platform, arch = process.arch) {
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

/** Loads the addon, or throws an Error with code ERR_SOE_NO_ADDON that says what to do. */
function load() {
  const name = platformName();
  const tried = [];
  const explicit = process.env.SOE_NODE_ADDON;
  if (explicit) {
    // Any file name: cargo's own output (target/release/libsoe_node.so) loads as it is.
    const file = path.resolve(explicit);
    const module = { exports: {} };
    process.dlopen(module, file);
    return { binding: module.exports, file, name };
  }
  const pkg = `soe-node-${name}`;
  let file = null;
  try {
    file = require.resolve(`${pkg}/soe-node.${name}.node`);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    tried.push(`the package ${pkg} (not installed)`);
  }
  if (file === null) {
    const local = path.join(__dirname, 'soe_node.node');
    if (fs.existsSync(local)) file = local;
    else tried.push(`a local build at ${local} (none)`);
  }
  if (file === null) {
    const err = new Error(
      `soe-node: no native addon for this platform (${name}). Tried ${tried.join(' and ')}. ` +
        `Install the platform package (npm installs ${pkg} with soe-node unless optional ` +
        `dependencies are omitted: check --omit=optional / --no-optional), or build the addon ` +
        `from source with a Rust toolchain (npm run build in the soe-node package).`,
    );
    err.code = 'ERR_SOE_NO_ADDON';
    err.platform = name;
    throw err;
  }
  return { binding: require(file), file, name };
}

module.exports = { load, platformName };
