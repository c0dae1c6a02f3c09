import type { SagaEvent, SagaHead } from "../schema.js";

/** What this store verified in one saga directory: each event with its exact bytes, and HEAD with its bytes. */
export interface VerifiedChain {
  events: readonly { event: SagaEvent; bytes: Buffer }[];
  head: { head: SagaHead; bytes: Buffer } | null;
}

/**
 * Memo of verified chains, per saga directory. A replay re-reads every file every time; what it skips is
 * re-verifying a file whose name and bytes are identical to one it verified before after an identical
 * prefix, since the verification is a function of those alone (the name carries the phase the event must
 * hold, so the replay compares it with the remembered event's; the workspace identity, which is not in
 * the file, is checked every time). An advance also adds the event and HEAD it has just written: it built them under the saga's lock
 * from a chain it had just verified, by the rules a replay checks, so the next replay compares its own
 * output byte for byte instead of parsing it again. So tampering is caught exactly as before: a changed
 * byte is a different file, verified in full. This is memoization, not trust in timestamps or a cached
 * view of the disk. Bounded by the bytes it holds (the least recently replayed chains go first), not by a
 * count: a chain may hold up to 64 events of 32 KiB each.
 */
export function verifiedChains(budgetBytes = 16 * 1024 * 1024) {
  const chains = new Map<string, { chain: VerifiedChain; bytes: number }>();
  let held = 0;
  const forget = (dir: string): void => {
    const old = chains.get(dir);
    if (!old) return;
    held -= old.bytes;
    chains.delete(dir);
  };
  return {
    recall: (dir: string): VerifiedChain | undefined => chains.get(dir)?.chain,
    remember(dir: string, chain: VerifiedChain): void {
      forget(dir);
      const bytes = chain.events.reduce((sum, e) => sum + e.bytes.length, chain.head?.bytes.length ?? 0);
      if (bytes > budgetBytes) return;
      chains.set(dir, { chain, bytes });
      held += bytes;
      for (const oldest of chains.keys()) {
        if (held <= budgetBytes) break;
        forget(oldest);
      }
    },
    forget,
  };
}
