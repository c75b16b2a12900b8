/**
 * The client's errors, mirroring runtime_client.errors / sandboxd.contract.errors:
 *
 *   SandboxdError
 *    ├── InvalidArgument      INVALID_ARGUMENT
 *    ├── NotFound             NOT_FOUND
 *    │    └── SandboxGone     the instance itself is gone (deleted, never created)
 *    ├── AlreadyExists        ALREADY_EXISTS
 *    ├── Conflict             FAILED_PRECONDITION
 *    ├── PermissionDenied     PERMISSION_DENIED
 *    ├── Unauthenticated      UNAUTHENTICATED
 *    ├── ResourceExhausted    RESOURCE_EXHAUSTED
 *    ├── Timeout              DEADLINE_EXCEEDED
 *    ├── SandboxUnavailable   UNAVAILABLE (and CANCELLED by the server)
 *    └── Internal             INTERNAL and anything unknown
 *
 * `ERROR_CLASSES` is the one table; `errorFromStatus` is the one place a gRPC
 * status becomes an error. A test compares the table with sandboxd/contract/errors.py.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';

export class SandboxdError extends Error {
  static readonly statusName: string = 'INTERNAL';
  /** The gRPC status name the daemon answered with. */
  readonly status: string;
  constructor(message: string, status?: string) {
    super(message);
    this.name = new.target.name;
    this.status = status ?? (new.target as typeof SandboxdError).statusName;
  }
}

export class InvalidArgument extends SandboxdError {
  static override readonly statusName = 'INVALID_ARGUMENT';
}
export class NotFound extends SandboxdError {
  static override readonly statusName = 'NOT_FOUND';
}
/** The sandbox (not a file in it) does not exist: deleted, or never created. */
export class SandboxGone extends NotFound {}
export class AlreadyExists extends SandboxdError {
  static override readonly statusName = 'ALREADY_EXISTS';
}
export class Conflict extends SandboxdError {
  static override readonly statusName = 'FAILED_PRECONDITION';
}
export class PermissionDenied extends SandboxdError {
  static override readonly statusName = 'PERMISSION_DENIED';
}
export class Unauthenticated extends SandboxdError {
  static override readonly statusName = 'UNAUTHENTICATED';
}
export class ResourceExhausted extends SandboxdError {
  static override readonly statusName = 'RESOURCE_EXHAUSTED';
}
export class Timeout extends SandboxdError {
  static override readonly statusName = 'DEADLINE_EXCEEDED';
}
export class SandboxUnavailable extends SandboxdError {
  static override readonly statusName = 'UNAVAILABLE';
}
export class Internal extends SandboxdError {
  static override readonly statusName = 'INTERNAL';
}

type ErrorClass = typeof SandboxdError;

/** The error tree's table, in sandboxd.contract.errors.ERROR_CLASSES order. */
export const ERROR_CLASSES: readonly ErrorClass[] = [
  InvalidArgument,
  NotFound,
  AlreadyExists,
  Conflict,
  PermissionDenied,
  Unauthenticated,
  ResourceExhausted,
  Timeout,
  SandboxUnavailable,
  Internal,
];

const BY_STATUS: ReadonlyMap<string, ErrorClass> = new Map<string, ErrorClass>([
  ...[...ERROR_CLASSES].reverse().map((cls) => [cls.statusName, cls] as [string, ErrorClass]),
  // As runtime_client._status: a server-side cancel means the sandbox went away.
  ['CANCELLED', SandboxUnavailable],
]);

const STATUS_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(GrpcStatus)
    .filter((entry): entry is [string, number] => typeof entry[1] === 'number')
    .map(([name, code]) => [code, name]),
);

export function statusName(code: number): string {
  return STATUS_NAMES.get(code) ?? 'UNKNOWN';
}

/** The error for a gRPC status code and its details. */
export function errorFromStatus(code: number, details: string): SandboxdError {
  return errorFromName(statusName(code), details);
}

/** The error for a status code name (as streamed answers carry it). */
export function errorFromName(name: string, details: string): SandboxdError {
  const cls = BY_STATUS.get(name) ?? Internal;
  return new cls(details || `sandboxd answered ${name}`, name);
}

/** A gRPC error from grpc-js (`ServiceError`) as one of ours; anything else as is. */
export function mapError(error: unknown): unknown {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'number') {
    const details = 'details' in error && typeof error.details === 'string' ? error.details : '';
    return errorFromStatus(error.code, details);
  }
  return error;
}

/** What `sandboxFromDriver` and Node expect from an aborted call. */
export function abortError(signal: AbortSignal): DOMException {
  const error = new DOMException('The operation was aborted', 'AbortError');
  Object.defineProperty(error, 'cause', { value: signal.reason, enumerable: false });
  return error;
}
