/**
 * `sandboxdFactory`: a Flue `SandboxFactory` backed by sandboxd.
 *
 * - `mode: 'tools'` (default): the model gets sandboxd's six tools (read,
 *   write, edit, bash, grep, glob) with sandboxd's own model-facing text;
 *   a call carries the folder Flue asked for (`useSandbox(f, {cwd})`) when
 *   it is not the workspace itself.
 * - `mode: 'driver'`: Flue's built-in tools run on sandboxd's low-level verbs
 *   through `sandboxFromDriver`.
 *
 * Flue builds a fresh factory on every render; all factories for one target
 * and token share one gRPC channel (`sharedClient`).
 */
import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';

import { sandboxFromDriver } from '@flue/runtime';
import type { FileStat, Sandbox, SandboxDriver, SandboxFactory, ShellResult } from '@flue/runtime';

import { DEFAULT_CHUNK_BYTES, sharedClient, type ClientOptions, type SandboxdClient, type SandboxOptions } from './client.js';
import { NotFound } from './errors.js';
import { TOOL_SPECS } from './generated/tools.js';
import { instanceIdFor, sandboxCallId } from './ids.js';
import type { ToolSpec } from './toolspec.js';

type AgentTool = ReturnType<NonNullable<SandboxFactory['tools']>>[number];

export interface SandboxdFactoryOptions extends ClientOptions {
  /** 'tools' (sandboxd's six tools, default) or 'driver' (Flue's tools on sandboxd's verbs). */
  mode?: 'tools' | 'driver';
  /** Options for the workspaces this factory creates (image, limits, env, labels...). */
  sandbox?: SandboxOptions;
  /** Put in front of every instance id (one daemon, several applications). */
  instancePrefix?: string;
  /**
   * What a command without a timeout gets, in ms: the daemon's largest exec
   * timeout (SANDBOXD_MAX_EXEC_TIMEOUT_MS, 3,600,000 by default). Explicit
   * timeouts are sent as they are (rounded up); one over the daemon's
   * limit is refused with a clear InvalidArgument.
   */
  maxExecTimeoutMs?: number;
  /** Bytes per ReadFile page / WriteFile part (keep under SANDBOXD_MAX_PAYLOAD_BYTES). */
  chunkBytes?: number;
  /** Mixed into every tool_call_id (see `sandboxCallId`); empty by default. */
  runId?: string;
}

interface Binding {
  client: SandboxdClient;
  instanceId: string;
  /** The workspace's own folder (the sandbox's base cwd). */
  workdir: string;
  runId: string;
}

// Flue hands tools() a wrapper of our sandbox (cwd scoping, skill overlay)
// that keeps none of our properties, so a tool finds its instance by asking
// the sandbox itself: an `exists` of a one-time probe path reaches our driver
// through every wrapper, and the driver answers it from memory.
const PROBE_ROOT = '/.sandboxd-flue-probe/';
const probeAnswers = new Map<string, Binding>();
const bindings = new WeakMap<object, Promise<Binding>>();

async function bindingOf(sandbox: Sandbox): Promise<Binding> {
  let found = bindings.get(sandbox);
  if (found === undefined) {
    found = (async () => {
      const nonce = randomUUID();
      const answered = await sandbox.exists(PROBE_ROOT + nonce);
      const binding = probeAnswers.get(nonce);
      probeAnswers.delete(nonce);
      if (!answered || binding === undefined) {
        throw new Error('sandboxd tools were given a sandbox that sandboxdFactory did not create');
      }
      return binding;
    })();
    bindings.set(sandbox, found);
    found.catch(() => bindings.delete(sandbox));
  }
  return found;
}

function encode(content: string | Uint8Array): Buffer {
  return typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content);
}

