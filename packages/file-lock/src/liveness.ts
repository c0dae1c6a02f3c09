import { isLockError } from "./errors.js";
import { judgeProcess, type ProcessClaim } from "./internal/liveness.js";
import { type LockOptions, resolveLockOptions } from "./options.js";

export type { ProcessClaim } from "./internal/liveness.js";

/**
 * The lock's own liveness verdict for a recorded process (a lock owner, an initiator pid), for callers that
 * must decide or display whether it may still run: `"dead"` only on proof, `"unverifiable"` when the probe
 * failed with an unexpected errno (treat it as alive). Same rules, same order as the lock itself uses, so
 * a preview can never call dead what a takeover would refuse. The boot-time (ctime) rule needs the lock
 * file, so it does not apply here; a recorded bootId still does.
 */
export function judgeOwnerLiveness(
  claim: ProcessClaim,
  options: Pick<LockOptions, "isProcessAlive" | "identity"> = {},
): "alive" | "dead" | "unverifiable" {
  try {
    return judgeProcess(claim, null, resolveLockOptions(options), "(recorded owner)");
  } catch (error) {
    if (isLockError(error) && error.code === "LOCK_OWNER_UNVERIFIABLE") return "unverifiable";
    throw error;
  }
}
