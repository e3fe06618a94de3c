// Copies the addon cargo built (target/<profile>/libsoe_node.so, .dylib or soe_node.dll) next to
// index.js as soe_node.node, the name Node loads.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const profile = process.argv[2] || 'release';
const target = process.env.CARGO_TARGET_DIR || path.join(__dirname, '..', '..', '..', 'target');
const names = ['libsoe_node.so', 'libsoe_node.dylib', 'soe_node.dll'];
const found = names.map((n) => path.join(target, profile, n)).find((p) => fs.existsSync(p));
if (!found) {
  console.error(`install-addon: no ${names.join(' / ')} in ${path.join(target, profile)}; run cargo build -p soe-node first`);
  process.exit(1);
}
fs.copyFileSync(found, path.join(__dirname, '..', 'soe_node.node'));
console.log(`install-addon: ${found} -> soe_node.node`);