/** The nine driver verbs on sandboxd's low-level RPCs. Paths arrive absolute. */
export function sandboxdDriver(binding: Binding, options: SandboxdFactoryOptions = {}): SandboxDriver {
  const { client, instanceId } = binding;
  const chunk = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  const maxTimeout = options.maxExecTimeoutMs ?? 3_600_000;

  async function writeFile(path: string, content: string | Uint8Array): Promise<void> {
    const data = encode(content);
    if (data.length <= chunk) {
      await client.writeFile(instanceId, path, data);
      return;
    }
    // Over one call's payload: parts beside the target, joined in the
    // sandbox by one `cat`, then renamed over it (readers never see half).
    const base = `${path}.sandboxd-part-${randomUUID().slice(0, 8)}`;
    const parts: string[] = [];
    try {
      for (let offset = 0, n = 0; offset < data.length; offset += chunk, n++) {
        const part = `${base}.${n}`;
        parts.push(part);
        await client.writeFile(instanceId, part, data.subarray(offset, offset + chunk));
      }
      const joined = await client.exec(instanceId, {
        argv: ['sh', '-c', 'out="$1"; shift; cat "$@" > "$out.tmp" && mv -f "$out.tmp" "$out"', 'sh', path, ...parts],
      });
      if (joined.exitCode !== 0) {
        throw new Error(`writing ${path} in parts failed: ${joined.stderr.toString('utf8').trim()}`);
      }
    } finally {
      await Promise.all(parts.map((part) => client.remove(instanceId, part, { missingOk: true }).catch(() => false)));
    }
  }

  return {
    async readFile(path) {
      return (await client.readAll(instanceId, path, { chunkBytes: chunk })).toString('utf8');
    },
    async readFileBuffer(path) {
      return new Uint8Array(await client.readAll(instanceId, path, { chunkBytes: chunk }));
    },
    writeFile,
    async stat(path): Promise<FileStat> {
      const target = await client.stat(instanceId, path, { followSymlinks: true });
      const self = await client.stat(instanceId, path, { followSymlinks: false });
      return {
        isFile: target.type === 'file',
        isDirectory: target.type === 'directory',
        isSymbolicLink: self.type === 'symlink',
        size: target.size,
        mtime: new Date(Math.floor(target.mtimeNs / 1e6)),
      };
    },
    async readdir(path) {
      return (await client.listDir(instanceId, path)).map((entry) => entry.name);
    },
    async exists(path) {
      if (path.startsWith(PROBE_ROOT)) {
        probeAnswers.set(path.slice(PROBE_ROOT.length), binding);
        return true;
      }
      try {
        return (await client.exists(instanceId, path)).exists;
      } catch {
        return false; // the contract: exists never throws
      }
    },
    async mkdir(path, opts) {
      const recursive = opts?.recursive ?? false;
      await client.makeDir(instanceId, path, { parents: recursive, existOk: recursive });
    },
    async rm(path, opts) {
      await client.remove(instanceId, path, { recursive: opts?.recursive ?? false, missingOk: opts?.force ?? false });
    },
    async exec(command, opts): Promise<ShellResult> {
      const timeoutMs = opts?.timeoutMs === undefined ? maxTimeout : Math.max(1, Math.ceil(opts.timeoutMs));
      const result = await client.exec(
        instanceId,
        {
          shell: command,
          ...(opts?.cwd === undefined ? {} : { cwd: opts.cwd }),
          ...(opts?.env === undefined ? {} : { env: opts.env }),
          timeoutMs,
        },
        opts?.signal ? { signal: opts.signal } : {},
      );
      let stderr = result.stderr.toString('utf8');
      for (const [cut, stream] of [
        [result.stdoutTruncated, 'stdout'],
        [result.stderrTruncated, 'stderr'],
      ] as const) {
        if (cut) stderr += `${stderr && !stderr.endsWith('\n') ? '\n' : ''}[sandboxd: ${stream} was cut at the daemon's output limit]\n`;
      }
      if (result.timedOut) {
        // timeout(1)'s convention, as Flue's adapters report a deadline.
        stderr += `${stderr && !stderr.endsWith('\n') ? '\n' : ''}[sandboxd: timed out after ${timeoutMs} ms; the command was stopped]\n`;
      }
      return {
        stdout: result.stdout.toString('utf8'),
        stderr,
        exitCode: result.timedOut ? 124 : result.exitCode,
      };
    },
  };
}

