import { createSystemIdentity, type LockIdentity } from "@drydock/file-lock";

export interface OwnerClaim {
  pid: number;
  host?: string | undefined;
  bootId?: string | undefined;
  startTime?: number | undefined;
}

/**
 * Whether a lock owner may still run, for display and for the lock-free abort's initiator check. Dead only
 * on proof, as @drydock/file-lock judges (its own judgement still guards every takeover):
 *   other host → alive; other boot → dead; kill(pid, 0) ESRCH → dead; EPERM → alive; any other errno →
 *   alive (unverifiable is never "dead"); recorded start time differs from the live pid's → dead (reused).
 */
export function ownerMayBeAlive(
  claim: OwnerClaim,
  options: { identity?: LockIdentity; isProcessAlive?: (pid: number) => boolean } = {},
): boolean {
  const identity = options.identity ?? createSystemIdentity();
  if (claim.host !== undefined && claim.host !== identity.hostname()) return true;
  const bootId = identity.bootId();
  if (claim.bootId !== undefined && bootId !== undefined && claim.bootId !== bootId) return false;
  try {
    const probe =
      options.isProcessAlive ??
      ((pid: number) => {
        process.kill(pid, 0);
        return true;
      });
    if (!probe(claim.pid)) return false;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | null)?.code;
    if (code === "ESRCH") return false;
    return true;
  }
  if (claim.startTime !== undefined) {
    const current = identity.processStartTime(claim.pid);
    if (current !== undefined && current !== claim.startTime) return false;
  }
  return true;
}
