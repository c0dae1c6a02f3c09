import type { ServerContext } from "./context.js";
import { recoveryAnswer } from "./recovery.js";

/**
 * The same data as `drydock status` (one builder, recovery-controller's `reportNeedsPerson`, rendered by
 * `recoveryAnswer`): the recovery controller's Boat plan and every restore it would list
 * (all pages, and the store's diagnostics: finished-but-unarchived sagas still holding the lock, corrupt
 * or busy ones), each with the fenced command to act on it. What cannot be read is reported in
 * `unreadable` (and `complete: false`) instead of hiding what can: the answer is still 200, like the
 * status command's INCOMPLETE verdict. `open` counts what needs a person, as status's ATTENTION does; it
 * also sets the open-items gauge of /metrics.
 */
export async function recoveryReport(ctx: ServerContext) {
  const answer = await recoveryAnswer({
    dataDir: ctx.dataDir,
    plan: () => ctx.recovery.plan(),
    unfinishedRetirements: () => ctx.workspace.unfinishedRetirements(),
    scrubPaths: ctx.scrubPaths,
  });
  ctx.metrics.recoveryItemsOpen.set(answer.open);
  ctx.recoveryGauge.countedAt = performance.now();
  return { ok: true as const, ...answer, startup: ctx.startupReport() };
}
