/**
 * A real `sandboxd serve` for the tests: python -m sandboxd on a temporary
 * unix socket. The local backend always; the Docker backend when
 * SANDBOXD_TS_DOCKER=1 (make test sets it: the engine and image are there).
 * It never skips: a daemon that cannot start fails the test run.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { SandboxdClient } from '../src/client.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
export const PYTHON = process.env.SANDBOXD_PYTHON ?? join(REPO, '.venv', 'bin', 'python');

export type Backend = 'local' | 'docker';

export function backends(): Backend[] {
  return process.env.SANDBOXD_TS_DOCKER === '1' ? ['local', 'docker'] : ['local'];
}

export interface Daemon {
  backend: Backend;
  target: string;
  dir: string;
  stop(): Promise<void>;
}

export async function startDaemon(backend: Backend, ...extra: string[]): Promise<Daemon> {
  const dir = mkdtempSync(join(tmpdir(), 'sbdts-'));
  const socket = join(dir, 'sandboxd.sock');
  const namespace = `sbdts${process.pid}${Math.random().toString(36).slice(2, 7)}`;
  const args = ['-m', 'sandboxd', 'serve', '--socket', socket, '--backend', backend, '--namespace', namespace];
  if (backend === 'local') args.push('--local-root', join(dir, 'root'));
  args.push(...extra);
  const log = join(dir, 'daemon.log');
  const { openSync } = await import('node:fs');
  const out = openSync(log, 'a');
  const child: ChildProcess = spawn(PYTHON, args, { cwd: REPO, stdio: ['ignore', out, out] });
  const target = `unix://${socket}`;
  const client = new SandboxdClient({ target });
  const deadline = Date.now() + 60_000;
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`sandboxd exited early:\n${readFileSync(log, 'utf8')}`);
      try {
        await client.getStatus({ signal: AbortSignal.timeout(1000) });
        break;
      } catch {
        if (Date.now() > deadline) throw new Error(`sandboxd did not answer:\n${readFileSync(log, 'utf8')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    backend,
    target,
    dir,
    async stop() {
      // Remove every workspace this daemon made (its namespace only).
      try {
        for (const info of await client.listSandboxes()) await client.deleteSandbox(info.instanceId);
      } finally {
        client.close();
        child.kill('SIGTERM');
        await new Promise<void>((r) => (child.exitCode !== null ? r() : child.once('exit', () => r())));
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Output of `python scripts/ts_data.py <what>` (facts taken from the Python sources). */
export function pythonData(what: string): unknown {
  const run = spawnSync(PYTHON, [join(REPO, 'scripts', 'ts_data.py'), what], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (run.status !== 0) throw new Error(`ts_data.py ${what} failed: ${run.stderr}`);
  return JSON.parse(run.stdout);
}
