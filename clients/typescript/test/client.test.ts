import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { SandboxdClient, sharedClient, closeSharedClients } from '../src/client.js';
import {
  ERROR_CLASSES,
  errorFromStatus,
  InvalidArgument,
  NotFound,
  ResourceExhausted,
  SandboxGone,
  SandboxUnavailable,
  Unauthenticated,
} from '../src/errors.js';
import { FULL_NETWORK_WARNING } from '../src/generated/network.js';
import { instanceIdFor, INSTANCE_ID, sandboxCallId } from '../src/ids.js';
import { backends, pythonData, startDaemon, type Daemon } from './daemon.js';

/** Send ``size`` bytes through a forwarded port, half-close, and collect the answer. */
function exchange(port: number, size: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const parts: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => parts.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(parts).toString()));
    socket.on('error', reject);
    socket.end(Buffer.alloc(size, 120));
  });
}

test('the error table is sandboxd/contract/errors.py ERROR_CLASSES, class for class', () => {
  const python = pythonData('errors') as Record<string, string>;
  const ours = Object.fromEntries(ERROR_CLASSES.map((cls) => [cls.name, cls.statusName]));
  assert.deepEqual(ours, python);
  assert.ok(errorFromStatus(5, 'x') instanceof NotFound);
  assert.ok(errorFromStatus(1, 'x') instanceof SandboxUnavailable); // CANCELLED
  assert.equal(errorFromStatus(2, '').constructor.name, 'Internal'); // UNKNOWN
});

test('instance ids: valid ones kept, others hashed deterministically', () => {
  assert.equal(instanceIdFor('agent-1'), 'agent-1');
  const odd = instanceIdFor('user@example.com/chat 7');
  assert.match(odd, INSTANCE_ID);
  assert.equal(odd, instanceIdFor('user@example.com/chat 7'));
  assert.notEqual(odd, instanceIdFor('user@example.com/chat 8'));
  assert.match(instanceIdFor('x'.repeat(300)), INSTANCE_ID);
  assert.equal(instanceIdFor('a', 'app1-'), 'app1-a');
});

test('tool call ids: stable for a retry, distinct across arguments, folders and runs', () => {
  const a = sandboxCallId('i', 'call_1', { command: 'ls' }, '/w');
  assert.equal(a, sandboxCallId('i', 'call_1', { command: 'ls' }, '/w'));
  assert.notEqual(a, sandboxCallId('i', 'call_1', { command: 'pwd' }, '/w'));
  assert.notEqual(a, sandboxCallId('i', 'call_1', { command: 'ls' }, '/w/sub'));
  assert.notEqual(a, sandboxCallId('j', 'call_1', { command: 'ls' }, '/w'));
  assert.notEqual(a, sandboxCallId('i', 'call_1', { command: 'ls' }, '/w', 'run-2'));
  assert.ok(sandboxCallId('i', 'x'.repeat(1000), {}, '/').length <= 256);
});

