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
const { platformName } = require('../binding.js');
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
  assert.deepEqual(files, ['README.md', 'binding.js', 'h1z1.d.ts', 'h1z1.js', 'index.d.ts', 'index.js', 'package.json']);
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
  assert.equal(platformName('darwin', 'arm64'), 'darwin-arm64');
  assert.equal(platformName('win32', 'x64'), 'win32-x64-msvc');
  for (const [name, spec] of Object.entries(PLATFORMS)) {
    assert.ok(name.startsWith(`${spec.os}-${spec.cpu}`), name);
    if (spec.os === 'linux') assert.ok(name.endsWith(spec.libc === 'musl' ? '-musl' : '-gnu'), name);
  }
});
