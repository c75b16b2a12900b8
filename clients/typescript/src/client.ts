/**
 * A sandboxd client over grpc-js: unix socket or TCP, bearer tokens, one
 * error mapping (./errors.ts), streaming exec, and AbortSignal on every call
 * (aborting cancels the gRPC call; the daemon then cancels the operation, so
 * an aborted command is stopped in the sandbox).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { abortError, mapError, NotFound, SandboxGone, SandboxUnavailable } from './errors.js';
import { startForward, type ForwardOptions, type PortForward, type RawPortOutput, type RawPortsOutput } from './ports.js';
import { StreamUnsupported, ToolCallStream, type RawCallToolRequest, type RawCallToolResponse } from './tool-stream.js';
import { NETWORK_MODES, type NetworkMode } from './generated/network.js';
import { readTemplate, sendContext, type BuildContext, type RawTemplatePart, type TemplateInfo } from './templates.js';

export interface ClientOptions {
  /** `unix:///run/sandboxd/sandboxd.sock` (the default), or `host:port` for TCP. */
  target?: string;
  /** Bearer token for the TCP listener (sent as `authorization: Bearer ...`). */
  token?: string;
  /** TLS credentials for TCP; plaintext when omitted. */
  credentials?: grpc.ChannelCredentials;
  /**
   * Send callTool over one ToolCalls stream (default true), falling back to
   * unary CallTool on a daemon without it.
   */
  toolStream?: boolean;
}

export const DEFAULT_TARGET = 'unix:///run/sandboxd/sandboxd.sock';

export interface CallOptions {
  signal?: AbortSignal;
}

export type FileType = 'file' | 'directory' | 'symlink' | 'other' | 'unspecified';

export interface FileInfo {
  path: string;
  name: string;
  type: FileType;
  size: number;
  mode: number;
  mtimeNs: number;
  symlinkTarget: string;
}

export interface SandboxOptions {
  image?: string;
  env?: Record<string, string>;
  workdir?: string;
  memoryBytes?: number;
  cpus?: number;
  pidsLimit?: number;
  /** Where the sandbox may connect (unset: mode none). `true`/`false`, the
   * earlier form, still mean mode full / none. README "Network policy". */
  network?: NetworkPolicy | boolean;
  runtime?: 'runc' | 'runsc';
  labels?: Record<string, string>;
  idleTtlSeconds?: number;
  disableReadGuard?: boolean;
  /** Let a call's processes ptrace another call's (gdb -p); off: each call apart. */
  allowPtrace?: boolean;
  /** Secrets the sandbox uses through a placeholder; the daemon puts the value in
   * request headers to the secret's hosts only (README "Secrets"). */
  secrets?: Secret[];
  /** Deleted this long after its create (unset: the daemon's default); `extendSandbox` moves it. */
  maxLifetimeSeconds?: number;
  /** A stopped sandbox is deleted this long after it stopped (unset: the daemon's default). */
  deleteAfterStoppedSeconds?: number;
  /** The workspace's own disk size (unset: the daemon's default). */
  diskBytes?: number;
}

/** One secret: the sandbox sees a placeholder in `env` (a variable) or `file` (a path). */
export interface Secret {
  name: string;
  /** Write-only: never sent back, never in the sandbox. */
  value: string;
  /** Hosts the value may go to: `api.example.com`, `*.example.com`. */
  hosts: string[];
  env?: string;
  file?: string;
}

/** A sandbox's network policy (sandboxd/contract/network.py is the one model). */
export interface NetworkPolicy {
  mode: NetworkMode;
  /** `example.com`, `*.example.com`, either with `:port`, `10.0.0.0/8[:port]`, `[2001:db8::]/32:443`. */
  allow?: string[];
  /** Same forms; a deny rule wins over allow. */
  deny?: string[];
}

/** One egress decision of a sandbox's gateway (`networkLog`). */
export interface NetworkDecision {
  atMs: number;
  host: string;
  port: number;
  address: string;
  allowed: boolean;
  rule: string;
  /** The agent-facing text ("example.com is not in this sandbox's allow list"). */
  reason: string;
  via: string;
}

export interface SandboxInfo {
  instanceId: string;
  state: string;
  containerId: string;
  volume: string;
  workdir: string;
  createdAtMs: number;
  /** When the daemon deletes it (ms since the epoch); 0: never (`extendSandbox` moves it). */
  expiresAtMs: number;
  /** Why a stopped or expired sandbox is so (lifetime, idle, out_of_memory, killed, exited). */
  terminationReason: string;
  /** The policy in force (after `setNetworkPolicy`, that one). */
  network: Required<NetworkPolicy>;
  /** What the caller should know, e.g. that mode full bypasses every rule. */
  warnings: string[];
}

