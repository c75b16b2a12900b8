/**
 * `forwardPort`: a sandbox's port on this machine, like `kubectl port-forward`
 * (and `sandboxctl port-forward`): a local listener, one `OpenPort` stream per
 * connection it accepts.
 */
import { createServer, type AddressInfo, type Socket } from 'node:net';

import type * as grpc from '@grpc/grpc-js';

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
  /** Stop listening and reset every open connection. */
  close(): Promise<void>;
}

export interface RawPortOutput {
  opened: boolean;
  data: Buffer;
  eof: boolean;
}

type Open = () => grpc.ClientDuplexStream<object, RawPortOutput>;

/**
 * How long a new connection's first bytes are waited for before its stream
 * opens: they go with the open (a client that speaks first, as HTTP does,
 * saves a round trip to the sandbox). A server that speaks first waits this
 * once per connection. As runtime_client's forwarder.
 */
export const FIRST_BYTES_WAIT_MS = 2;

function relay(open: Open, socket: Socket, instanceId: string, port: number, host: string): () => void {
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
  const timer = setTimeout(start, FIRST_BYTES_WAIT_MS);
  socket.on('data', onEarlyData);
  socket.on('end', onEarlyEnd);
  return reset;
}

export async function startForward(
  open: Open,
  instanceId: string,
  remotePort: number,
  options: ForwardOptions,
): Promise<PortForward> {
  const resets = new Set<() => void>();
  let accepted = 0;
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    accepted += 1;
    const reset = relay(open, socket, instanceId, remotePort, options.remoteHost ?? 'localhost');
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
    close: async () => {
      for (const reset of resets) reset();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
