/**
 * Named crash windows. Each durable step and each provider call of provision and delete calls
 * `crash.point(name)` right after it completes, so a test child can SIGKILL itself exactly there and the
 * sweep can prove that recovery (a restart plus `recoverAtStartup` and the same call again) never bills a
 * second Boat, never loses a deletion fence and never sends a blind second DELETE.
 *
 * Production passes nothing: the default hook does nothing. Only a test fixture's entry file reads
 * `DRYDOCK_CRASH_POINT` and kills itself; this package never reads the environment.
 */
export const LIFECYCLE_CRASH_POINTS = [
  /** The create journal holds the key; no POST has left yet (or its answer was never seen). */
  "provision.after-begin",
  /** boat.dev answered the create with an id that is not journaled yet: only the key can find it again. */
  "provision.after-create-response",
  /** The id is journaled; the Boat is still unnamed, so only the journal row knows whose it is. */
  "provision.after-remember",
  /** The Boat carries its deterministic name; the journal row is not resolved yet. */
  "provision.after-rename",
  /** The journal row is resolved: the bot owns this Boat durably. */
  "provision.after-resolve",
  /** A definitive refusal removed the key (nothing was created under it). */
  "provision.after-discard",
  /** The remembered Boat was proven gone, and its stale create row was discarded; no new key yet. */
  "provision.after-discard-stale",
  /** A Boat found by its deterministic name was written into the create journal. */
  "provision.after-adopt",
  /** The deletion fence (prepared record) is durable; no DELETE has left yet. */
  "delete.after-prepare",
  /**
   * An explicit retry re-stamped an old prepared fence (its in-flight window runs again); its DELETE has not
   * left yet.
   */
  "delete.after-restamp",
  /** boat.dev answered the DELETE; its receipt is not journaled yet. */
  "delete.after-delete-response",
  /** The receipt is journaled (accepted): from here on a second DELETE would be blind. */
  "delete.after-accepted",
  /** A later receipt status (processing) polled from boat.dev is journaled. */
  "delete.after-receipt-progress",
  /** The completed status is journaled; the create row and the fence are not retired yet. */
  "delete.after-receipt-completed",
  /** The fence was marked blocked (refused DELETE or blocked operation). */
  "delete.after-blocked",
  /** Proof of absence arrived; the create row is retired but the fence still stands. */
  "delete.after-retire-create",
  /** The fence is retired too: the deletion is finished. */
  "delete.after-retire-deletion",
] as const;

export type LifecycleCrashPoint = (typeof LIFECYCLE_CRASH_POINTS)[number];

export interface CrashHook {
  /** Called synchronously at each point. A test hook may kill the process here; production does nothing. */
  point(name: LifecycleCrashPoint): void;
}

export const noCrash: CrashHook = { point() {} };
