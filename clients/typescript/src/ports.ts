/**
 * `forwardPort`: a sandbox's port on this machine, like `kubectl port-forward`
 * (and `sandboxctl port-forward`): a local listener whose connections ride a
 * few shared `OpenPorts` streams, each connection with windows of its own
 * both ways (a slow reader on either side holds back its own connection
 * only). Against a daemon without `OpenPorts`, one `OpenPort` stream per
 * connection. As runtime_client's forwarder (runtime_client/port_mux.py).
 */
import { createServer, type AddressInfo, type Socket } from 'node:net';

import * as grpc from '@grpc/grpc-js';

import { PORT_CHUNK, PORT_CONNECTIONS_PER_STREAM, PORT_INPUT_WINDOW } from './generated/ports.js';

export interface ForwardOptions {
  /** Local port to listen on; 0 (default): any free one. */
  localPort?: number;
  /** Local address; default 127.0.0.1. */
  localHost?: string;
  /** Inside the sandbox: 127.0.0.1, ::1 or localhost (default: both, 127.0.0.1 first). */
  remoteHost?: string;
}

export interface PortForward {
  /** The local port the listener got. */
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** `OpenPorts` streams its connections share now (0 against a daemon without it). */
  readonly sharedStreams: number;
  /** Stop listening and reset every open connection. */
  close(): Promise<void>;
}

export interface RawPortOutput {
  opened: boolean;
  data: Buffer;
  eof: boolean;
}

export interface RawPortsOutput {
  connId: number;
  opened: boolean;
  data: Buffer;
  eof: boolean;
  error: { code: string; message: string } | null;
  window: number;
}

type Open = () => grpc.ClientDuplexStream<object, RawPortOutput>;
type OpenMux = () => grpc.ClientDuplexStream<object, RawPortsOutput>;

/**
 * Bytes of a connection's output the daemon may send before this side has
 * passed them on; more are granted once half of it was (a small response
 * costs no grant).
 */
const OUTPUT_WINDOW = 1 << 20;

/**
 * How long a new connection's first bytes are waited for before its stream
 * opens: they go with the open (a client that speaks first, as HTTP does,
 * saves a round trip to the sandbox). A server that speaks first waits this
 * once per connection. As runtime_client's forwarder.
 */
export const FIRST_BYTES_WAIT_MS = 2;

/** What a connection sent before it was handed to a stream of its own. */
interface Early {
  data: Buffer[];
  ended: boolean;
}

function relay(
  open: Open,
  socket: Socket,
  instanceId: string,
  port: number,
  host: string,
  taken?: Early,
): () => void {
  const call = open();
  let opened = false;
  const reset = (): void => {
    call.cancel();
    socket.destroy();
  };
  call.on('data', (message: RawPortOutput) => {
    // A compact stream has no opened message: any answer says it opened.
    opened = true;
    if (message.data && message.data.length > 0) {
      // The socket's own backpressure holds the stream (and so the sandbox's server).
      if (!socket.write(message.data)) {
        call.pause();
        socket.once('drain', () => call.resume());
      }
    }
    if (message.eof) socket.end();
  });
  call.on('error', () => socket.destroy());
  call.on('end', () => {
    if (!opened) socket.destroy();
  });
  socket.on('error', reset);
  socket.on('close', () => call.cancel());
  const endWrite = (): void => {
    call.write({ closeWrite: true });
    call.end();
  };
  // The first bytes (or none, after the wait) go with the open, on a compact
  // stream (no opened message to wait for, the end with the last bytes).
  const early: Buffer[] = [];
  let earlyEnd = false;
  let started = false;
  const start = (): void => {
    if (started) return;
    started = true;
    clearTimeout(timer);
    socket.off('data', onEarlyData);
    socket.off('end', onEarlyEnd);
    call.write({ instanceId, port, host, data: Buffer.concat(early), compact: true });
    socket.on('data', (chunk: Buffer) => {
      if (!call.write({ data: chunk })) {
        socket.pause();
        call.once('drain', () => socket.resume());
      }
    });
    socket.on('end', endWrite);
    if (earlyEnd) endWrite();
  };
  const onEarlyData = (chunk: Buffer): void => {
    early.push(chunk);
    start();
  };
  const onEarlyEnd = (): void => {
    earlyEnd = true;
    start();
  };
  if (taken !== undefined) {
    early.push(...taken.data);
    earlyEnd = taken.ended;
  }
  const timer = setTimeout(start, taken === undefined ? FIRST_BYTES_WAIT_MS : 0);
  socket.on('data', onEarlyData);
  socket.on('end', onEarlyEnd);
  if (taken !== undefined) socket.resume();
  return reset;
}

