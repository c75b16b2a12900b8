import { createHash } from 'node:crypto';

/** sandboxd's instance id alphabet (DESIGN.md "Instances and workspaces"). */
export const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * The sandboxd instance id for a Flue instance id: the id itself when
 * sandboxd accepts it (with `prefix` in front), else a deterministic hash of
 * it, so any Flue id maps to one workspace and never gets rejected.
 */
export function instanceIdFor(id: string, prefix = ''): string {
  const plain = prefix + id;
  if (INSTANCE_ID.test(plain)) return plain;
  const hashed = `${prefix}flue-${sha256(id).slice(0, 40)}`;
  if (!INSTANCE_ID.test(hashed)) {
    throw new TypeError(`instance prefix ${JSON.stringify(prefix)} cannot start a sandboxd instance id`);
  }
  return hashed;
}

/**
 * The `tool_call_id` sandboxd records a write, edit or bash under.
 *
 * Policy: `flue:<instance>:<digest>:<toolCallId>` (at most 256 characters),
 * where the digest covers the instance, the application's `runId` (empty
 * unless the application sets one), the folder, the model's toolCallId and
 * the arguments. A Flue durable retry re-executes the recorded assistant
 * message, so it sends the same toolCallId with the same arguments from the
 * same folder: same id, and sandboxd answers from its record instead of
 * running the command twice, even from a new process. Providers mint a new
 * toolCallId for every call, and a provider that repeats one with other
 * arguments (or in another folder) gets a different digest, so calls of
 * different runs never collide. Set `runId` when your provider may repeat
 * ids with identical arguments and you want those to run again.
 */
export function sandboxCallId(
  instanceId: string,
  toolCallId: string,
  args: unknown,
  cwd: string,
  runId = '',
): string {
  const digest = sha256(JSON.stringify([instanceId, runId, cwd, toolCallId, canonical(args)])).slice(0, 24);
  const readable = toolCallId.replace(/[^A-Za-z0-9_.:-]/g, '_');
  return `flue:${instanceId}:${digest}:${readable}`.slice(0, 256);
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}