export interface ReadFileResult {
  data: Buffer;
  size: number;
  eof: boolean;
}

export interface ExecRequest {
  /** Run with `bash -c`. */
  shell?: string;
  /** Run directly, no shell. */
  argv?: string[];
  cwd?: string;
  env?: Record<string, string>;
  stdin?: Uint8Array;
  /** 0 or absent: the daemon's default. */
  timeoutMs?: number;
}

export interface ExecResult {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number;
  timedOut: boolean;
  durationMs: number;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

export type ExecEvent =
  | { kind: 'stdout'; data: Buffer }
  | { kind: 'stderr'; data: Buffer }
  | { kind: 'exit'; exitCode: number; timedOut: boolean; durationMs: number };

export interface ToolCallResult {
  text: string;
  isError: boolean;
  fields: Record<string, unknown>;
}

export interface CallToolOptions extends CallOptions {
  /** Retry safety: a completed write/edit/bash under this id is answered from its record. */
  toolCallId?: string;
  /** The folder the call runs in (relative paths and bash start there). */
  cwd?: string;
}

export interface TemplateOptions extends CallOptions {
  /** Each line of the build's output, as it comes. */
  onLog?: (line: string) => void;
}

export type { BuildContext, TemplateInfo } from './templates.js';

// proto-loader options that make the JS objects honest: 64-bit numbers as
// numbers, every field present (a missing `eof` would page forever), and the
// set member of a oneof named (ExecStream events).
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

function protoPath(): string {
  // dist/src/client.js -> package root -> proto/ (copied from the repository at build).
  const path = fileURLToPath(new URL('../../proto/sandboxd/v1/sandbox.proto', import.meta.url));
  if (!existsSync(path)) {
    throw new Error(`sandboxd proto not found at ${path}; run the package build (it copies proto/)`);
  }
  return path;
}

type Unary = (
  request: object,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response: unknown) => void,
) => grpc.ClientUnaryCall;
type ClientStream = (
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response: unknown) => void,
) => grpc.ClientWritableStream<object>;
type ServerStream = (
  request: object,
  metadata: grpc.Metadata,
  options?: grpc.CallOptions,
) => grpc.ClientReadableStream<unknown>;

let services: Record<string, grpc.ServiceClientConstructor> | undefined;

function serviceClient(
  name: 'SandboxService' | 'SandboxPorts' | 'Network' | 'Lifetimes' | 'Snapshots' | 'Templates' = 'SandboxService',
): grpc.ServiceClientConstructor {
  if (services === undefined) {
    const definition = protoLoader.loadSync(protoPath(), LOADER_OPTIONS);
    const root = grpc.loadPackageDefinition(definition) as unknown as {
      sandboxd: { v1: Record<string, grpc.ServiceClientConstructor> };
    };
    services = root.sandboxd.v1;
  }
  const ctor = services[name];
  if (ctor === undefined) throw new Error(`no service ${name} in the proto`);
  return ctor;
}

function normalizeTarget(target: string): string {
  // grpc-js wants unix:///abs/path (or unix:/abs/path); accept a bare path too.
  if (target.startsWith('/')) return `unix://${target}`;
  return target;
}

const FILE_TYPES: Record<string, FileType> = {
  FILE_TYPE_FILE: 'file',
  FILE_TYPE_DIRECTORY: 'directory',
  FILE_TYPE_SYMLINK: 'symlink',
  FILE_TYPE_OTHER: 'other',
};

interface RawFileInfo {
  path: string;
  name: string;
  type: string;
  size: number;
  mode: number;
  mtimeNs: number;
  symlinkTarget: string;
}

function fileInfo(raw: RawFileInfo): FileInfo {
  return {
    path: raw.path,
    name: raw.name,
    type: FILE_TYPES[raw.type] ?? 'unspecified',
    size: raw.size,
    mode: raw.mode,
    mtimeNs: raw.mtimeNs,
    symlinkTarget: raw.symlinkTarget,
  };
}

interface RawSandboxInfo {
  instanceId: string;
  state: string;
  containerId: string;
  volume: string;
  options: { workdir: string; network: RawNetworkPolicy | null } | null;
  createdAtMs: number;
  expiresAtMs: number;
  terminationReason: string;
  warnings: string[];
}

/** A named snapshot: a sandbox's files at one moment, and its options. */
export interface SnapshotInfo {
  name: string;
  /** The sandbox it was taken of. */
  sourceId: string;
  /** Its bytes on the host's disk (the tenant's disk quota counts them). */
  sizeBytes: number;
  createdAtMs: number;
  /** image-reflink | image-copy | reflink | copy */
  method: string;
  durationMs: number;
}

