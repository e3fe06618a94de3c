// bench/batch-path.mjs (the JS side of the receive-and-reply path, timed without sockets) runs
// with each API and hands every reply to the addon: a reply lost or doubled on the way from a
// handler to sendBatch fails it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { T, pkgDir } from './helpers.mjs';

const script = path.join(pkgDir, 'bench', 'batch-path.mjs');

for (const api of ['addon', 'h1z1']) {
  test(`batch-path.mjs --api ${api}: one line, every reply handed to the addon`, T, () => {
    const run = spawnSync(process.execPath, [script, '--api', api, '--sessions', '20', '--batch', '6', '--rounds', '2'], {
      encoding: 'utf8',
      timeout: 25_000,
    });
    assert.equal(run.status, 0, run.stderr + run.stdout);
    assert.match(
      run.stdout,
      new RegExp(`^batch-path ${api}: \\d+ ns per message \\(min \\d+, 2 rounds, 20 sessions, 6 per batch\\); replies handed to the addon 18000 of 18000\\n$`),
    );
  });
}

test('batch-path.mjs refuses a bad flag with status 1', T, () => {
  const run = spawnSync(process.execPath, [script, '--batch', '0'], { encoding: 'utf8', timeout: 10_000 });
  assert.equal(run.status, 1);
  assert.match(run.stderr, /bad flag --batch 0/);
});