/** Rename alias keys to the schema's names, so Flue's schema check accepts them. */
function prepareArguments(spec: ToolSpec): (args: unknown) => Record<string, unknown> {
  return (args) => {
    if (typeof args !== 'object' || args === null || Array.isArray(args)) return args as Record<string, unknown>;
    const out: Record<string, unknown> = { ...(args as Record<string, unknown>) };
    for (const [alias, canonical] of Object.entries(spec.aliases)) {
      // Both given: leave them, sandboxd names the conflict.
      if (alias in out && !(canonical in out)) {
        out[canonical] = out[alias];
        delete out[alias];
      }
    }
    return out;
  };
}

/** A tool's model-facing failure: `message` is sandboxd's text, `fields` its structured fields. */
export class ToolFailed extends Error {
  readonly fields: Record<string, unknown>;
  constructor(text: string, fields: Record<string, unknown>) {
    super(text);
    this.name = 'ToolFailed';
    this.fields = fields;
  }
}

/** sandboxd's six tools for one (possibly cwd-scoped) Flue sandbox. */
export function sandboxdTools(sandbox: Sandbox): AgentTool[] {
  return TOOL_SPECS.map((spec): AgentTool => ({
    name: spec.name,
    label: spec.name,
    description: spec.description,
    parameters: spec.parameters as AgentTool['parameters'],
    prepareArguments: prepareArguments(spec),
    ...(spec.name === 'bash' ? { executionMode: 'sequential' as const } : {}),
    async execute(toolCallId: string, params: unknown, signal?: AbortSignal) {
      const binding = await bindingOf(sandbox);
      const args = (params ?? {}) as Record<string, unknown>;
      // The workdir itself needs no folder: bash then keeps its saved cwd
      // between calls, as its description tells the model.
      const cwd = posix.normalize(sandbox.cwd) === binding.workdir ? '' : sandbox.cwd;
      const result = await binding.client.callTool(binding.instanceId, spec.name, args, {
        toolCallId: sandboxCallId(binding.instanceId, toolCallId, args, cwd, binding.runId),
        ...(cwd ? { cwd } : {}),
        ...(signal ? { signal } : {}),
      });
      // Flue's tools report failure by throwing; the text is sandboxd's.
      if (result.isError) throw new ToolFailed(result.text, result.fields);
      return { content: [{ type: 'text' as const, text: result.text }], details: result.fields };
    },
  }));
}

const workdirs = new Map<string, string>();

/** A Flue SandboxFactory whose instances are sandboxd workspaces. */
export function sandboxdFactory(options: SandboxdFactoryOptions = {}): SandboxFactory {
  const client = sharedClient(options);
  const mode = options.mode ?? 'tools';
  const factory: SandboxFactory = {
    async createSandbox({ id }) {
      const instanceId = instanceIdFor(id, options.instancePrefix);
      await client.createSandbox(instanceId, options.sandbox);
      // The workdir's real path (the local backend's is a host folder),
      // asked once: Flue calls createSandbox for every message.
      const key = `${client.target}\u0000${instanceId}`;
      let cwd = workdirs.get(key);
      if (cwd === undefined) {
        const pwd = await client.exec(instanceId, { argv: ['pwd'] });
        cwd = posix.normalize(pwd.stdout.toString('utf8').trim() || '/workspace');
        workdirs.set(key, cwd);
      }
      const binding: Binding = { client, instanceId, workdir: cwd, runId: options.runId ?? '' };
      return sandboxFromDriver(sandboxdDriver(binding, options), cwd);
    },
  };
  if (mode === 'tools') {
    // Flue stores this and calls it unbound: no `this` here.
    factory.tools = (sandbox) => sandboxdTools(sandbox);
  }
  return factory;
}

/** The sandboxd instance id a Flue agent instance id maps to. */
export function sandboxdInstanceId(id: string, options: Pick<SandboxdFactoryOptions, 'instancePrefix'> = {}): string {
  return instanceIdFor(id, options.instancePrefix);
}

/**
 * Delete the workspace of a Flue agent instance (Flue never deletes
 * sandboxes itself). True when there was one to delete.
 */
export async function deleteSandbox(id: string, options: SandboxdFactoryOptions = {}): Promise<boolean> {
  try {
    return await sharedClient(options).deleteSandbox(instanceIdFor(id, options.instancePrefix));
  } catch (error) {
    if (error instanceof NotFound) return false;
    throw error;
  }
}
