import { recoveryError } from "../errors.js";
import { OperationIdSchema, type RestoreFence, RestoreFenceSchema } from "../schema.js";

/**
 * Checked before anything is read: a malformed fence can never be "close enough". The owner digest must be
 * given explicitly, as a digest or as null ("no owner"); undefined is refused. `prefix` starts the command
 * the message names (`drydock --data-dir <dir>`).
 */
export function validateFence(input: unknown, prefix = "drydock"): RestoreFence {
  const candidate =
    typeof input === "object" && input !== null
      ? {
          expectedSeq: (input as Record<string, unknown>).expectedSeq,
          expectedHash: (input as Record<string, unknown>).expectedHash,
          expectedOwnerDigest: (input as Record<string, unknown>).expectedOwnerDigest,
        }
      : input;
  const parsed = RestoreFenceSchema.safeParse(candidate);
  if (!parsed.success) {
    throw recoveryError(
      "INVALID_ARGUMENT",
      `Restore recovery needs the exact fence from \`${prefix} restores show\`: --expected-seq (an integer ≥ 1), ` +
        "--expected-hash (sha256:…) and --expected-owner-digest (sha256:…, torn:sha256:… or none).",
    );
  }
  return parsed.data;
}

export function validateOperationId(operationId: unknown): string {
  const parsed = OperationIdSchema.safeParse(operationId);
  if (!parsed.success) {
    throw recoveryError(
      "INVALID_ARGUMENT",
      "The operation id must be 1-128 characters of letters, digits, '_' or '-', starting with a letter or digit.",
    );
  }
  return parsed.data;
}

/** No control characters, trimmed, bounded; the fallback when nothing is left. */
export function boundedText(value: unknown, fallback: string, maximum: number): string {
  let text = "";
  for (const character of String(value ?? "")) {
    const code = character.charCodeAt(0);
    text += code < 32 || code === 127 ? " " : character;
  }
  return (text.trim() || fallback).slice(0, maximum);
}