/** A restore's or a create-from-snapshot's answer: the sandbox and how its files were copied. */
export interface SnapshotCopy {
  sandbox: SandboxInfo;
  method: string;
  durationMs: number;
}

interface RawNetworkPolicy {
  mode: string;
  allow: string[];
  deny: string[];
}

const MODE_TO_PROTO: Record<NetworkMode, string> = {
  none: 'NETWORK_MODE_NONE',
  allow: 'NETWORK_MODE_ALLOW',
  full: 'NETWORK_MODE_FULL',
};

function policyToProto(policy: NetworkPolicy | boolean): RawNetworkPolicy {
  const p: NetworkPolicy = typeof policy === 'boolean' ? { mode: policy ? 'full' : 'none' } : policy;
  if (!NETWORK_MODES.includes(p.mode)) {
    throw new TypeError(`network.mode ${JSON.stringify(p.mode)} is not a mode: use ${NETWORK_MODES.join(', ')}`);
  }
  return { mode: MODE_TO_PROTO[p.mode], allow: p.allow ?? [], deny: p.deny ?? [] };
}

function policyFromProto(raw: RawNetworkPolicy | null | undefined): Required<NetworkPolicy> {
  const name = (raw?.mode ?? '').replace(/^NETWORK_MODE_/, '').toLowerCase();
  // UNSPECIFIED (or unset) is none; a mode only a newer daemon knows is shown as it is.
  const mode = (NETWORK_MODES as readonly string[]).includes(name) ? (name as NetworkMode) : 'none';
  return { mode, allow: raw?.allow ?? [], deny: raw?.deny ?? [] };
}

interface RawSnapshotCopy {
  sandbox: RawSandboxInfo;
  method: string;
  durationMs: number;
}

function snapshotInfo(raw: SnapshotInfo): SnapshotInfo {
  // Only the fields this client names (the proto's options stay behind).
  return {
    name: raw.name,
    sourceId: raw.sourceId,
    sizeBytes: raw.sizeBytes,
    createdAtMs: raw.createdAtMs,
    method: raw.method,
    durationMs: raw.durationMs,
  };
}

function snapshotCopy(raw: RawSnapshotCopy): SnapshotCopy {
  return { sandbox: sandboxInfo(raw.sandbox), method: raw.method, durationMs: raw.durationMs };
}

function sandboxInfo(raw: RawSandboxInfo): SandboxInfo {
  return {
    instanceId: raw.instanceId,
    state: raw.state,
    containerId: raw.containerId,
    volume: raw.volume,
    workdir: raw.options?.workdir || '/workspace',
    createdAtMs: raw.createdAtMs,
    expiresAtMs: raw.expiresAtMs ?? 0,
    terminationReason: raw.terminationReason ?? '',
    network: policyFromProto(raw.options?.network),
    warnings: raw.warnings ?? [],
  };
}

function optionsToProto(options: SandboxOptions | undefined): object {
  const o = options ?? {};
  return {
    image: o.image ?? '',
    env: o.env ?? {},
    workdir: o.workdir ?? '',
    memoryBytes: o.memoryBytes ?? 0,
    cpus: o.cpus ?? 0,
    pidsLimit: o.pidsLimit ?? 0,
    ...(o.network === undefined ? {} : { network: policyToProto(o.network) }),
    runtime: o.runtime === 'runsc' ? 'RUNTIME_RUNSC' : o.runtime === 'runc' ? 'RUNTIME_RUNC' : 'RUNTIME_UNSPECIFIED',
    labels: o.labels ?? {},
    idleTtlSeconds: o.idleTtlSeconds ?? 0,
    ...(o.disableReadGuard === undefined ? {} : { disableReadGuard: o.disableReadGuard }),
    ...(o.allowPtrace === undefined ? {} : { allowPtrace: o.allowPtrace }),
    secrets: (o.secrets ?? []).map((s) => ({
      name: s.name,
      value: s.value,
      hosts: s.hosts,
      env: s.env ?? '',
      file: s.file ?? '',
    })),
    maxLifetimeSeconds: o.maxLifetimeSeconds ?? 0,
    deleteAfterStoppedSeconds: o.deleteAfterStoppedSeconds ?? 0,
    diskBytes: o.diskBytes ?? 0,
  };
}