for (const backend of backends()) {
  describe(`client on the ${backend} backend`, () => {
    let daemon: Daemon;
    let client: SandboxdClient;
    before(async () => {
      daemon = await startDaemon(backend, '--max-payload-bytes', '65536');
      client = new SandboxdClient({ target: daemon.target });
      await client.createSandbox('c1');
    });
    after(async () => {
      client.close();
      closeSharedClients();
      await daemon.stop();
    });

    test('a network policy: set at create, read back, changed, refused when bad; its log', async () => {
      const policy = { mode: 'allow' as const, allow: ['pypi.org', '*.pythonhosted.org:443'], deny: ['evil.pypi.org'] };
      const created = await client.createSandbox('net1', { network: policy });
      assert.deepEqual(created.network, policy);
      assert.deepEqual(created.warnings, []);
      assert.deepEqual((await client.getSandbox('net1')).network, policy);
      const none = await client.setNetworkPolicy('net1', { mode: 'none' });
      assert.deepEqual(none.network, { mode: 'none', allow: [], deny: [] });
      await assert.rejects(client.setNetworkPolicy('net1', { mode: 'allow', allow: ['pypi.org:x'] }), (err: Error) => {
        assert.ok(err instanceof InvalidArgument);
        assert.match(err.message, /network\.allow: network rule 'pypi\.org:x'/);
        return true;
      });
      await assert.rejects(client.setNetworkPolicy('net1', { mode: 'full' }), InvalidArgument);
      assert.equal((await client.getSandbox('net1')).network.mode, 'none');
      const full = await client.createSandbox('net2', { network: true });
      assert.equal(full.network.mode, 'full');
      assert.deepEqual(full.warnings, [FULL_NETWORK_WARNING]);
      assert.deepEqual(await client.networkLog('net1'), []);
      await assert.rejects(client.networkLog('no-such-box'), NotFound);
      await client.deleteSandbox('net1');
      await client.deleteSandbox('net2');
    });

    // Local backend only: its sandbox shares this host's loopback, so the test's
    // own server is "inside" (the Docker side of ports: tests/docker/test_ports.py).
    if (backend === 'local') test('forwardPort relays a local connection to a port inside, both ways', async () => {
      // A server "inside": the local backend's sandbox shares this host's loopback.
            const inside = createServer({ allowHalfOpen: true }, (socket) => {
        const parts: Buffer[] = [];
        socket.on('data', (chunk: Buffer) => parts.push(chunk));
        socket.on('end', () => socket.end(`got ${Buffer.concat(parts).length} bytes`));
      });
      await new Promise<void>((resolve) => inside.listen(0, '127.0.0.1', () => resolve()));
      const remote = (inside.address() as { port: number }).port;
      const forward = await client.forwardPort('c1', remote);
      try {
        for (const size of [4, 3 * 1024 * 1024]) {
          assert.equal(await exchange(forward.port, size), `got ${size} bytes`);
        }
        assert.equal(forward.accepted, 2);
      } finally {
        await forward.close();
        inside.close();
      }
    });

    if (backend === 'local') test('forwardPort shares a stream; a server that never reads holds back its own connection only', async () => {
      // Inside: the first connection is never read; the others are answered with their size.
            let first = true;
      const inside = createServer({ allowHalfOpen: true }, (socket) => {
        if (first) {
          first = false;
          socket.pause();
          return;
        }
        let size = 0;
        socket.on('data', (chunk: Buffer) => (size += chunk.length));
        socket.on('end', () => socket.end(`got ${size} bytes`));
      });
      await new Promise<void>((resolve) => inside.listen(0, '127.0.0.1', () => resolve()));
      const remote = (inside.address() as { port: number }).port;
      const forward = await client.forwardPort('c1', remote);
      try {
        const stuck = connect(forward.port, '127.0.0.1');
        await new Promise<void>((resolve) => stuck.once('connect', () => resolve()));
        // 32 MiB towards a server that reads nothing: the local socket fills and waits.
        let written = true;
        for (let i = 0; i < 32 && written; i++) written = stuck.write(Buffer.alloc(1 << 20, 121));
        await new Promise((resolve) => setTimeout(resolve, 500));
        const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => exchange(forward.port, 1000 + i)));
        assert.deepEqual(answers, Array.from({ length: 30 }, (_, i) => `got ${1000 + i} bytes`));
        assert.equal(forward.accepted, 31);
        assert.equal(forward.sharedStreams, 1);
        stuck.destroy();
      } finally {
        await forward.close();
        inside.close();
      }
    });

    if (backend === 'local') test('forwardPort closes a local connection when nothing listens inside', async () => {
      // The stream is compact (no opened message): the open's NOT_FOUND ends it.
            const probe = createServer();
      await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
      const remote = (probe.address() as { port: number }).port;
      await new Promise<void>((resolve) => probe.close(() => resolve()));
      const forward = await client.forwardPort('c1', remote);
      try {
        const got = await new Promise<number>((resolve) => {
          const socket = connect(forward.port, '127.0.0.1');
          let bytes = 0;
          socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
          socket.on('error', () => undefined);
          socket.on('close', () => resolve(bytes));
          socket.write('GET / HTTP/1.0\r\n\r\n');
        });
        assert.equal(got, 0);
        assert.equal(forward.accepted, 1);
      } finally {
        await forward.close();
      }
    });

    test('file verbs round-trip and map errors', async () => {
      await client.writeFile('c1', 'd/a.txt', 'hello', { createParents: true });
      const page = await client.readFile('c1', 'd/a.txt');
      assert.equal(page.data.toString(), 'hello');
      assert.equal(page.eof, true);
      assert.equal(page.size, 5);
      const info = await client.stat('c1', 'd/a.txt');
      assert.equal(info.type, 'file');
      assert.equal(typeof info.mtimeNs, 'number');
      assert.deepEqual((await client.listDir('c1', 'd')).map((e) => e.name), ['a.txt']);
      assert.deepEqual(await client.exists('c1', 'd'), { exists: true, type: 'directory' });
      assert.equal((await client.exists('c1', 'nope')).exists, false);
      await assert.rejects(client.readFile('c1', 'nope'), NotFound);
      await assert.rejects(client.readFile('c1', 'nope'), (e) => !(e instanceof SandboxGone));
      await assert.rejects(client.createSandbox('bad id!'), InvalidArgument);
      assert.equal(await client.remove('c1', 'd', { recursive: true }), true);
    });

    test('snapshots: create, list, restore in place, a sandbox from one, delete; extend', async () => {
      const box = await client.createSandbox('snap1', { maxLifetimeSeconds: 600 });
      assert.ok(box.expiresAtMs > Date.now());
      assert.equal(box.terminationReason, '');
      const later = await client.extendSandbox('snap1', 1200);
      assert.ok(later.expiresAtMs > box.expiresAtMs);
      await client.writeFile('snap1', 'f.txt', 'one');
      const taken = await client.createSnapshot('snap1', 'v1');
      assert.equal(taken.name, 'v1');
      assert.equal(taken.sourceId, 'snap1');
      assert.ok(['image-reflink', 'image-copy', 'reflink', 'copy'].includes(taken.method));
      assert.deepEqual((await client.listSnapshots()).map((s) => s.name), ['v1']);
      await client.writeFile('snap1', 'f.txt', 'two');
      const restored = await client.restoreSnapshot('snap1', 'v1');
      assert.equal(restored.sandbox.instanceId, 'snap1');
      assert.equal((await client.readFile('snap1', 'f.txt')).data.toString(), 'one');
      const copy = await client.createFromSnapshot('v1', 'snap2');
      assert.equal(copy.sandbox.instanceId, 'snap2');
      assert.equal((await client.readFile('snap2', 'f.txt')).data.toString(), 'one');
      await client.deleteSnapshot('v1');
      await assert.rejects(client.restoreSnapshot('snap1', 'v1'), NotFound);
      await assert.rejects(client.createSnapshot('snap1', 'bad name!'), InvalidArgument);
      await client.deleteSandbox('snap1');
      await client.deleteSandbox('snap2');
    });

    test('templates: built with its log, a cache hit, used, from a snapshot (local: refused)', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'sbdts-tpl-'));
      writeFileSync(join(dir, 'Dockerfile'), 'FROM sandboxd-workspace:latest\nRUN echo from-typescript | tee /home/sandbox/ts\n');
      const tar = execFileSync('tar', ['-C', dir, '-c', '.']);
      if (backend === 'local') {
        await assert.rejects(client.buildTemplate(tar), (e: unknown) => e instanceof InvalidArgument && /templates/.test(e.message));
        await assert.rejects(client.templateFromSnapshot('nope'), NotFound);
        return;
      }
      const made: string[] = [];
      try {
        const lines: string[] = [];
        const built = await client.buildTemplate(tar, { onLog: (line) => lines.push(line) });
        made.push(built.image);
        assert.match(built.image, /^sandboxd-template:/);
        assert.equal(built.cached, false);
        assert.ok(lines.some((line) => line.startsWith('Step 2/')) && lines.includes('from-typescript'), lines.join('\n'));
        const again: string[] = [];
        const cached = await client.buildTemplate([tar.subarray(0, 1000), tar.subarray(1000)], { onLog: (l) => again.push(l) });
        assert.deepEqual([cached.image, cached.cached, again], [built.image, true, []]);
        await client.createSandbox('tpl1', { image: built.image });
        assert.equal((await client.exec('tpl1', { shell: 'cat /home/sandbox/ts' })).stdout.toString(), 'from-typescript\n');
        await client.writeFile('tpl1', 'kept.txt', 'kept');
        await client.createSnapshot('tpl1', 'tpl-v1');
        const committed = await client.templateFromSnapshot('tpl-v1');
        made.push(committed.image);
        assert.notEqual(committed.image, built.image);
        await client.createSandbox('tpl2', { image: committed.image });
        assert.equal((await client.readFile('tpl2', 'kept.txt')).data.toString(), 'kept');
        await assert.rejects(client.templateFromSnapshot('nope'), NotFound);
      } finally {
        for (const id of ['tpl1', 'tpl2']) await client.deleteSandbox(id).catch(() => undefined);
        await client.deleteSnapshot('tpl-v1').catch(() => undefined);
        for (const image of made.reverse()) execFileSync('docker', ['rmi', image]);
      }
    });

    test('readAll pages a file larger than one call may carry', async () => {
      const big = Buffer.alloc(200_000, 'x');
      const made = await client.exec('c1', { shell: "head -c 200000 /dev/zero | tr '\\0' x > big.bin" });
      assert.equal(made.exitCode, 0);
      await assert.rejects(client.readFile('c1', 'big.bin'), (e: unknown) => e instanceof Error);
      const whole = await client.readAll('c1', 'big.bin', { chunkBytes: 32_000 });
      assert.ok(whole.equals(big));
    });

    test('upload and download move files over the payload limit', async () => {
      const big = Buffer.alloc(3 * 1024 * 1024 + 7);
      for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
      const up = await client.upload('c1', 'up/big.bin', big, { createParents: true, chunkBytes: 32 * 1024 });
      assert.equal(up.size, big.length);
      assert.equal(up.created, true);
      assert.ok((await client.download('c1', 'up/big.bin')).equals(big));
      assert.ok((await client.download('c1', 'up/big.bin', { offset: 10, length: 100 })).equals(big.subarray(10, 110)));
      await assert.rejects(client.download('c1', 'up/none.bin'), NotFound);
      await assert.rejects(client.upload('c1', 'no/parent/x', 'x'), (e: unknown) => e instanceof Error && !(e instanceof SandboxGone));
    });

    test('exec and execStream', async () => {
      const result = await client.exec('c1', { shell: 'echo out; echo err >&2; exit 3' });
      assert.equal(result.stdout.toString(), 'out\n');
      assert.equal(result.stderr.toString(), 'err\n');
      assert.equal(result.exitCode, 3);
      const events = [];
      for await (const event of client.execStream('c1', { argv: ['sh', '-c', 'echo a; sleep 0.2; echo b'] })) {
        events.push(event);
      }
      const out = events.filter((e) => e.kind === 'stdout').map((e) => (e.kind === 'stdout' ? e.data.toString() : ''));
      assert.equal(out.join(''), 'a\nb\n');
      const exit = events.at(-1);
      assert.equal(exit?.kind, 'exit');
      assert.equal(exit?.kind === 'exit' && exit.exitCode, 0);
      const timed = await client.exec('c1', { shell: 'sleep 5', timeoutMs: 300 });
      assert.equal(timed.timedOut, true);
    });

    for (const how of ['exec', 'execStream', 'callTool'] as const) {
      test(`aborting ${how} stops the command in the sandbox`, async () => {
        const marker = { exec: '30.1234', execStream: '30.4321', callTool: '30.2143' }[how];
        const controller = new AbortController();
        const started = Date.now();
        setTimeout(() => controller.abort(new Error('enough')), 200);
        const run = async (): Promise<void> => {
          if (how === 'exec') {
            await client.exec('c1', { shell: `sleep ${marker}` }, { signal: controller.signal });
          } else if (how === 'callTool') {
            await client.callTool('c1', 'bash', { command: `sleep ${marker}` }, { signal: controller.signal });
          } else {
            for await (const _ of client.execStream('c1', { shell: `sleep ${marker}` }, { signal: controller.signal })) {
              // nothing is printed
            }
          }
        };
        await assert.rejects(run(), { name: 'AbortError' });
        assert.ok(Date.now() - started < 10_000);
        // The daemon cancels the operation with the call: the sleep is gone.
        let alive = true;
        for (let i = 0; i < 50 && alive; i++) {
          const check = await client.exec('c1', { argv: ['pgrep', '-f', `sleep ${marker}`] });
          alive = check.exitCode === 0;
          if (alive) await new Promise((r) => setTimeout(r, 100));
        }
        assert.equal(alive, false, `sleep ${marker} still runs after the abort`);
      });
    }

    test('callTool with a cwd; a deleted sandbox is SandboxGone', async () => {
      await client.createSandbox('c2');
      await client.makeDir('c2', 'sub');
      const pwd = (await client.exec('c2', { argv: ['pwd'] })).stdout.toString().trim();
      const wrote = await client.callTool('c2', 'write', { path: 'f.txt', content: 'x\n' }, { cwd: `${pwd}/sub` });
      assert.equal(wrote.isError, false, wrote.text);
      assert.equal((await client.readFile('c2', 'sub/f.txt')).data.toString(), 'x\n');
      const bad = await client.callTool('c2', 'read', { file: 'f.txt' });
      assert.equal(bad.isError, true);
      assert.match(bad.text, /^Error: /);
      assert.equal(await client.deleteSandbox('c2'), true);
      await assert.rejects(client.callTool('c2', 'read', { file_path: 'f.txt' }), SandboxGone);
      await assert.rejects(client.exec('c2', { argv: ['true'] }), SandboxGone);
    });

    test('callTool over the ToolCalls stream and over unary CallTool agree', async () => {
      const unary = new SandboxdClient({ target: daemon.target, toolStream: false });
      try {
        await client.makeDir('c1', 'many', { existOk: true });
        const calls = Array.from({ length: 20 }, (_, i) =>
          client.callTool('c1', 'write', { file_path: `many/f${i}.txt`, content: `${i}\n` }),
        );
        const results = await Promise.all(calls);
        results.forEach((r, i) => assert.equal(r.text, `Created many/f${i}.txt (1 line, ${String(i).length + 1} bytes).`));
        const viaStream = await client.callTool('c1', 'glob', { pattern: 'many/*.txt' });
        const viaUnary = await unary.callTool('c1', 'glob', { pattern: 'many/*.txt' });
        assert.equal(viaStream.text, viaUnary.text);
        assert.deepEqual(viaStream.fields, viaUnary.fields);
        await assert.rejects(client.callTool('nobody', 'read', { file_path: 'x' }), SandboxGone);
        await assert.rejects(unary.callTool('nobody', 'read', { file_path: 'x' }), SandboxGone);
      } finally {
        unary.close();
      }
    });

    test('one shared client per target and token', () => {
      const a = sharedClient({ target: daemon.target });
      assert.equal(sharedClient({ target: daemon.target }), a);
      assert.notEqual(sharedClient({ target: daemon.target, token: 't' }), a);
    });
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

