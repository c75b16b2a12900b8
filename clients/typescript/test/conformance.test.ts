/**
 * tests/conformance/cases.py through the TypeScript client in tools mode:
 * each case runs through the AgentTool objects sandboxdFactory gives Flue
 * (execute -> CallTool with the sandbox's cwd), and must produce the very
 * text the Python suite expects. The cases come from the Python source as
 * data (scripts/ts_data.py cases), never copied.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import type { Sandbox } from '@flue/runtime';

import { SandboxdClient } from '../src/client.js';
import { sandboxdFactory, ToolFailed } from '../src/flue.js';
import { backends, pythonData, startDaemon, type Daemon } from './daemon.js';

interface Step {
  tool: string;
  args: Record<string, unknown>;
  text: string | null;
  match: string | null;
  contains: string[];
  absent: string[];
  is_error: boolean | null;
  fields: Record<string, unknown>;
}
interface Case {
  name: string;
  setup: Step[];
  call: Step;
  then: Step[];
}
interface Result {
  text: string;
  isError: boolean;
  fields: Record<string, unknown>;
}

const CASES = pythonData('cases') as Case[];
const FIELD = /\{call\.(\w+)\}/g;

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function fill(text: string, cwd: string, called: Record<string, unknown>): string {
  return text.replace(FIELD, (_, name: string) => pyStr(called[name])).replaceAll('{cwd}', cwd);
}

function pyStr(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  return String(value);
}

function args(step: Step, cwd: string, called: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(step.args).map(([k, v]) => [k, typeof v === 'string' ? fill(v, cwd, called) : v]),
  );
}

function check(step: Step, result: Result, cwd: string, called: Record<string, unknown>): void {
  const where = `${step.tool} ${JSON.stringify(step.args)}`;
  assert.ok(result.text.length <= 30_000, `${where}: text longer than 30,000 characters`);
  if (step.text !== null) assert.equal(result.text, fill(step.text, cwd, called), where);
  if (step.match !== null) {
    // Python's re.fullmatch with DOTALL; a leading inline (?s) is that flag again.
    const pattern = step.match
      .replace(/^\(\?s\)/, '')
      .replace(FIELD, (_, name: string) => escapeRegex(pyStr(called[name])))
      .replaceAll('{cwd}', escapeRegex(cwd));
    assert.match(result.text, new RegExp(`^(?:${pattern})$`, 's'), where);
  }
  for (const part of step.contains) assert.ok(result.text.includes(fill(part, cwd, called)), `${where}: ${part} missing`);
  for (const part of step.absent) assert.ok(!result.text.includes(fill(part, cwd, called)), `${where}: ${part} present`);
  if (step.is_error !== null) assert.equal(result.isError, step.is_error, `${where}: ${result.text}`);
  if (result.isError) assert.ok(result.text.startsWith('Error: ') || result.text.includes('\nExit code: '), where);
  for (const [key, value] of Object.entries(step.fields)) {
    assert.deepEqual(result.fields[key], value, `${where}: field ${key}`);
  }
}

for (const backend of backends()) {
  describe(`conformance through the TypeScript tools (${backend})`, () => {
    let daemon: Daemon;
    let client: SandboxdClient;
    before(async () => {
      daemon = await startDaemon(backend);
      client = new SandboxdClient({ target: daemon.target });
    });
    after(async () => {
      client.close();
      await daemon.stop();
    });

    CASES.forEach((c, n) => {
      test(c.name, async () => {
        const id = `conf-${n}`;
        const factory = sandboxdFactory({ target: daemon.target, mode: 'tools' });
        const sandbox: Sandbox = await factory.createSandbox({ id });
        const tools = new Map(factory.tools!(sandbox, { subagents: {} }).map((t) => [t.name, t]));
        const cwd = sandbox.cwd;
        let calls = 0;
        const call = async (step: Step, called: Record<string, unknown>): Promise<Result> => {
          const tool = tools.get(step.tool);
          assert.ok(tool, step.tool);
          try {
            const out = await tool.execute(`case-${calls++}`, args(step, cwd, called) as never);
            const text = out.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
            return { text, isError: false, fields: out.details as Record<string, unknown> };
          } catch (error) {
            // Flue tools report failures by throwing: the message is the text.
            assert.ok(error instanceof ToolFailed, String(error));
            return { text: error.message, isError: true, fields: error.fields };
          }
        };
        try {
          for (const step of c.setup) {
            const result = await call(step, {});
            if (step.is_error === null) assert.equal(result.isError, false, `setup ${step.tool}: ${result.text}`);
            check(step, result, cwd, {});
          }
          const result = await call(c.call, {});
          check(c.call, result, cwd, result.fields);
          for (const step of c.then) {
            check(step, await call(step, result.fields), cwd, result.fields);
          }
        } finally {
          await client.deleteSandbox(id).catch(() => false);
        }
      });
    });
  });
}
