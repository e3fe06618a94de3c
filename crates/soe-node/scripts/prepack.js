// The prepack check: `npm pack` and `npm publish` refuse to make a package without its addon.
//
//   node scripts/prepack.js            the main package: the platform package of this machine
//                                      must be staged (scripts/stage-platform.js) with its addon,
//                                      and optionalDependencies must name every platform package
//                                      at the main package's version
//   node scripts/prepack.js PLATFORM   a platform package (run in its directory): its addon must
//                                      be there
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { platformName } = require('../binding.js');
const { PLATFORMS, packageName, addonFile } = require('./platforms.js');

function refuse(message) {
  console.error(`soe-node prepack: ${message}`);
  process.exit(1);
}

const pkgDir = path.join(__dirname, '..');
const platform = process.argv[2];
if (platform) {
  const file = path.join(process.cwd(), addonFile(platform));
  if (!fs.existsSync(file) || fs.statSync(file).size === 0) {
    refuse(`no prebuilt addon ${file}: stage it from a build (node scripts/stage-platform.js release)`);
  }
  process.exit(0);
}
const main = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
for (const name of Object.keys(PLATFORMS)) {
  const want = main.optionalDependencies && main.optionalDependencies[packageName(name)];
  if (want !== main.version) {
    refuse(`optionalDependencies must name ${packageName(name)} at ${main.version} (found ${want})`);
  }
}
if (main.files.some((f) => f.endsWith('.node'))) refuse('the main package must not carry an addon (files)');
const here = platformName();
const staged = path.join(pkgDir, 'npm', here, addonFile(here));
if (!fs.existsSync(staged)) {
  refuse(
    `no prebuilt addon for ${here} at ${staged}: the package would install without one. ` +
      `Build it and stage its platform package first (npm run build && npm run stage).`,
  );
}
