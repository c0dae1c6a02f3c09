import { UUID_V4 } from "@drydock/facts";
import { z } from "zod";

/** RFC 4122 version-4 uuid, lower case: exactly what the original lock accepts as a lock token. */
export { UUID_V4 };

/** Largest pid Linux can hand out (and the original lock's bound). */
export const MAX_PID = 0x7fffffff;

/**
 * The owner file `<path>` (and every candidate and election record) holds one of these as JSON plus "\n".
 * The first four fields are the original's, byte for byte; the rest are optional so a lock written by the
 * original reads as it is, and it accepts ours (it ignores unknown keys). Unknown keys are kept, so a
 * takeover compares the whole owner, not only the fields this version knows.
 */
export const LockOwnerSchema = z.looseObject({
  version: z.literal(1),
  pid: z.number().int().min(1).max(MAX_PID),
  token: z.string().regex(UUID_V4),
  /** Wall-clock ms when the owner was created; informational only, never used to judge staleness. */
  createdAt: z.number().gt(0),
  /** os.hostname() of the owner; absent in seed files, which are then taken to be from this host. */
  host: z.string().min(1).max(255).optional(),
  /** /proc/sys/kernel/random/boot_id at creation; absent = unknown (the ctime rule may still apply). */
  bootId: z.string().min(1).max(64).optional(),
  /** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); absent = pid reuse undetectable. */
  startTime: z.number().int().nonnegative().optional(),
  /**
   * The owner's pid namespace, `readlink /proc/self/ns/pid` (e.g. "pid:[4026531836]"). Absent in seed files and
   * in owners written before it was recorded: those are judged as before (their pid is probed here). A recorded
   * namespace other than the reader's means the pid cannot be probed from here: the owner is never judged dead.
   */
  pidNamespace: z.string().min(1).max(64).optional(),
  /** Caller data, e.g. the workspace lock's `{ transactionId, workspaceRoot, purpose }`. */
  payload: z.record(z.string(), z.unknown()).optional(),
});

export type LockOwner = z.infer<typeof LockOwnerSchema>;

/** An election record `<path>.reap-<token>[-<digest>]`: an owner plus the token of the dead lock it reaps. */
export const ReaperRecordSchema = LockOwnerSchema.extend({ targetToken: z.string().min(1).max(128) });

export type ReaperRecord = z.infer<typeof ReaperRecordSchema>;

/** The original lock's older election records held only the reaper's pid: `PID\n`. */
export const LEGACY_REAPER_RECORD = /^[1-9][0-9]*\n?$/;
