// The install a user gets, checked without a compiler: packs the main package and this
// platform's package (staged by scripts/stage-platform.js), installs both tarballs into an
// empty directory with `npm install --offline` (nothing from the network), and runs an echo
// through the installed package, with the addon's API and with soe-node/h1z1, from CommonJS
// and from an ES module.
//
//   node scripts/pack-install-test.mjs
//
// Run it with no Rust toolchain on PATH (`cargo xtask node` puts refusing stand-ins first); it
// checks that `cargo`, `rustc` and `rustup` do not run, and fails if one does.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { platformName } = require('../binding.js');
const { packageName, addonFile } = require('./platforms.js');

const pkgDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const platform = platformName();

function fail(message) {
  console.error(`pack-install-test: ${message}`);
  process.exit(1);
}

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', shell: process.platform === 'win32' });
  if (r.error) fail(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

// `cargo xtask node` puts a folder first on PATH whose cargo, rustc and rustup refuse to run
// (dropping the folders that hold them would drop /usr/bin with Debian's Rust, and sh and npm
// with it): none of them may answer.
for (const tool of ['cargo', 'rustc', 'rustup']) {
  const r = spawnSync(tool, ['--version'], { encoding: 'utf8', shell: process.platform === 'win32' });
  if (!r.error && r.status === 0) fail(`${tool} runs (${r.stdout.trim()}): this test must run without a Rust toolchain`);
}
console.log('pack-install-test: cargo, rustc and rustup do not run here');

const staged = path.join(pkgDir, 'npm', platform);
if (!existsSync(path.join(staged, addonFile(platform)))) fail(`nothing staged in ${staged} (node scripts/stage-platform.js)`);

const work = mkdtempSync(path.join(tmpdir(), 'soe-node-pack-'));
try {
  const tarballs = path.join(work, 'tarballs');
  mkdirSync(tarballs);
  run('npm', ['pack', '--silent', '--pack-destination', tarballs], pkgDir);
  run('npm', ['pack', '--silent', '--pack-destination', tarballs], staged);
  const packed = readdirSync(tarballs).sort();
  console.log(`pack-install-test: packed ${packed.join(', ')}`);
  const app = path.join(work, 'app');
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), '{ "name": "app", "version": "1.0.0", "private": true }\n');
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', ...packed.map((f) => path.join(tarballs, f))], app);
  const installed = path.join(app, 'node_modules');
  if (readdirSync(path.join(installed, 'soe-node')).some((f) => f.endsWith('.node'))) fail('the main package carries an addon');
  if (!existsSync(path.join(installed, packageName(platform), addonFile(platform)))) fail(`${packageName(platform)} was not installed with its addon`);
  writeFileSync(path.join(app, 'echo.cjs'), `
const { SoeServer, SoeClient } = require('soe-node');
async function main() {
  const server = await SoeServer.listen({ host: '127.0.0.1', port: 0 });
  server.on('session', (s) => s.on('message', (data) => s.send(data)));
  const session = await SoeClient.connect('127.0.0.1:' + server.address().port);
  const echo = new Promise((resolve) => session.once('message', resolve));
  session.send(Buffer.from('echo through the installed addon'));
  console.log(String(await echo));
  await session.close();
  await server.close();
}
main().catch((e) => { console.error(e); process.exitCode = 1; });
`);
  writeFileSync(path.join(app, 'echo.mjs'), `
import { SOEServer } from 'soe-node/h1z1';
import { SoeClient } from 'soe-node';
const key = Buffer.from('F70IaxuU8C/w7FPXY1ibXw==', 'base64');
const server = new SOEServer(0, key);
server._serverAddress = '127.0.0.1';
server.on('appdata', (client, data) => server.sendAppData(client, data));
server.start();
const session = await SoeClient.connect('127.0.0.1:' + server.address().port, { rc4Key: key });
const echo = new Promise((resolve) => session.once('message', resolve));
session.send(Buffer.from('echo through soe-node/h1z1, RC4 on'));
console.log(String(await echo));
await session.close();
await server.stop();
`);
  const cjs = run(process.execPath, ['echo.cjs'], app);
  const esm = run(process.execPath, ['echo.mjs'], app);
  if (cjs !== 'echo through the installed addon\n') fail(`echo.cjs printed ${JSON.stringify(cjs)}`);
  if (esm !== 'echo through soe-node/h1z1, RC4 on\n') fail(`echo.mjs printed ${JSON.stringify(esm)}`);
  console.log(`pack-install-test: installed offline into an empty directory; echoes through ${packageName(platform)}: both APIs, CommonJS and ES module`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