function execToProto(instanceId: string, request: ExecRequest): object {
  if ((request.shell === undefined) === (request.argv === undefined)) {
    throw new TypeError('exec needs exactly one of shell or argv');
  }
  return {
    instanceId,
    ...(request.shell !== undefined ? { shell: request.shell } : { argv: { args: request.argv } }),
    cwd: request.cwd ?? '',
    env: request.env ?? {},
    stdin: Buffer.from(request.stdin ?? new Uint8Array()),
    timeoutMs: request.timeoutMs ?? 0,
  };
}

export class SandboxdClient {
  readonly target: string;
  private readonly client: grpc.Client;
  private portsClient: grpc.Client | undefined;
  private networkClient: grpc.Client | undefined;
  private lifecycleClients: Record<string, grpc.Client> = {};
  private readonly credentials: grpc.ChannelCredentials;
  private readonly token: string | undefined;
  private toolStream: ToolCallStream | undefined;

  constructor(options: ClientOptions = {}) {
    this.target = normalizeTarget(options.target ?? DEFAULT_TARGET);
    this.token = options.token;
    const Ctor = serviceClient();
    this.credentials = options.credentials ?? grpc.credentials.createInsecure();
    this.client = new Ctor(this.target, this.credentials, {
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
    });
    if (options.toolStream ?? true) {
      this.toolStream = new ToolCallStream(() => {
        const open = (this.client as unknown as Record<string, (m: grpc.Metadata) => unknown>)['ToolCalls'];
        if (open === undefined) throw new Error('no RPC ToolCalls');
        return open.call(this.client, this.metadata()) as ReturnType<ConstructorParameters<typeof ToolCallStream>[0]>;
      });
    }
  }

  close(): void {
    this.toolStream?.close();
    this.portsClient?.close();
    this.networkClient?.close();
    for (const client of Object.values(this.lifecycleClients)) client.close();
    this.client.close();
  }

  // ------------------------------------------------------------ ports

  /**
   * A local listener for `remotePort` inside the sandbox (its network may be
   * off): the connections it accepts ride shared `SandboxPorts.OpenPorts`
   * streams (one `OpenPort` stream each against a daemon without it), bytes
   * relayed both ways with each direction ending on its own, until
   * `close()`. `remoteHost` `localhost` tries 127.0.0.1, then ::1.
   */
  async forwardPort(instanceId: string, remotePort: number, options: ForwardOptions = {}): Promise<PortForward> {
    if (this.portsClient === undefined) {
      const Ctor = serviceClient('SandboxPorts');
      this.portsClient = new Ctor(this.target, this.credentials, {});
    }
    const rpcs = this.portsClient as unknown as Record<string, (m: grpc.Metadata) => unknown>;
    const open = rpcs['OpenPort'];
    const openMany = rpcs['OpenPorts'];
    if (open === undefined || openMany === undefined) throw new Error('no RPC OpenPort(s)');
    const client = this.portsClient;
    return startForward(
      () => open.call(client, this.metadata()) as grpc.ClientDuplexStream<object, RawPortOutput>,
      () => openMany.call(client, this.metadata()) as grpc.ClientDuplexStream<object, RawPortsOutput>,
      instanceId,
      remotePort,
      options,
    );
  }

  private metadata(): grpc.Metadata {
    const metadata = new grpc.Metadata();
    // Per call rather than call credentials: grpc-js refuses those on a
    // plaintext channel, and sandboxd's TCP listener may be plaintext on loopback.
    if (this.token) metadata.set('authorization', `Bearer ${this.token}`);
    return metadata;
  }

