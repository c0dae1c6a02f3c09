import { judgeOwnerLiveness, type LockIdentity } from "@drydock/file-lock";

export interface OwnerClaim {
  pid: number;
  host?: string | undefined;
  bootId?: string | undefined;
  startTime?: number | undefined;
  pidNamespace?: string | undefined;
}

/**
 * Whether a lock owner (or a saga's initiator) may still run, for the preview and the lock-free abort's
 * initiator check: file-lock's own verdict, so a preview never calls dead what a takeover would refuse.
 * "unverifiable" counts as alive (dead only on proof).
 */
export function ownerMayBeAlive(
  claim: OwnerClaim,
  options: { identity?: LockIdentity; isProcessAlive?: (pid: number) => boolean } = {},
): boolean {
  return judgeOwnerLiveness(claim, options) !== "dead";
}