describe('TCP with a bearer token', () => {
  let daemon: Daemon;
  let port: number;
  before(async () => {
    port = await freePort();
    daemon = await startDaemon('local', '--tcp', `127.0.0.1:${port}`, '--token', 'sekrit-token-0123456789');
  });
  after(async () => daemon.stop());

  test('the token is sent; without it the call is Unauthenticated', async () => {
    const good = new SandboxdClient({ target: `127.0.0.1:${port}`, token: 'sekrit-token-0123456789' });
    const none = new SandboxdClient({ target: `127.0.0.1:${port}` });
    try {
      assert.equal((await good.createSandbox('tcp1')).instanceId, 'tcp1');
      await assert.rejects(none.createSandbox('tcp2'), Unauthenticated);
    } finally {
      good.close();
      none.close();
    }
  });
});

describe("a tenant's quota (#28)", () => {
  let daemon: Daemon;
  let port: number;
  const token = 'acme-token-0123456789abcdef';
  before(async () => {
    port = await freePort();
    const tokens = join(mkdtempSync(join(tmpdir(), 'sbdts-tokens-')), 'tokens');
    writeFileSync(tokens, `${token} tenant=acme\n`);
    daemon = await startDaemon(
      'local', '--tcp', `127.0.0.1:${port}`, '--tokens-file', tokens, '--tenant-max-sandboxes', '1',
    );
  });
  after(async () => daemon.stop());

  test('the create over the quota is ResourceExhausted naming it, its limit and the use', async () => {
    const acme = new SandboxdClient({ target: `127.0.0.1:${port}`, token });
    try {
      await acme.createSandbox('q1');
      await assert.rejects(acme.createSandbox('q2'), (error: unknown) => {
        assert.ok(error instanceof ResourceExhausted);
        assert.match(
          (error as Error).message,
          /tenant 'acme' is at its sandboxes quota: limit 1, in use 1, .*SANDBOXD_TENANT_MAX_SANDBOXES/,
        );
        return true;
      });
    } finally {
      acme.close();
    }
  });
});
