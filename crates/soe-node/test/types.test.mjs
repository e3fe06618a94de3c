// The TypeScript declarations compile under --strict, with code written against them the way
// users (and h1z1-server's GatewayServer) write it; the @ts-expect-error lines prove what they
// refuse (a read-only MessageInfo, `new SoeSession()`, an unknown reason or channel). Needs the
// dev dependencies (npm install: typescript and @types/node); without them the test is
// skipped, except under CI=true, where it fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pkgDir } from './helpers.mjs';

const tsc = path.join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc');
const have = existsSync(tsc) && existsSync(path.join(pkgDir, 'node_modules', '@types', 'node'));
const skip = !have && process.env.CI !== 'true' && 'typescript and @types/node are not installed (npm install)';

test('index.d.ts and h1z1.d.ts compile under tsc --strict and refuse what they should', { timeout: 120_000, skip }, () => {
  assert.ok(have, 'CI=true: the dev dependencies (typescript, @types/node) must be installed');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(pkgDir, 'test', 'types', 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
});
