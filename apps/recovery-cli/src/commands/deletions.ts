import { fenceInFlightLeftMs } from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { duration, type Rendered, table } from "../render.js";
import { boatAction } from "../shared/boat-action.js";
import { journals } from "../shared/boats.js";
import { nextLine, type Page, pageOf } from "../shared/pages.js";

export interface DeletionRow {
  boxId: string;
  name: string;
  ownerBotId: string | null;
  phase: "prepared" | "accepted" | "blocked";
  status: string | null;
  /** The provider operation id (not secret: it is boat.dev's receipt id). */
  operationId: string | null;
  requestedAt: string;
  ageMs: number;
  /**
   * A prepared fence inside boat-lifecycle's in-flight window: its DELETE may still be on the wire (0 for one
   * stamped ahead of this clock: the plan's rule).
   */
  inFlightLeftMs: number;
}

export async function collectDeletions(ctx: CommandContext): Promise<DeletionRow[]> {
  const records = await (await journals(ctx)).deleteJournal.boatDeletionSnapshot();
  const now = ctx.now();
  return records.map((record) => ({
    boxId: record.boxId,
    name: record.name,
    ownerBotId: record.ownerBotId,
    phase: record.phase,
    status: record.status ?? null,
    operationId: record.operationId ?? null,
    requestedAt: new Date(record.requestedAt).toISOString(),
    ageMs: Math.max(0, now - record.requestedAt),
    inFlightLeftMs: fenceInFlightLeftMs(record, now),
  }));
}

/** `deletions list`: the deletion fences (`collectDeletions`), rendered by `renderDeletions`. */
export async function deletionsList(ctx: CommandContext): Promise<Rendered> {
  // In Boat order: one fence per Boat, so the Boat id alone is a stable position.
  const page = pageOf(ctx, await collectDeletions(ctx), (row) => [row.boxId], "deletions list");
  return renderDeletions(ctx, page);
}

/** The deletion fences as a table, with the command group that moves each on. */
export function renderDeletions(ctx: CommandContext, page: Page<DeletionRow>): Rendered {
  const rows = page.items;
  const human =
    rows.length === 0
      ? "No deletion fences.\n"
      : table(
          ["box", "name", "bot", "phase", "status", "age", "next"],
          rows.map((row) => [
            row.boxId,
            row.name,
            row.ownerBotId,
            row.phase,
            row.status,
            duration(row.ageMs),
            row.phase === "blocked" ? "retry" : "reconcile",
          ]),
          ctx.tty,
        ) + nextLine(page);
  return { data: { deletions: rows, nextCursor: page.nextCursor }, human };
}

export function deletionsReconcile(ctx: CommandContext, boxId: string): Promise<Rendered> {
  return boatAction(ctx, "reconcileDeletion", { boxId }, (recovery, expectedState) =>
    recovery.reconcileDeletion(boxId, { expectedState }),
  );
}

export function deletionsRetry(ctx: CommandContext, boxId: string): Promise<Rendered> {
  return boatAction(ctx, "retryDeletion", { boxId }, (recovery, expectedState) =>
    recovery.retryDeletion(boxId, { expectedState }),
  );
}
