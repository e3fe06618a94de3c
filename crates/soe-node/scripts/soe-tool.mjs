// The Rust `soe` tool, as the tests and the benchmark drive it.
import { spawn } from 'node:child_process';

/** Runs `soe args...`; resolves with its exit status and everything it printed. */
export function runSoe(bin, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, out }));
  });
}

/** Starts `soe serve` on a free loopback port; resolves with the process and its port. */
export function startServe(bin, extraArgs = []) {
  const child = spawn(bin, ['serve', '--bind', '127.0.0.1:0', ...extraArgs], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (d) => {
      text += d;
      const m = /127\.0\.0\.1:(\d+)/.exec(text);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.on('error', reject);
  });
}
