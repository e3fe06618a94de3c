// Creates a platform package from a cargo build:
//
//   node scripts/stage-platform.js [release|debug] [--out DIR]
//   node scripts/stage-platform.js --platform NAME --addon FILE [--out DIR]
//
// The first stages this machine's platform from target/<profile>/; the second any platform of
// scripts/platforms.js from a file built elsewhere (`cargo xtask cross` lays them out as
// target/cross/<triple>/soe-node.<platform>.node).
//
// writes DIR/<platform>/ (default DIR: npm/ in the package) with a package.json (name
// soe-node-<platform>, the main package's version, and the os, cpu and libc fields that make
// npm install it only where it runs), a README, and the addon cargo built
// (target/<profile>/libsoe_node.so, .dylib or soe_node.dll) as soe-node.<platform>.node.
// `npm pack` / `npm publish` in that directory then packs it; its prepack check refuses to pack
// it without the addon.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { platformName } = require('../binding.js');
const { PLATFORMS, builtFile, packageName, addonFile } = require('./platforms.js');

const pkgDir = path.join(__dirname, '..');
const args = process.argv.slice(2);
const profile = args.find((a) => a === 'release' || a === 'debug') || 'release';
const outAt = args.indexOf('--out');
const outDir = outAt >= 0 ? path.resolve(args[outAt + 1]) : path.join(pkgDir, 'npm');

const option = (name) => (args.indexOf(name) >= 0 ? args[args.indexOf(name) + 1] : undefined);
const platform = option('--platform') || platformName();
const spec = PLATFORMS[platform];
if (!spec) {
  console.error(`stage-platform: ${platform} is not among the platforms the package ships (scripts/platforms.js)`);
  process.exit(1);
}
const targetDir = process.env.CARGO_TARGET_DIR || path.join(pkgDir, '..', '..', 'target');
const built = option('--addon') ? path.resolve(option('--addon')) : path.join(targetDir, profile, builtFile(platform));
if (!fs.existsSync(built)) {
  console.error(`stage-platform: no ${built}; run cargo build${profile === 'release' ? ' --release' : ''} -p soe-node first`);
  process.exit(1);
}
const main = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
const dir = path.join(outDir, platform);
fs.mkdirSync(dir, { recursive: true });
const manifest = {
  name: packageName(platform),
  version: main.version,
  description: `The prebuilt native addon of soe-node for ${platform}`,
  main: addonFile(platform),
  files: [addonFile(platform), 'README.md'],
  os: [spec.os],
  cpu: [spec.cpu],
  ...(spec.libc ? { libc: [spec.libc] } : {}),
  license: main.license,
  engines: main.engines,
  scripts: { prepack: `node ${JSON.stringify(path.relative(dir, path.join(__dirname, 'prepack.js')))} ${platform}` },
};
fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
fs.writeFileSync(
  path.join(dir, 'README.md'),
  `# ${manifest.name}\n\nThe prebuilt native addon of [soe-node](https://www.npmjs.com/package/soe-node) for ${platform} ` +
    `(Rust target ${spec.target}). Install soe-node, not this package: npm picks this one for you.\n`,
);
fs.copyFileSync(built, path.join(dir, addonFile(platform)));
console.log(`stage-platform: ${built} -> ${path.join(dir, addonFile(platform))}`);
