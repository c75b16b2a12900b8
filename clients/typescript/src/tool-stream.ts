/**
 * The client end of `ToolCalls`: CallTool calls multiplexed over one
 * long-lived bidirectional stream, answers matched by call id. A stream that
 * breaks fails the calls waiting on it and the next call opens a new one. A
 * daemon without ToolCalls answers UNIMPLEMENTED before running anything
 * (`StreamUnsupported`), so the caller can fall back to unary CallTool.
 */
import { status as GrpcStatus, type ClientDuplexStream } from '@grpc/grpc-js';

import { abortError, errorFromName, mapError, SandboxUnavailable } from './errors.js';

export class StreamUnsupported extends Error {}

export interface RawCallToolRequest {
  instanceId: string;
  name: string;
  argumentsJson: string;
  toolCallId: string;
  cwd: string;
}

export interface RawCallToolResponse {
  text: string;
  isError: boolean;
  fieldsJson: string;
}

interface Answer {
  callId: number;
  outcome: 'result' | 'error';
  result: RawCallToolResponse | null;
  error: { code: string; message: string } | null;
}

type Stream = ClientDuplexStream<object, Answer>;

interface Pending {
  resolve(response: RawCallToolResponse): void;
  reject(error: unknown): void;
}

export class ToolCallStream {
  private stream: Stream | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(private readonly open: () => Stream) {}

  call(request: RawCallToolRequest, signal?: AbortSignal): Promise<RawCallToolResponse> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const callId = this.nextId++;
    return new Promise<RawCallToolResponse>((resolve, reject) => {
      const onAbort = (): void => {
        this.pending.delete(callId);
        // The daemon stops the call and its command; no answer will come.
        this.stream?.write({ callId, cancel: true });
        reject(abortError(signal!));
      };
      this.pending.set(callId, {
        resolve: (response) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(response);
        },
        reject: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      this.ensureOpen().write({ callId, call: request });
    });
  }

  close(): void {
    const stream = this.stream;
    this.stream = undefined;
    stream?.cancel();
  }

  private ensureOpen(): Stream {
    if (this.stream !== undefined) return this.stream;
    const stream = this.open();
    this.stream = stream;
    stream.on('data', (answer: Answer) => {
      const waiting = this.pending.get(answer.callId);
      if (waiting === undefined) return; // a call its caller gave up
      this.pending.delete(answer.callId);
      if (answer.outcome === 'result' && answer.result) waiting.resolve(answer.result);
      else waiting.reject(errorFromName(answer.error?.code ?? 'INTERNAL', answer.error?.message ?? ''));
    });
    const fail = (failure: unknown): void => {
      if (this.stream === stream) this.stream = undefined;
      const waiting = [...this.pending.values()];
      this.pending.clear();
      for (const call of waiting) call.reject(failure);
    };
    stream.on('error', (error: { code?: number }) => {
      fail(error.code === GrpcStatus.UNIMPLEMENTED ? new StreamUnsupported('no ToolCalls RPC') : mapError(error));
    });
    stream.on('end', () => fail(new SandboxUnavailable('the ToolCalls stream ended')));
    return stream;
  }
}