/** One `OpenPorts` call and the connections on it. */
class MuxStream {
  readonly conns = new Map<number, MuxConn>();
  broken = false;
  private nextId = 1;

  private constructor(private readonly call: grpc.ClientDuplexStream<object, RawPortsOutput>) {
    call.on('data', (answer: RawPortsOutput) => this.conns.get(Number(answer.connId))?.deliver(answer));
    call.on('error', () => this.break());
    call.on('end', () => this.break());
  }

  /** Resolves once the daemon's headers came; null if it has no OpenPorts. */
  static start(open: OpenMux): Promise<MuxStream | null> {
    const call = open();
    return new Promise((resolve, reject) => {
      const onError = (error: grpc.ServiceError): void => {
        call.off('metadata', onMetadata);
        if (error.code === grpc.status.UNIMPLEMENTED) resolve(null);
        else reject(error);
      };
      const onMetadata = (): void => {
        call.off('error', onError);
        resolve(new MuxStream(call));
      };
      call.once('error', onError);
      call.once('metadata', onMetadata);
    });
  }

  get hasRoom(): boolean {
    return !this.broken && this.conns.size < PORT_CONNECTIONS_PER_STREAM;
  }

  add(conn: MuxConn): number {
    const id = this.nextId++;
    this.conns.set(id, conn);
    return id;
  }

  send(message: object): void {
    if (!this.broken) this.call.write(message);
  }

  close(): void {
    this.break();
    this.call.cancel();
  }

  private break(): void {
    this.broken = true;
    for (const conn of this.conns.values()) conn.fail();
    this.conns.clear();
  }
}

/** The streams a forward's connections ride: as many as their number needs. */
class PortStreams {
  private streams: MuxStream[] = [];
  private opening: Promise<MuxStream | null> | undefined;
  /** False once the daemon said it has no OpenPorts. */
  supported = true;

  constructor(private readonly open: OpenMux) {}

  async withRoom(): Promise<MuxStream | null> {
    for (;;) {
      this.streams = this.streams.filter((stream) => !stream.broken);
      const found = this.streams.find((stream) => stream.hasRoom);
      if (found) return found;
      if (!this.supported) return null;
      // Many connections at once open one stream, not one each.
      if (this.opening === undefined) {
        this.opening = MuxStream.start(this.open).finally(() => (this.opening = undefined));
      }
      const stream = await this.opening;
      if (stream === null) {
        this.supported = false;
        return null;
      }
      if (!this.streams.includes(stream)) this.streams.push(stream);
    }
  }

  get count(): number {
    return this.streams.filter((stream) => !stream.broken).length;
  }

  close(): void {
    for (const stream of this.streams) stream.close();
    this.streams = [];
  }
}

/** One local connection on a shared stream, with its windows. */
class MuxConn {
  private stream: MuxStream | undefined;
  private id = 0;
  /** Bytes the daemon still takes towards the server. */
  private window = PORT_INPUT_WINDOW;
  private readonly pending: Buffer[] = [];
  private localEnded = false;
  private closeWriteSent = false;
  private eof = false;
  private failed = false;
  private ungranted = 0;

  constructor(private readonly socket: Socket) {}

  /** Opens the connection on ``stream`` with the bytes the local client sent first. */
  attach(stream: MuxStream, instanceId: string, port: number, host: string): void {
    this.stream = stream;
    this.id = stream.add(this);
    const first = this.pending.length > 0 ? this.pending.shift()! : Buffer.alloc(0);
    stream.send({
      connId: this.id,
      open: { instanceId, port, host, data: first, compact: true },
      window: OUTPUT_WINDOW,
    });
    this.flush();
  }

  /** Bytes from the local client (before the stream too: they wait, the socket paused). */
  take(chunk: Buffer): void {
    for (let start = 0; start < chunk.length; start += PORT_CHUNK) {
      this.pending.push(chunk.subarray(start, start + PORT_CHUNK));
    }
    if (this.stream === undefined) this.socket.pause();
    this.flush();
  }

  /** What came before a stream was found, for a stream of its own. */
  drained(): Early {
    return { data: this.pending.splice(0), ended: this.localEnded };
  }

