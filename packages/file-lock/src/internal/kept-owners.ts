import type { FileOps } from "../fs.js";
import type { LockOwner } from "../schema.js";
import { removeQuietly } from "./files.js";

/**
 * Owner files kept between a release and this process's next acquire of the same lock (`reuseOwnerFile`).
 *
 * Creating a file costs a file system more than linking one that exists: an inode allocated, then freed at
 * release. On the VM the benchmarks run on, a create took from about 20 µs to 600 µs depending on the hour,
 * a link about 20 µs; an acquire and release of a kept owner took 37-44 µs, with a new one 65-410 µs. A kept owner
 * file is published again, unchanged, with the same link(2): the lock file a contender reads is byte for byte
 * what it was, so no reader can ever see it half-written or rewritten under an open descriptor.
 *
 * Why this is safe, rule by rule:
 * - one acquisition at a time: an entry is taken out of the map while in use, so two concurrent acquisitions
 *   of one lock by this process hold different owners and different tokens (the "our own token" check in
 *   the acquire step cannot mistake one for the other);
 * - only after a clean release: the lock file no longer names the owner when it is kept, so the owner is
 *   only ever linked at one lock path at a time;
 * - a token comes back only while its process lives. Election records and takeovers need the owner proven
 *   dead, and a dead process never publishes again, so a record keyed by a token still never authorises
 *   anything twice;
 * - bounded: at most MAX_KEPT files, the least recently kept removed first, and all of them at exit. A killed
 *   process leaves them as it leaves a candidate at `acquire.published`: `collectLockGarbage` removes them
 *   once the process is dead.
 *
 * Keyed by the lock path, the FileOps seam and every owner fact except the token and `createdAt`, so a
 * different payload or identity never reuses another's file.
 */
export interface KeptOwner {
  readonly owner: LockOwner;
  readonly candidate: string;
  readonly fs: FileOps;
}

export const MAX_KEPT_OWNERS = 16;

const kept = new Map<string, KeptOwner>();
let exitHooked = false;

export function keptOwnerKey(path: string, owner: LockOwner): string {
  const { token: _token, createdAt: _createdAt, ...facts } = owner;
  return `${path}\0${JSON.stringify(facts)}`;
}

/** The kept owner for `key` made through the same seam, taken out of the map (the caller now holds it). */
export function takeKeptOwner(key: string, fs: FileOps): KeptOwner | undefined {
  const entry = kept.get(key);
  if (entry === undefined || entry.fs !== fs) return undefined;
  kept.delete(key);
  return entry;
}

/** Keeps an owner file that no lock names any more; removes it instead when one is already kept for `key`. */
export function keepOwner(key: string, entry: KeptOwner): void {
  if (kept.has(key)) {
    removeQuietly(entry.fs, entry.candidate);
    return;
  }
  kept.set(key, entry);
  if (!exitHooked) {
    exitHooked = true;
    process.once("exit", removeKeptOwners);
  }
  for (const [oldKey, oldest] of kept) {
    if (kept.size <= MAX_KEPT_OWNERS) break;
    kept.delete(oldKey);
    removeQuietly(oldest.fs, oldest.candidate);
  }
}

/** Removes every kept owner file of this process (at exit, and for callers that want a clean directory). */
export function removeKeptOwners(): void {
  for (const entry of kept.values()) removeQuietly(entry.fs, entry.candidate);
  kept.clear();
}

/** How many owner files this process keeps now (for tests and diagnostics). */
export function keptOwnerCount(): number {
  return kept.size;
}
