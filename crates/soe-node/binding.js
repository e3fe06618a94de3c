// Finds the native addon: the prebuilt one of this platform's package (soe-node-<platform>,
// installed by npm from the main package's optionalDependencies), else a local build next to
// this file (`npm run build`), else an error naming the platform and what was looked for.
// SOE_NODE_ADDON names a file to load instead of both (any name: cargo's libsoe_node.so,
// .dylib or soe_node.dll too).
//
// The platform is process.platform and process.arch, and on Linux the C library: musl (Alpine)
// or glibc, found the way napi-rs's loaders find it (ldd's text, then the process report's
// glibc version, then `ldd --version`).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { PLATFORMS, packageName, addonFile } = require('./scripts/platforms.js');

/** Whether `ldd` (a shell script on glibc, musl's loader on Alpine) names musl; null: unknown. */
function muslFromLdd(read = () => fs.readFileSync('/usr/bin/ldd', 'utf8')) {
  try {
    return read().includes('musl');
  } catch {
    return null;
  }
}

/** Whether the process report says musl: no glibc runtime version, or a musl loader loaded. */
function muslFromReport(report = process.report) {
  try {
    if (!report || typeof report.getReport !== 'function') return null;
    report.excludeNetwork = true; // no DNS lookups for the interfaces
    const got = report.getReport();
    const { header, sharedObjects = [] } = typeof got === 'string' ? JSON.parse(got) : got;
    if (header && header.glibcVersionRuntime) return false;
    return sharedObjects.some((f) => /ld-musl-|libc\.musl-/.test(f)) || Boolean(header);
  } catch {
    return null;
  }
}

/** What `ldd --version` prints names musl (its last resort, as napi-rs's). */
function muslFromLddVersion(exec = () => require('node:child_process').execSync('ldd --version 2>&1', { encoding: 'utf8' })) {
  try {
    return exec().includes('musl');
  } catch (e) {
    // musl's ldd prints its version to stderr and exits 1.
    return typeof e.stdout === 'string' ? e.stdout.includes('musl') : false;
  }
}

/** This Linux's C library: 'musl' or 'glibc'. Each probe can be replaced (the tests do). */
function linuxLibc(probes = {}) {
  const { ldd = muslFromLdd, report = muslFromReport, lddVersion = muslFromLddVersion } = probes;
  for (const probe of [ldd, report, lddVersion]) {
    const musl = probe();
    if (musl !== null && musl !== undefined) return musl ? 'musl' : 'glibc';
  }
  return 'glibc';
}

/**
 * The platform name of a process, as the platform packages are named: `linux-x64-gnu`,
 * `linux-x64-musl`, `linux-arm64-gnu`, `darwin-arm64`, `win32-x64`, ... Without arguments,
 * this process's.
 */
function platformName(platform = process.platform, arch = process.arch, libc) {
  if (platform === 'linux') {
    const c = libc || linuxLibc();
    return `linux-${arch}-${c === 'musl' ? 'musl' : 'gnu'}`;
  }
  return `${platform}-${arch}`;
}

/**
 * What the loader looks for on a platform: the package and the file in it, and whether the
 * package ships a prebuilt addon for it at all.
 */
function lookFor(platform = process.platform, arch = process.arch, libc) {
  const name = platformName(platform, arch, libc);
  return { name, pkg: packageName(name), file: addonFile(name), shipped: Object.hasOwn(PLATFORMS, name) };
}

/** The Error of "no addon here": code ERR_SOE_NO_ADDON, the platform, what was tried. */
function noAddon(want, tried, platform, arch) {
  const shipped = Object.keys(PLATFORMS).join(', ');
  const why = want.shipped
    ? `Install the platform package (npm installs ${want.pkg} with soe-node unless optional ` +
      `dependencies are omitted: check --omit=optional / --no-optional)`
    : `soe-node ships no prebuilt addon for ${want.name} (process.platform ${platform}, ` +
      `process.arch ${arch}); prebuilt: ${shipped}`;
  const err = new Error(
    `soe-node: no native addon for this platform (${want.name}). Tried ${tried.join(' and ')}. ` +
      `${why}, or build the addon from source with a Rust toolchain (npm run build in the ` +
      `soe-node package).`,
  );
  err.code = 'ERR_SOE_NO_ADDON';
  err.platform = want.name;
  err.tried = tried;
  return err;
}

/**
 * Finds the addon's file. `env` stands in for the process (tests): platform, arch, libc,
 * resolve (require.resolve), exists (fs.existsSync), dir (this file's folder), addon
 * (SOE_NODE_ADDON).
 */
function locate(env = {}) {
  const {
    platform = process.platform,
    arch = process.arch,
    libc,
    resolve = require.resolve,
    exists = fs.existsSync,
    dir = __dirname,
    addon = process.env.SOE_NODE_ADDON,
  } = env;
  const want = lookFor(platform, arch, libc);
  if (addon) return { file: path.resolve(addon), name: want.name, explicit: true };
  const tried = [];
  if (want.shipped) {
    try {
      return { file: resolve(`${want.pkg}/${want.file}`), name: want.name };
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
      tried.push(`the package ${want.pkg} (not installed)`);
    }
  } else {
    tried.push(`a prebuilt package (none is made for ${want.name})`);
  }
  const local = path.join(dir, 'soe_node.node');
  if (exists(local)) return { file: local, name: want.name };
  tried.push(`a local build at ${local} (none)`);
  throw noAddon(want, tried, platform, arch);
}

/** Loads the addon, or throws an Error with code ERR_SOE_NO_ADDON that says what to do. */
function load() {
  const { file, name, explicit } = locate();
  if (explicit) {
    // Any file name: cargo's own output (target/release/libsoe_node.so) loads as it is.
    const module = { exports: {} };
    process.dlopen(module, file);
    return { binding: module.exports, file, name };
  }
  return { binding: require(file), file, name };
}

module.exports = { load, locate, lookFor, platformName, linuxLibc, muslFromLdd, muslFromReport, muslFromLddVersion };
