// Packaging: `npm pack` refuses to make a package without its addon (the main package without a
// staged platform package, a platform package without its addon), the loader names the
// platform when it finds no addon, and the platform list, optionalDependencies and the loader
// agree. (scripts/pack-install-test.mjs, run by `cargo xtask node`, installs the real thing.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { T, pkgDir, runNode } from './helpers.mjs';

const require = createRequire(import.meta.url);
const { platformName, locate, lookFor, linuxLibc, muslFromLdd, muslFromReport } = require('../binding.js');
const { PLATFORMS, packageName, addonFile } = require('../scripts/platforms.js');

/** A copy of the package's sources (no addon, nothing staged) in a temporary directory. */
function copy(t) {
  const dir = mkdtempSync(path.join(tmpdir(), 'soe-node-pack-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of ['package.json', 'index.js', 'index.d.ts', 'binding.js', 'h1z1.js', 'h1z1.d.ts', 'README.md', 'scripts']) {
    cpSync(path.join(pkgDir, f), path.join(dir, f), { recursive: true });
  }
  return dir;
}

function pack(cwd) {
  return spawnSync('npm', ['pack', '--dry-run', '--json'], { cwd, encoding: 'utf8' });
}

test('npm pack of the main package refuses without a staged platform package, and packs no addon with one', T, async (t) => {
  const dir = copy(t);
  const refused = pack(dir);
  assert.notEqual(refused.status, 0, 'npm pack refused');
  assert.match(refused.stderr, /no prebuilt addon for \S+ at/);
  // Staged (a stand-in file is enough for the check): packs, and carries no addon itself.
  const platform = platformName();
  mkdirSync(path.join(dir, 'npm', platform), { recursive: true });
  writeFileSync(path.join(dir, 'npm', platform, addonFile(platform)), 'stand-in');
  writeFileSync(path.join(dir, 'soe_node.node'), 'a local build');
  const packed = pack(dir);
  assert.equal(packed.status, 0, packed.stderr);
  const files = JSON.parse(packed.stdout)[0].files.map((f) => f.path).sort();
  assert.deepEqual(files, ['README.md', 'binding.js', 'h1z1.d.ts', 'h1z1.js', 'index.d.ts', 'index.js', 'package.json', 'scripts/platforms.js']);
});

test('npm pack of a platform package refuses without its addon', T, async (t) => {
  const dir = copy(t);
  const platform = platformName();
  const staged = path.join(dir, 'npm', platform);
  mkdirSync(staged, { recursive: true });
  const manifest = { name: packageName(platform), version: '0.1.0', files: [addonFile(platform)], scripts: { prepack: `node ../../scripts/prepack.js ${platform}` } };
  writeFileSync(path.join(staged, 'package.json'), JSON.stringify(manifest));
  const refused = pack(staged);
  assert.notEqual(refused.status, 0);
  assert.match(refused.stderr, /no prebuilt addon .*stage it from a build/);
  writeFileSync(path.join(staged, addonFile(platform)), 'stand-in');
  assert.equal(pack(staged).status, 0);
});

test('without an addon, require() says which platform has none', T, async (t) => {
  const dir = copy(t);
  const run = await runNode(t, `import { createRequire } from 'node:module';
    try { createRequire(${JSON.stringify(path.join(dir, 'index.js'))})(${JSON.stringify(path.join(dir, 'index.js'))}); }
    catch (e) { console.log(JSON.stringify({ code: e.code, platform: e.platform, message: e.message })); }`, { cwd: dir, env: { ...process.env, SOE_NODE_ADDON: '' } });
  const e = JSON.parse(run.stdout);
  assert.equal(e.code, 'ERR_SOE_NO_ADDON');
  assert.equal(e.platform, platformName());
  assert.ok(e.message.includes(platformName()) && e.message.includes(packageName(platformName())), e.message);
});

const targetDir = process.env.CARGO_TARGET_DIR || path.join(pkgDir, '..', '..', 'target');
const built = ['libsoe_node.so', 'libsoe_node.dylib', 'soe_node.dll'].map((f) => path.join(targetDir, 'debug', f)).find((f) => existsSync(f));

test('SOE_NODE_ADDON loads the file it names, whatever its name (cargo\'s own output)', { ...T, skip: !built && 'no debug build of the addon' }, async (t) => {
  const dir = copy(t);
  const run = await runNode(t, `import { createRequire } from 'node:module';
    const soe = createRequire(${JSON.stringify(path.join(dir, 'index.js'))})(${JSON.stringify(path.join(dir, 'index.js'))});
    console.log(typeof soe.SoeServer);`, { cwd: dir, env: { ...process.env, SOE_NODE_ADDON: built } });
  assert.equal(run.stdout, 'function\n', run.stderr);
});

test('the platforms, optionalDependencies and the loader agree', T, () => {
  const pkg = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  const names = Object.keys(PLATFORMS).map(packageName).sort();
  assert.deepEqual(Object.keys(pkg.optionalDependencies).sort(), names);
  for (const v of Object.values(pkg.optionalDependencies)) assert.equal(v, pkg.version);
  assert.ok(PLATFORMS[platformName()], `this machine's platform ${platformName()} is one of them`);
  assert.deepEqual(Object.keys(PLATFORMS).sort(), ['darwin-arm64', 'darwin-x64', 'linux-arm64-gnu', 'linux-x64-gnu', 'linux-x64-musl', 'win32-x64']);
  for (const [name, spec] of Object.entries(PLATFORMS)) {
    assert.ok(name.startsWith(`${spec.os}-${spec.cpu}`), name);
    if (spec.os === 'linux') assert.ok(name.endsWith(spec.libc === 'musl' ? '-musl' : '-gnu'), name);
  }
});

/** A resolver that finds only the packages in `installed` (as require.resolve would). */
function resolver(installed) {
  return (request) => {
    const pkg = request.split('/')[0];
    if (installed.includes(pkg)) return `/app/node_modules/${request}`;
    const e = new Error(`Cannot find module '${request}'`);
    e.code = 'MODULE_NOT_FOUND';
    throw e;
  };
}

test('the loader picks the package of the platform, the CPU and the C library', T, () => {
  const all = Object.keys(PLATFORMS).map(packageName);
  const cases = [
    [{ platform: 'linux', arch: 'x64', libc: 'glibc' }, 'linux-x64-gnu'],
    [{ platform: 'linux', arch: 'x64', libc: 'musl' }, 'linux-x64-musl'],
    [{ platform: 'linux', arch: 'arm64', libc: 'glibc' }, 'linux-arm64-gnu'],
    [{ platform: 'darwin', arch: 'x64' }, 'darwin-x64'],
    [{ platform: 'darwin', arch: 'arm64' }, 'darwin-arm64'],
    [{ platform: 'win32', arch: 'x64' }, 'win32-x64'],
  ];
  for (const [env, name] of cases) {
    const found = locate({ ...env, addon: '', exists: () => false, resolve: resolver(all) });
    assert.equal(found.name, name);
    assert.equal(found.file, `/app/node_modules/${packageName(name)}/${addonFile(name)}`);
  }
  // With only its own package installed, each platform still finds it (and no other).
  for (const [env, name] of cases) {
    const found = locate({ ...env, addon: '', exists: () => false, resolve: resolver([packageName(name)]) });
    assert.equal(found.name, name);
  }
  // A local build is the fallback; SOE_NODE_ADDON wins over both.
  const local = locate({ platform: 'win32', arch: 'x64', addon: '', dir: '/src', exists: (f) => f === path.join('/src', 'soe_node.node'), resolve: resolver([]) });
  assert.equal(local.file, path.join('/src', 'soe_node.node'));
  const explicit = locate({ platform: 'win32', arch: 'x64', addon: '/x/soe_node.dll', resolve: resolver(all) });
  assert.deepEqual([explicit.file, explicit.explicit], [path.resolve('/x/soe_node.dll'), true]);
});

test('with nothing that fits, the loader names what it looked for', T, () => {
  const nothing = { addon: '', dir: '/src', exists: () => false, resolve: resolver([]) };
  // A shipped platform whose package npm left out (--omit=optional).
  assert.throws(() => locate({ ...nothing, platform: 'linux', arch: 'x64', libc: 'musl' }), (e) => {
    assert.equal(e.code, 'ERR_SOE_NO_ADDON');
    assert.equal(e.platform, 'linux-x64-musl');
    assert.match(e.message, /the package soe-node-linux-x64-musl \(not installed\)/);
    assert.match(e.message, /--omit=optional/);
    assert.match(e.message, /a local build at .*soe_node\.node \(none\)/);
    return true;
  });
  // A platform no package is made for: named, with the platform, arch and what is shipped.
  for (const [platform, arch, libc, name] of [['linux', 'arm64', 'musl', 'linux-arm64-musl'], ['win32', 'arm64', undefined, 'win32-arm64'], ['freebsd', 'x64', undefined, 'freebsd-x64']]) {
    // Even with every package installed, none is for this platform.
    assert.throws(() => locate({ ...nothing, platform, arch, libc, resolve: resolver(Object.keys(PLATFORMS).map(packageName)) }), (e) => {
      assert.equal(e.platform, name);
      assert.match(e.message, new RegExp(`no prebuilt addon for ${name} \\(process.platform ${platform}, process.arch ${arch}\\)`));
      assert.match(e.message, /prebuilt: .*win32-x64/);
      return true;
    });
  }
  assert.deepEqual(lookFor('linux', 'arm64', 'musl'), { name: 'linux-arm64-musl', pkg: 'soe-node-linux-arm64-musl', file: 'soe-node.linux-arm64-musl.node', shipped: false });
});

test('musl is told from glibc as napi-rs tells it: ldd, then the process report, then ldd --version', T, () => {
  // Alpine's /usr/bin/ldd is musl's loader (a binary naming musl); glibc's is a script.
  assert.equal(muslFromLdd(() => '#!/bin/sh\n# glibc ldd\nTEXTDOMAIN=libc'), false);
  assert.equal(muslFromLdd(() => '\x7fELF ... /lib/ld-musl-x86_64.so.1 ... musl libc'), true);
  assert.equal(muslFromLdd(() => { throw new Error('ENOENT'); }), null);
  const report = (r) => ({ getReport: () => r });
  assert.equal(muslFromReport(report({ header: { glibcVersionRuntime: '2.36' }, sharedObjects: [] })), false);
  assert.equal(muslFromReport(report({ header: {}, sharedObjects: ['/lib/ld-musl-x86_64.so.1'] })), true);
  assert.equal(muslFromReport(report(JSON.stringify({ header: {} }))), true);
  assert.equal(muslFromReport(null), null);
  // The first probe with an answer decides.
  assert.equal(linuxLibc({ ldd: () => null, report: () => true, lddVersion: () => false }), 'musl');
  assert.equal(linuxLibc({ ldd: () => false, report: () => true, lddVersion: () => true }), 'glibc');
  assert.equal(linuxLibc({ ldd: () => null, report: () => null, lddVersion: () => true }), 'musl');
  assert.equal(linuxLibc({ ldd: () => null, report: () => null, lddVersion: () => null }), 'glibc');
  // This machine (Debian, glibc).
  if (process.platform === 'linux') assert.equal(linuxLibc(), existsSync('/lib/ld-musl-x86_64.so.1') && !existsSync('/lib/x86_64-linux-gnu/libc.so.6') ? 'musl' : 'glibc');
  assert.equal(platformName('linux', 'x64', 'musl'), 'linux-x64-musl');
  assert.equal(platformName('win32', 'x64'), 'win32-x64');
});

test('each platform package is staged with the npm fields that make npm install it only where it runs', T, async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'soe-node-stage-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const addon = path.join(dir, 'built.node');
  writeFileSync(addon, 'a cross-built addon');
  for (const [name, spec] of Object.entries(PLATFORMS)) {
    const r = spawnSync(process.execPath, ['scripts/stage-platform.js', '--platform', name, '--addon', addon, '--out', dir], { cwd: pkgDir, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const manifest = JSON.parse(readFileSync(path.join(dir, name, 'package.json'), 'utf8'));
    assert.equal(manifest.name, packageName(name));
    assert.deepEqual(manifest.os, [spec.os]);
    assert.deepEqual(manifest.cpu, [spec.cpu]);
    assert.deepEqual(manifest.libc, spec.libc ? [spec.libc] : undefined, name);
    assert.equal(manifest.main, addonFile(name));
    assert.equal(readFileSync(path.join(dir, name, addonFile(name)), 'utf8'), 'a cross-built addon');
  }
  const refused = spawnSync(process.execPath, ['scripts/stage-platform.js', '--platform', 'linux-arm64-musl', '--addon', addon, '--out', dir], { cwd: pkgDir, encoding: 'utf8' });
  assert.notEqual(refused.status, 0);
  assert.match(refused.stderr, /linux-arm64-musl is not among the platforms/);
});
