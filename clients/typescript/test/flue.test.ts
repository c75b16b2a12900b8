/**
 * Flue's real agent loop (start, init, dispatch, read) with the scripted
 * faux model, on a real sandboxd, in both modes of sandboxdFactory.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { fauxAssistantMessage, fauxProvider, fauxToolCall } from '@earendil-works/pi-ai';
import type { Context, ToolResultMessage } from '@earendil-works/pi-ai';
import { defineTool, init, useModel, useSandbox, useTool, type Agent } from '@flue/runtime';
import { start } from '@flue/runtime/node';

import { SandboxdClient } from '../src/client.js';
import { deleteSandbox, sandboxdFactory, sandboxdInstanceId } from '../src/flue.js';
import { backends, startDaemon, type Daemon } from './daemon.js';

const faux = fauxProvider();
let target = '';

const stamp = defineTool({
  name: 'stamp',
  description: 'Returns a fixed stamp (a custom tool beside the sandbox tools).',
  run: () => 'stamped',
});

function ToolsAgent(): string {
  useModel('faux/faux-1');
  useSandbox(sandboxdFactory({ target, mode: 'tools' }));
  useTool(stamp);
  return 'Test agent (sandboxd tools).';
}
function DriverAgent(): string {
  useModel('faux/faux-1');
  useSandbox(sandboxdFactory({ target, mode: 'driver' }));
  useTool(stamp);
  return 'Test agent (Flue tools on sandboxd verbs).';
}
function SmallPartsAgent(): string {
  useModel('faux/faux-1');
  useSandbox(sandboxdFactory({ target, mode: 'driver', chunkBytes: 64 * 1024 }));
  return 'Test agent whose files go in 64 KiB parts.';
}
function ToolsInFolderAgent(): string {
  useModel('faux/faux-1');
  useSandbox(sandboxdFactory({ target, mode: 'tools' }), { cwd: 'proj' });
  return 'Test agent working in proj/.';
}
function DriverInFolderAgent(): string {
  useModel('faux/faux-1');
  useSandbox(sandboxdFactory({ target, mode: 'driver' }), { cwd: 'proj' });
  return 'Test agent working in proj/.';
}

type Call = [string, Record<string, unknown>];

interface Seen {
  results: ToolResultMessage[];
  toolNames: string[];
}

/** One dispatch: the model makes `batches` of tool calls, then says "done". */
async function session(agent: Agent, id: string, batches: Call[][]): Promise<Seen> {
  let seen: Context | undefined;
  faux.setResponses([
    ...batches.map(
      (batch) => () => fauxAssistantMessage(batch.map(([name, args]) => fauxToolCall(name, args)), { stopReason: 'toolUse' }),
    ),
    (context: Context) => {
      seen = context;
      return fauxAssistantMessage('done');
    },
  ]);
  const handle = init(agent, { id });
  const reply = await handle.read(await handle.dispatch('go'));
  assert.equal(reply.text, 'done');
  assert.ok(seen);
  const count = batches.reduce((n, b) => n + b.length, 0);
  const results = seen.messages.filter((m): m is ToolResultMessage => m.role === 'toolResult').slice(-count);
  assert.equal(results.length, count);
  return { results, toolNames: (seen.tools ?? []).map((t) => t.name) };
}

function text(result: ToolResultMessage): string {
  return result.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
}

// The same session for both modes: argument names both tool sets accept
// (Flue's own names are sandboxd aliases).
const SCRIPT: Call[][] = [
  [['write', { path: 'src/deep/app.txt', content: 'alpha\nbeta\n' }]],
  [['read', { path: 'src/deep/app.txt' }]],
  [['edit', { path: 'src/deep/app.txt', oldText: 'beta', newText: 'gamma' }]],
  [['bash', { command: 'cat src/deep/app.txt && exit 3' }]],
  [['grep', { pattern: 'gam+a', include: '*.txt' }]],
  [['glob', { pattern: '*.txt' }]],
  [['read', { path: 'missing.txt' }]],
  [['stamp', {}]],
];

const table: string[] = [];

await start({
  agents: [ToolsAgent, DriverAgent, SmallPartsAgent, ToolsInFolderAgent, DriverInFolderAgent],
  providers: [faux.provider],
});