  endLocal(): void {
    this.localEnded = true;
    this.flush();
  }

  deliver(answer: RawPortsOutput): void {
    if (answer.error) {
      // Refused or failed inside (nothing listens, the sandbox is gone): the
      // local client sees its connection closed, as with a refused one.
      this.fail();
      return;
    }
    if (answer.window) {
      this.window += answer.window;
      this.flush();
    }
    if (answer.data && answer.data.length > 0) {
      const size = answer.data.length;
      this.socket.write(answer.data, () => {
        // Passed on: the daemon may send as much again.
        this.ungranted += size;
        if (this.ungranted >= OUTPUT_WINDOW / 2 && !this.eof && !this.failed) {
          this.stream?.send({ connId: this.id, window: this.ungranted });
          this.ungranted = 0;
        }
      });
    }
    if (answer.eof) {
      this.eof = true;
      this.socket.end();
    }
  }

  fail(): void {
    if (this.failed) return;
    this.failed = true;
    this.stream?.conns.delete(this.id);
    this.socket.destroy();
  }

  /** The local connection closed: the daemon forgets this one. */
  closed(): void {
    if (this.stream === undefined || this.failed) return;
    // Ended both ways, the daemon has forgotten it by the next message; else reset.
    if (!(this.eof && this.closeWriteSent)) this.stream.send({ connId: this.id, reset: true });
    this.failed = true;
    this.stream.conns.delete(this.id);
  }

  private flush(): void {
    if (this.stream === undefined || this.failed) return;
    while (this.pending.length > 0 && this.pending[0]!.length <= this.window) {
      const piece = this.pending.shift()!;
      this.window -= piece.length;
      this.stream.send({ connId: this.id, data: piece });
    }
    // Past the window the local client waits (its socket's own flow control).
    if (this.pending.length > 0) this.socket.pause();
    else this.socket.resume();
    if (this.pending.length === 0 && this.localEnded && !this.closeWriteSent) {
      this.closeWriteSent = true;
      this.stream.send({ connId: this.id, closeWrite: true });
    }
  }
}

/** A connection over a shared stream; falls back to a stream of its own. */
function relayShared(
  streams: PortStreams,
  open: Open,
  socket: Socket,
  instanceId: string,
  port: number,
  host: string,
): () => void {
  const conn = new MuxConn(socket);
  let own: (() => void) | undefined;
  let started = false;
  const onData = (chunk: Buffer): void => {
    conn.take(chunk);
    start();
  };
  const onEnd = (): void => {
    conn.endLocal();
    start();
  };
  const start = (): void => {
    if (started) return;
    started = true;
    clearTimeout(timer);
    streams.withRoom().then(
      (stream) => {
        if (socket.destroyed) return;
        if (stream !== null) {
          conn.attach(stream, instanceId, port, host);
          return;
        }
        // No OpenPorts: what came so far is handed to a stream of its own.
        socket.off('data', onData);
        socket.off('end', onEnd);
        socket.pause();
        own = relay(open, socket, instanceId, port, host, conn.drained());
      },
      () => socket.destroy(),
    );
  };
  // The first bytes (or none, after the wait) go with the open.
  const timer = setTimeout(start, FIRST_BYTES_WAIT_MS);
  socket.on('data', onData);
  socket.on('end', onEnd);
  socket.on('error', () => socket.destroy());
  socket.on('close', () => {
    clearTimeout(timer);
    conn.closed();
  });
  return () => {
    if (own) own();
    else socket.destroy();
  };
}

export async function startForward(
  open: Open,
  openMux: OpenMux,
  instanceId: string,
  remotePort: number,
  options: ForwardOptions,
): Promise<PortForward> {
  const resets = new Set<() => void>();
  const streams = new PortStreams(openMux);
  let accepted = 0;
  const host = options.remoteHost ?? 'localhost';
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    accepted += 1;
    const reset = streams.supported
      ? relayShared(streams, open, socket, instanceId, remotePort, host)
      : relay(open, socket, instanceId, remotePort, host);
    resets.add(reset);
    socket.on('close', () => resets.delete(reset));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.localPort ?? 0, options.localHost ?? '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    get accepted() {
      return accepted;
    },
    get sharedStreams() {
      return streams.supported ? streams.count : 0;
    },
    close: async () => {
      for (const reset of resets) reset();
      streams.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
