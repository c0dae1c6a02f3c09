/**
 * The three locks under comparison, behind one shape. Retry settings are chosen to be comparable: each
 * waits with a backoff that starts near 1 ms and is capped at 20 ms (drydock: retryMs 20 with jitter;
 * proper-lockfile: 3,000 retries of 1..20 ms, factor 1.5; lockfile: fixed pollPeriod 10 ms, the midpoint, since it
 * has no backoff). Critical sections are empty, so the figures measure the locks alone.
 */
import { acquireLock, acquireLockSync } from "@drydock/file-lock";
import lockfile from "lockfile";
import properLockfile from "proper-lockfile";

export type LockImpl =
  | "drydock"
  | "drydock-sync"
  | "drydock-reuse"
  | "drydock-reuse-sync"
  | "proper-lockfile"
  | "proper-lockfile-sync"
  | "lockfile"
  | "lockfile-sync";

/** A release that may be async (proper-lockfile's is): callers await it before the next acquire. */
export type Release = () => Promise<void> | void;

export interface Locker {
  acquire(): Promise<Release> | Release;
}

export function makeLocker(impl: LockImpl, path: string): Locker {
  switch (impl) {
    case "drydock":
      return {
        async acquire() {
          const h = await acquireLock(path, { waitMs: 60_000, retryMs: 20, label: "bench" });
          return () => h.release();
        },
      };
    case "drydock-sync":
      return {
        acquire() {
          const h = acquireLockSync(path, { waitMs: 60_000, retryMs: 20, label: "bench" });
          return () => h.release();
        },
      };
    // The same lock with reuseOwnerFile (what restore-saga's state locks use): the kept owner file is
    // linked again instead of a new one being written.
    case "drydock-reuse":
      return {
        async acquire() {
          const h = await acquireLock(path, {
            waitMs: 60_000,
            retryMs: 20,
            label: "bench",
            reuseOwnerFile: true,
          });
          return () => h.release();
        },
      };
    case "drydock-reuse-sync":
      return {
        acquire() {
          const h = acquireLockSync(path, {
            waitMs: 60_000,
            retryMs: 20,
            label: "bench",
            reuseOwnerFile: true,
          });
          return () => h.release();
        },
      };
    case "proper-lockfile":
      return {
        async acquire() {
          const release = await properLockfile.lock(path, {
            realpath: false,
            stale: 10_000,
            // 3,000 retries capped at 20 ms ≈ a 60 s wait, like the others. (A huge count such as 1e6 makes the
            // retry library precompute that many timeouts on every call: ~280 ms per lock.)
            retries: { retries: 3_000, minTimeout: 1, maxTimeout: 20, factor: 1.5 },
          });
          return () => release();
        },
      };
    case "proper-lockfile-sync":
      // proper-lockfile's sync API cannot wait (it throws ESYNC with retries): usable uncontended only.
      return {
        acquire() {
          const release = properLockfile.lockSync(path, { realpath: false, stale: 10_000 });
          return () => release();
        },
      };
    case "lockfile":
      return {
        acquire() {
          return new Promise<Release>((resolve, reject) => {
            lockfile.lock(path, { wait: 60_000, pollPeriod: 10, stale: 10_000 }, (error) => {
              if (error) reject(error);
              else resolve(() => lockfile.unlockSync(path));
            });
          });
        },
      };
    case "lockfile-sync":
      // lockfile's sync API takes no wait: usable uncontended only.
      return {
        acquire() {
          lockfile.lockSync(path, { stale: 10_000 });
          return () => lockfile.unlockSync(path);
        },
      };
  }
}