for (const backend of backends()) {
  describe(`Flue on sandboxd (${backend} backend)`, () => {
    let daemon: Daemon;
    let client: SandboxdClient;
    before(async () => {
      daemon = await startDaemon(backend);
      target = daemon.target;
      client = new SandboxdClient({ target });
    });
    after(async () => {
      client.close();
      await daemon.stop();
    });

    for (const [mode, agent] of [
      ['tools', ToolsAgent],
      ['driver', DriverAgent],
    ] as const) {
      test(`${mode} mode: the six tools, a custom tool and errors through the agent loop`, async () => {
        const id = `${mode}-${backend}-a`;
        const { results, toolNames } = await session(agent, id, SCRIPT);
        for (const name of ['read', 'write', 'edit', 'bash', 'grep', 'glob', 'stamp']) {
          assert.ok(toolNames.includes(name), `${name} not offered`);
        }
        const [write, read, edit, bash, grep, glob, missing, custom] = results;
        assert.equal(write?.isError, false, text(write!));
        assert.equal(read?.isError, false, text(read!));
        assert.match(text(read!), /alpha/);
        assert.equal(edit?.isError, false, text(edit!));
        assert.equal(bash?.isError, mode === 'tools', text(bash!)); // Flue's bash reports exit codes as data
        assert.match(text(bash!), /gamma/);
        assert.match(text(bash!), /3/);
        assert.match(text(grep!), /app\.txt/);
        assert.match(text(glob!), /src\/deep\/app\.txt/);
        assert.equal(missing?.isError, true);
        assert.equal(custom?.isError, false);
        assert.match(text(custom!), /stamped/);
        const onDisk = await client.readFile(sandboxdInstanceId(id), 'src/deep/app.txt');
        assert.equal(onDisk.data.toString(), 'alpha\ngamma\n');
        if (mode === 'tools') {
          // The model-facing text is sandboxd's own.
          assert.equal(text(read!), '     1\talpha\n     2\tbeta');
          assert.match(text(missing!), /^Error: /);
        }
        if (backend === 'local') {
          table.push(
            ...SCRIPT.flat().map(([name, args], i) =>
              JSON.stringify({ mode, name, args, isError: results[i]?.isError, text: text(results[i]!) }),
            ),
          );
        }
      });

      test(`${mode} mode: two agent ids get two workspaces`, async () => {
        const a = `${mode}-${backend}-one`;
        const b = `${mode} ${backend} two/odd id`; // not a sandboxd id: hashed
        await session(agent, a, [[['write', { path: 'who.txt', content: 'one' }]]]);
        await session(agent, b, [[['write', { path: 'who.txt', content: 'two' }]]]);
        assert.equal((await client.readFile(sandboxdInstanceId(a), 'who.txt')).data.toString(), 'one');
        assert.equal((await client.readFile(sandboxdInstanceId(b), 'who.txt')).data.toString(), 'two');
        assert.equal(await deleteSandbox(b, { target }), true);
        assert.equal(await deleteSandbox(b, { target }), false);
      });
    }

    for (const [mode, agent] of [
      ['tools', ToolsAgent],
      ['driver', DriverAgent],
    ] as const) {
      test(`${mode} mode: a sandbox deleted under a running agent is a clear error`, async () => {
        const id = `${mode}-${backend}-gone`;
        let seen: Context | undefined;
        faux.setResponses([
          () => fauxAssistantMessage([fauxToolCall('write', { path: 'a.txt', content: 'a' })], { stopReason: 'toolUse' }),
          async () => {
            await deleteSandbox(id, { target }); // gone between two turns
            return fauxAssistantMessage(
              [fauxToolCall('read', { path: 'a.txt' }), fauxToolCall('bash', { command: 'ls' })],
              { stopReason: 'toolUse' },
            );
          },
          (context: Context) => {
            seen = context;
            return fauxAssistantMessage('done');
          },
        ]);
        const handle = init(agent, { id });
        await handle.read(await handle.dispatch('go'));
        const results = (seen?.messages ?? []).filter((m): m is ToolResultMessage => m.role === 'toolResult').slice(-2);
        assert.equal(results.length, 2);
        for (const r of results) {
          assert.equal(r.isError, true);
          assert.match(text(r), /does not exist \(deleted, or never created\)/);
        }
        // Flue asks for the sandbox again with the next message: a fresh one.
        const { results: next } = await session(agent, id, [[['bash', { command: 'ls -A | wc -l' }]]]);
        assert.match(text(next[0]!), /^0(\n|$)/);
      });
    }

    test('tools mode: a retried call (same toolCallId and arguments) runs once', async () => {
      const factory = sandboxdFactory({ target, mode: 'tools' });
      const sandbox = await factory.createSandbox({ id: `tools-${backend}-retry` });
      const bash = factory.tools!(sandbox, { subagents: {} }).find((t) => t.name === 'bash')!;
      const append = { command: 'echo run >> log.txt; wc -l < log.txt' };
      const first = await bash.execute('toolu_1', append);
      const retried = await bash.execute('toolu_1', append); // a durable retry of the same call
      assert.deepEqual(retried.content, first.content);
      await bash.execute('toolu_2', append); // a new call runs
      const log = await client.readFile(sandboxdInstanceId(`tools-${backend}-retry`), 'log.txt');
      assert.equal(log.data.toString(), 'run\nrun\n');
    });

    test('tools mode: unknown keys get sandboxd\'s answer, bounds the schema\'s', async () => {
      const { results } = await session(ToolsAgent, `tools-${backend}-bad`, [
        [['read', { file_path: 'x', color: 'red' }]],
        [['bash', { command: 'true', timeout: 10 }]],
      ]);
      assert.equal(results[0]?.isError, true);
      assert.match(text(results[0]!), /Valid parameters: file_path, offset, limit/);
      // Bounds in the schema are checked by Flue before the call is made.
      assert.equal(results[1]?.isError, true);
      assert.match(text(results[1]!), /timeout: must be >= 1000/);
    });

    for (const [mode, agent] of [
      ['tools', ToolsInFolderAgent],
      ['driver', DriverInFolderAgent],
    ] as const) {
      test(`${mode} mode honours useSandbox's cwd in every tool`, async () => {
        const id = `${mode}-${backend}-cwd`;
        const instance = sandboxdInstanceId(id);
        await client.createSandbox(instance);
        await client.makeDir(instance, 'proj');
        const { results } = await session(agent, id, [
          [['write', { path: 'in.txt', content: 'here\n' }]],
          [['read', { path: 'in.txt' }]],
          [['edit', { path: 'in.txt', oldText: 'here', newText: 'there' }]],
          [['bash', { command: 'pwd; ls' }]],
          [['grep', { pattern: 'there' }]],
          [['glob', { pattern: '*.txt' }]],
        ]);
        for (const r of results) assert.equal(r.isError, false, text(r));
        assert.equal((await client.readFile(instance, 'proj/in.txt')).data.toString(), 'there\n');
        assert.match(text(results[3]!), /\/proj\n/);
        assert.match(text(results[4]!), /in\.txt/);
        assert.match(text(results[5]!), /in\.txt/);
      });
    }

    test('driver mode: exec timeouts surface as exit 124; big files go in parts', async () => {
      const id = `driver-${backend}-t`;
      const { results } = await session(DriverAgent, id, [[['bash', { command: 'sleep 5', timeout: 1 }]]]);
      assert.match(text(results[0]!), /124/);
      const content = 'y'.repeat(300_000);
      const { results: big } = await session(SmallPartsAgent, id, [
        [['write', { path: 'big.txt', content }]],
        [['bash', { command: 'ls' }]],
      ]);
      assert.equal(big[0]?.isError, false, text(big[0]!));
      const whole = await client.readAll(sandboxdInstanceId(id), 'big.txt');
      assert.equal(whole.toString(), content);
      assert.doesNotMatch(text(big[1]!), /sandboxd-part/); // the parts are gone
    });
  });
}

after(() => {
  if (process.env.SANDBOXD_TS_TABLE) writeFileSync(process.env.SANDBOXD_TS_TABLE, table.join('\n') + '\n');
});