  private unary<T>(method: string, request: object, options: CallOptions = {}, client = this.client): Promise<T> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const fn = (client as unknown as Record<string, Unary>)[method];
    if (fn === undefined) throw new Error(`no RPC ${method}`);
    return new Promise<T>((resolve, reject) => {
      let onAbort: (() => void) | undefined;
      const call = fn.call(client, request, this.metadata(), {}, (error, response) => {
        if (onAbort) signal?.removeEventListener('abort', onAbort);
        if (error) {
          reject(signal?.aborted ? abortError(signal) : mapError(error));
        } else {
          resolve(response as T);
        }
      });
      if (signal) {
        onAbort = () => call.cancel();
        signal.addEventListener('abort', onAbort, { once: true });
      }
    });
  }

  /** A NOT_FOUND on an instance's call: is it the file, or the sandbox itself? */
  private async gone(instanceId: string, error: unknown): Promise<unknown> {
    if (!(error instanceof NotFound) || error instanceof SandboxGone) return error;
    try {
      await this.unary('GetSandbox', { instanceId });
      return error;
    } catch (lookup) {
      if (lookup instanceof NotFound) {
        return new SandboxGone(
          `sandbox ${JSON.stringify(instanceId)} does not exist (deleted, or never created): ${error.message}`,
          'NOT_FOUND',
        );
      }
      return error;
    }
  }

  private async on<T>(instanceId: string, method: string, request: object, options?: CallOptions): Promise<T> {
    try {
      return await this.unary<T>(method, { instanceId, ...request }, options);
    } catch (error) {
      throw await this.gone(instanceId, error);
    }
  }

  // ------------------------------------------------------------ lifecycle

  async createSandbox(
    instanceId: string,
    options?: SandboxOptions,
    call?: CallOptions,
  ): Promise<SandboxInfo & { created: boolean }> {
    const response = await this.unary<{ sandbox: RawSandboxInfo; created: boolean }>(
      'CreateSandbox',
      { instanceId, options: optionsToProto(options) },
      call,
    );
    return { ...sandboxInfo(response.sandbox), created: response.created };
  }

  async getSandbox(instanceId: string, call?: CallOptions): Promise<SandboxInfo> {
    const response = await this.unary<{ sandbox: RawSandboxInfo }>('GetSandbox', { instanceId }, call);
    return sandboxInfo(response.sandbox);
  }

  async deleteSandbox(instanceId: string, call?: CallOptions): Promise<boolean> {
    const response = await this.unary<{ deleted: boolean }>('DeleteSandbox', { instanceId }, call);
    return response.deleted;
  }

  // ------------------------------------------------------------ lifetimes and snapshots

  private service(name: 'Lifetimes' | 'Snapshots' | 'Templates'): grpc.Client {
    let client = this.lifecycleClients[name];
    if (client === undefined) {
      const Ctor = serviceClient(name);
      client = new Ctor(this.target, this.credentials, {});
      this.lifecycleClients[name] = client;
    }
    return client;
  }

  /** The sandbox ends `seconds` from now instead (within the daemon's maximum lifetime). */
  async extendSandbox(instanceId: string, seconds: number, call?: CallOptions): Promise<SandboxInfo> {
    const response = await this.unary<{ sandbox: RawSandboxInfo }>(
      'ExtendSandbox',
      { instanceId, seconds },
      call,
      this.service('Lifetimes'),
    );
    return sandboxInfo(response.sandbox);
  }

  /** Keep the sandbox's files (frozen while copied) and options under `name`. */
  async createSnapshot(instanceId: string, name: string, call?: CallOptions): Promise<SnapshotInfo> {
    const response = await this.unary<{ snapshot: SnapshotInfo }>(
      'CreateSnapshot',
      { instanceId, name },
      call,
      this.service('Snapshots'),
    );
    return snapshotInfo(response.snapshot);
  }

  /** This token's tenant's snapshots, by name. */
  async listSnapshots(call?: CallOptions): Promise<SnapshotInfo[]> {
    const response = await this.unary<{ snapshots: SnapshotInfo[] }>(
      'ListSnapshots',
      {},
      call,
      this.service('Snapshots'),
    );
    return response.snapshots.map(snapshotInfo);
  }

  async deleteSnapshot(name: string, call?: CallOptions): Promise<void> {
    await this.unary('DeleteSnapshot', { name }, call, this.service('Snapshots'));
  }

  /** Replace the sandbox's files by the snapshot's; its processes stop and it starts afresh. */
  async restoreSnapshot(instanceId: string, name: string, call?: CallOptions): Promise<SnapshotCopy> {
    const response = await this.unary<RawSnapshotCopy>(
      'RestoreSnapshot',
      { instanceId, name },
      call,
      this.service('Snapshots'),
    );
    return snapshotCopy(response);
  }

  /** A new sandbox with the snapshot's options (`options` replaces those it sets) and files. */
  async createFromSnapshot(
    name: string,
    newId: string,
    options?: SandboxOptions,
    call?: CallOptions,
  ): Promise<SnapshotCopy> {
    const response = await this.unary<RawSnapshotCopy>(
      'CreateFromSnapshot',
      { name, newId, options: optionsToProto(options) },
      call,
      this.service('Snapshots'),
    );
    return snapshotCopy(response);
  }

  // ------------------------------------------------------------ network

  private network(): grpc.Client {
    if (this.networkClient === undefined) {
      const Ctor = serviceClient('Network');
      this.networkClient = new Ctor(this.target, this.credentials, {});
    }
    return this.networkClient;
  }

  /**
   * Put a new network policy in force: between none and allow at any time (a
   * live connection it forbids is closed); to or from full is refused. A bad
   * rule is an InvalidArgument naming it, and nothing changes.
   */
  async setNetworkPolicy(instanceId: string, policy: NetworkPolicy, call?: CallOptions): Promise<SandboxInfo> {
    const response = await this.unary<{ sandbox: RawSandboxInfo }>(
      'SetNetworkPolicy',
      { instanceId, policy: policyToProto(policy) },
      call,
      this.network(),
    );
    return sandboxInfo(response.sandbox);
  }

  /** The sandbox's recent egress decisions, oldest first (`limit`: the newest N; 0: all kept). */
  async networkLog(instanceId: string, limit = 0, call?: CallOptions): Promise<NetworkDecision[]> {
    const response = await this.unary<{ entries: NetworkDecision[] }>(
      'GetNetworkLog',
      { instanceId, limit },
      call,
      this.network(),
    );
    return response.entries;
  }

  async listSandboxes(labelSelector: Record<string, string> = {}, call?: CallOptions): Promise<SandboxInfo[]> {
    const response = await this.unary<{ sandboxes: RawSandboxInfo[] }>('ListSandboxes', { labelSelector }, call);
    return response.sandboxes.map(sandboxInfo);
  }

  async getStatus(call?: CallOptions): Promise<{ version: string; backend: string; namespace: string }> {
    return this.unary('GetStatus', {}, call);
  }

  /** The tools' contract: name, description and JSON schema of each tool. */
  async listTools(call?: CallOptions): Promise<{ name: string; description: string; inputSchema: Record<string, unknown> }[]> {
    const response = await this.unary<{ tools: { name: string; description: string; inputSchemaJson: string }[] }>(
      'ListTools',
      {},
      call,
    );
    return response.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: JSON.parse(tool.inputSchemaJson) as Record<string, unknown>,
    }));
  }

  // ------------------------------------------------------------ files

  readFile(
    instanceId: string,
    path: string,
    options: CallOptions & { offset?: number; length?: number } = {},
  ): Promise<ReadFileResult> {
    return this.on(
      instanceId,
      'ReadFile',
      { path, offset: options.offset ?? 0, ...(options.length === undefined ? {} : { length: options.length }) },
      options,
    );
  }

  /** The whole file, read in pages of `chunkBytes` (each under the payload limit). */
  async readAll(instanceId: string, path: string, options: CallOptions & { chunkBytes?: number } = {}): Promise<Buffer> {
    const chunk = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
    const parts: Buffer[] = [];
    let offset = 0;
    for (;;) {
      const page = await this.readFile(instanceId, path, { ...options, offset, length: chunk });
      parts.push(page.data);
      offset += page.data.length;
      if (page.eof || page.data.length === 0) break;
    }
    return Buffer.concat(parts);
  }

  writeFile(
    instanceId: string,
    path: string,
    data: Uint8Array | string,
    options: CallOptions & { createParents?: boolean; expectedSha256?: string; mode?: number } = {},
  ): Promise<{ size: number; sha256: string; created: boolean }> {
    return this.on(
      instanceId,
      'WriteFile',
      {
        path,
        data: typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data),
        createParents: options.createParents ?? false,
        ...(options.expectedSha256 === undefined ? {} : { expectedSha256: options.expectedSha256 }),
        ...(options.mode === undefined ? {} : { mode: options.mode }),
      },
      options,
    );
  }

  async stat(instanceId: string, path: string, options: CallOptions & { followSymlinks?: boolean } = {}): Promise<FileInfo> {
    const response = await this.on<{ info: RawFileInfo }>(
      instanceId,
      'Stat',
      { path, followSymlinks: options.followSymlinks ?? false },
      options,
    );
    return fileInfo(response.info);
  }

  async listDir(instanceId: string, path: string, options?: CallOptions): Promise<FileInfo[]> {
    const response = await this.on<{ entries: RawFileInfo[] }>(instanceId, 'ListDir', { path }, options);
    return response.entries.map(fileInfo);
  }

  async exists(instanceId: string, path: string, options?: CallOptions): Promise<{ exists: boolean; type: FileType }> {
    const response = await this.on<{ exists: boolean; type: string }>(instanceId, 'Exists', { path }, options);
    return { exists: response.exists, type: FILE_TYPES[response.type] ?? 'unspecified' };
  }

  async makeDir(
    instanceId: string,
    path: string,
    options: CallOptions & { parents?: boolean; existOk?: boolean } = {},
  ): Promise<boolean> {
    const response = await this.on<{ created: boolean }>(
      instanceId,
      'MakeDir',
      { path, parents: options.parents ?? false, existOk: options.existOk ?? false },
      options,
    );
    return response.created;
  }

  async remove(
    instanceId: string,
    path: string,
    options: CallOptions & { recursive?: boolean; missingOk?: boolean } = {},
  ): Promise<boolean> {
    const response = await this.on<{ removed: boolean }>(
      instanceId,
      'Remove',
      { path, recursive: options.recursive ?? false, missingOk: options.missingOk ?? false },
      options,
    );
    return response.removed;
  }

  // ------------------------------------------------------------ transfers

  /**
   * Write a file of any size over the Upload stream (in `chunkBytes` pieces);
   * replaced atomically when the stream completes.
   */
  upload(
    instanceId: string,
    path: string,
    data: Uint8Array | string,
    options: CallOptions & { createParents?: boolean; expectedSha256?: string; mode?: number; chunkBytes?: number } = {},
  ): Promise<{ size: number; sha256: string; created: boolean }> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    const chunk = options.chunkBytes ?? TRANSFER_CHUNK_BYTES;
    const fn = (this.client as unknown as Record<string, ClientStream>)['Upload'];
    if (fn === undefined) throw new Error('no RPC Upload');
    const attempt = new Promise<{ size: number; sha256: string; created: boolean }>((resolve, reject) => {
      const call = fn.call(this.client, this.metadata(), {}, (error, response) => {
        signal?.removeEventListener('abort', onAbort);
        if (error) reject(signal?.aborted ? abortError(signal) : mapError(error));
        else resolve(response as { size: number; sha256: string; created: boolean });
      });
      const onAbort = (): void => call.cancel();
      signal?.addEventListener('abort', onAbort, { once: true });
      call.write({
        header: {
          instanceId,
          path,
          createParents: options.createParents ?? false,
          ...(options.expectedSha256 === undefined ? {} : { expectedSha256: options.expectedSha256 }),
          ...(options.mode === undefined ? {} : { mode: options.mode }),
        },
      });
      void (async () => {
        for (let offset = 0; offset < bytes.length; offset += chunk) {
          // Respect the stream's flow control: wait for drain when the buffer is full.
          if (!call.write({ data: bytes.subarray(offset, offset + chunk) })) {
            await new Promise((r) => call.once('drain', r));
          }
        }
        call.end();
      })().catch(reject);
    });
    return attempt.catch(async (error: unknown) => {
      throw await this.gone(instanceId, error);
    });
  }

  /** A file (or `offset`/`length` of it) of any size over the Download stream. */
  async download(
    instanceId: string,
    path: string,
    options: CallOptions & { offset?: number; length?: number } = {},
  ): Promise<Buffer> {
    const { signal } = options;
    if (signal?.aborted) throw abortError(signal);
    const fn = (this.client as unknown as Record<string, ServerStream>)['Download'];
    if (fn === undefined) throw new Error('no RPC Download');
    const call = fn.call(
      this.client,
      {
        instanceId,
        path,
        offset: options.offset ?? 0,
        ...(options.length === undefined ? {} : { length: options.length }),
      },
      this.metadata(),
    );
    const onAbort = (): void => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    const parts: Buffer[] = [];
    let done: { size: number } | undefined;
    try {
      for await (const raw of call as AsyncIterable<{ part: 'data' | 'done'; data: Buffer; done: { size: number } | null }>) {
        if (raw.part === 'data') parts.push(raw.data);
        else if (raw.part === 'done' && raw.done) done = raw.done;
      }
    } catch (error) {
      if (signal?.aborted) throw abortError(signal);
      throw await this.gone(instanceId, mapError(error));
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    const data = Buffer.concat(parts);
    if (done === undefined || done.size !== data.length) {
      throw new SandboxUnavailable(`download of ${path} ended early (${data.length} bytes received)`);
    }
    return data;
  }

  // ------------------------------------------------------------ templates

  /**
   * Build a template from a Dockerfile and its context, a tar stream (e.g.
   * `tar -C folder -c .`): the build's log to `onLog` line by line, then the
   * template. The same bytes again answer at once (`cached`). Abort stops the build.
   */
  async buildTemplate(context: BuildContext, options: TemplateOptions & { dockerfile?: string } = {}): Promise<TemplateInfo> {
    const client = this.service('Templates');
    const open = (client as unknown as Record<string, (m: grpc.Metadata) => grpc.ClientDuplexStream<object, RawTemplatePart>>)['BuildTemplate'];
    if (open === undefined) throw new Error('no RPC BuildTemplate');
    const call = open.call(client, this.metadata());
    const sending = sendContext(call, options.dockerfile ?? 'Dockerfile', context).catch((error: unknown) => {
      call.cancel();
      throw error;
    });
    const [template] = await Promise.all([this.templateAnswer(call, options), sending]);
    return template;
  }

  /** A template of snapshot `name`: its sandbox's image with the snapshot's files. */
  async templateFromSnapshot(name: string, options: TemplateOptions = {}): Promise<TemplateInfo> {
    const client = this.service('Templates');
    const fn = (client as unknown as Record<string, ServerStream>)['TemplateFromSnapshot'];
    if (fn === undefined) throw new Error('no RPC TemplateFromSnapshot');
    const call = fn.call(client, { name }, this.metadata()) as grpc.ClientReadableStream<RawTemplatePart>;
    return this.templateAnswer(call, options);
  }

  private async templateAnswer(
    call: grpc.ClientReadableStream<RawTemplatePart> & { cancel(): void },
    options: TemplateOptions,
  ): Promise<TemplateInfo> {
    const { signal } = options;
    const onAbort = (): void => call.cancel();
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await readTemplate(call, options.onLog);
    } catch (error) {
      if (signal?.aborted) throw abortError(signal);
      throw mapError(error);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  // ------------------------------------------------------------ exec

  async exec(instanceId: string, request: ExecRequest, options?: CallOptions): Promise<ExecResult> {
    return this.on<ExecResult>(instanceId, 'Exec', execToProto(instanceId, request), options);
  }

  /** Output as it is produced, then one `exit` event. Abort cancels the command. */
  async *execStream(instanceId: string, request: ExecRequest, options: CallOptions = {}): AsyncGenerator<ExecEvent> {
    const { signal } = options;
    if (signal?.aborted) throw abortError(signal);
    const fn = (this.client as unknown as Record<string, ServerStream>)['ExecStream'];
    if (fn === undefined) throw new Error('no RPC ExecStream');
    const call = fn.call(this.client, { exec: execToProto(instanceId, request) }, this.metadata());
    const onAbort = (): void => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const raw of call as AsyncIterable<RawExecEvent>) {
        if (raw.event === 'stdout') yield { kind: 'stdout', data: raw.stdout };
        else if (raw.event === 'stderr') yield { kind: 'stderr', data: raw.stderr };
        else if (raw.event === 'exit' && raw.exit) yield { kind: 'exit', ...raw.exit };
      }
    } catch (error) {
      if (signal?.aborted) throw abortError(signal);
      throw await this.gone(instanceId, mapError(error));
    } finally {
      signal?.removeEventListener('abort', onAbort);
      call.cancel();
    }
  }

  // ------------------------------------------------------------ tools

  async callTool(
    instanceId: string,
    name: string,
    args: Record<string, unknown>,
    options: CallToolOptions = {},
  ): Promise<ToolCallResult> {
    const request: RawCallToolRequest = {
      instanceId,
      name,
      argumentsJson: JSON.stringify(args),
      toolCallId: options.toolCallId ?? '',
      cwd: options.cwd ?? '',
    };
    let response: RawCallToolResponse | undefined;
    if (this.toolStream !== undefined) {
      try {
        response = await this.toolStream.call(request, options.signal);
      } catch (error) {
        if (!(error instanceof StreamUnsupported)) throw await this.gone(instanceId, error);
        this.toolStream = undefined; // an older daemon: unary from now on (nothing ran)
      }
    }
    response ??= await this.on<RawCallToolResponse>(instanceId, 'CallTool', request, options);
    const fields: unknown = response.fieldsJson ? JSON.parse(response.fieldsJson) : {};
    return {
      text: response.text,
      isError: response.isError,
      fields: typeof fields === 'object' && fields !== null ? (fields as Record<string, unknown>) : {},
    };
  }
}

interface RawExecEvent {
  event: 'stdout' | 'stderr' | 'exit';
  stdout: Buffer;
  stderr: Buffer;
  exit: { exitCode: number; timedOut: boolean; durationMs: number } | null;
}

/** Bytes per ReadFile page / WriteFile part: well under the 16 MiB default payload limit. */
export const DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024;
/** Bytes per Upload message (the daemon re-chunks to 1 MiB inside). */
export const TRANSFER_CHUNK_BYTES = 1024 * 1024;

const shared = new Map<string, SandboxdClient>();

/**
 * One client (one channel) per target and token for the whole process:
 * frameworks that rebuild their factories on every render reuse it.
 */
export function sharedClient(options: ClientOptions = {}): SandboxdClient {
  const key = `${normalizeTarget(options.target ?? DEFAULT_TARGET)}\u0000${options.token ?? ''}`;
  let client = shared.get(key);
  if (client === undefined) {
    client = new SandboxdClient(options);
    shared.set(key, client);
  }
  return client;
}

/** Close and forget every shared client (tests, clean shutdown). */
export function closeSharedClients(): void {
  for (const client of shared.values()) client.close();
  shared.clear();
}
