import type { WorkspaceOwner } from "../ports.js";

/**
 * Who holds a workspace lock that is not the restore being recovered, in words: another restore, or a
 * workspace edit (a file write, deletion or checkpoint: restore-saga's `workspace-edit` purpose). A stopped
 * edit's lock guards nothing and goes by itself (the next write, the bot server's start, or
 * `<prefix> locks gc --yes`); a restore's must be settled first.
 */
export function foreignLockHolder(owner: WorkspaceOwner, alive: boolean, prefix: string): string {
  const id = owner.payload.transactionId;
  if (owner.payload.purpose === "workspace-edit") {
    return alive
      ? `a file write, deletion or checkpoint in progress (${id}); retry when it has finished`
      : `the lock left by a stopped file write, deletion or checkpoint (${id}); the next write, the bot server's start or \`${prefix} locks gc --yes\` removes it, then retry`;
  }
  return `another restore (${id}); settle that one first`;
}
