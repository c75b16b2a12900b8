/**
 * Templates (the `Templates` service of proto/sandboxd/v1/sandbox.proto):
 * images sandboxes are created from, built by the daemon from a Dockerfile
 * and its context, or from a snapshot. Both answer the build's log line by
 * line, then the template; `SandboxdClient.buildTemplate` and
 * `templateFromSnapshot` use what is here.
 */
import type * as grpc from '@grpc/grpc-js';

import { SandboxUnavailable } from './errors.js';

/** A template: an image a sandbox can be created from (`createSandbox(id, { image })`). */
export interface TemplateInfo {
  /** The tag to create sandboxes with (named by the build's content). */
  image: string;
  /** Built before from the same content: nothing ran. */
  cached: boolean;
  durationMs: number;
  sizeBytes: number;
}

/** The build's context: a tar stream (e.g. `tar -C folder -c .`), whole or in pieces. */
export type BuildContext = Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

export interface RawTemplatePart {
  part: 'log' | 'done';
  log: string;
  done: TemplateInfo | null;
}

/** How much of the context goes in one message. */
export const CONTEXT_PIECE_BYTES = 1 << 20;

async function* pieces(context: BuildContext): AsyncGenerator<Uint8Array> {
  if (context instanceof Uint8Array) {
    for (let offset = 0; offset < context.length; offset += CONTEXT_PIECE_BYTES) {
      yield context.subarray(offset, offset + CONTEXT_PIECE_BYTES);
    }
    return;
  }
  for await (const piece of context) {
    for (let offset = 0; offset < piece.length; offset += CONTEXT_PIECE_BYTES) {
      yield piece.subarray(offset, offset + CONTEXT_PIECE_BYTES);
    }
  }
}

/** Send the header, then the context, then end the stream (its flow control kept). */
export async function sendContext(
  call: grpc.ClientWritableStream<object>,
  dockerfile: string,
  context: BuildContext,
): Promise<void> {
  call.write({ header: { dockerfile } });
  for await (const piece of pieces(context)) {
    if (!call.write({ data: piece })) await new Promise((r) => call.once('drain', r));
  }
  call.end();
}

/** The log lines to `onLog`, then the template; the daemon's refusal as it said it. */
export async function readTemplate(
  answers: AsyncIterable<RawTemplatePart>,
  onLog: ((line: string) => void) | undefined,
): Promise<TemplateInfo> {
  let done: TemplateInfo | undefined;
  for await (const raw of answers) {
    if (raw.part === 'log') onLog?.(raw.log);
    else if (raw.part === 'done' && raw.done) {
      const { image, cached, durationMs, sizeBytes } = raw.done;
      done = { image, cached, durationMs, sizeBytes };
    }
  }
  if (done === undefined) throw new SandboxUnavailable('the daemon ended the build without an answer');
  return done;
}
