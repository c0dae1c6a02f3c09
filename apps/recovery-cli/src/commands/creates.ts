import { scopedBoatName } from "@drydock/boat-lifecycle";
import { CREATE_WINDOW_MS } from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { isCliError } from "../errors.js";
import { duration, type Rendered, table } from "../render.js";
import { boatAction } from "../shared/boat-action.js";
import { journals } from "../shared/boats.js";
import { nextLine, type Page, pageOf } from "../shared/pages.js";

export interface CreateRow {
  botId: string;
  boxId: string | null;
  resolved: boolean;
  createdAt: string;
  ageMs: number;
  /** 0 once past boat.dev's 24 h window; only meaningful for an unresolved row. */
  windowLeftMs: number;
  expired: boolean;
  /** The bot's deterministic Boat name, when the environment id is known. */
  expectedName: string | null;
}

export async function collectCreates(
  ctx: CommandContext,
): Promise<{ rows: CreateRow[]; environmentIdMissing: boolean }> {
  const snapshot = await (await journals(ctx)).createJournal.boatCreateRecoverySnapshot();
  let environmentId: string | null = null;
  try {
    environmentId = await ctx.environmentId();
  } catch (error) {
    if (!isCliError(error)) throw error;
  }
  const rows = snapshot.map((row) => {
    const windowLeftMs = Math.max(0, CREATE_WINDOW_MS - row.ageMs);
    return {
      botId: row.botId,
      boxId: row.boxId ?? null,
      resolved: row.resolved,
      createdAt: new Date(row.createdAt).toISOString(),
      ageMs: row.ageMs,
      windowLeftMs,
      expired: !row.resolved && windowLeftMs === 0,
      expectedName: environmentId === null ? null : scopedBoatName(environmentId, row.botId),
    };
  });
  return { rows, environmentIdMissing: environmentId === null };
}

/** `creates list`: the create journal (`collectCreates`), rendered by `renderCreates`. */
export async function createsList(ctx: CommandContext): Promise<Rendered> {
  const { rows, environmentIdMissing } = await collectCreates(ctx);
  // In bot order (then age): a bot's rows stay together and a page break never reorders them.
  const page = pageOf(ctx, rows, (row) => [row.botId, row.createdAt, row.boxId ?? ""], "creates list");
  return renderCreates(ctx, { rows: page.items, environmentIdMissing }, page);
}

/** The create journal as a table: each row's age against boat.dev's 24-hour window, and its Boat name. */
export function renderCreates(
  ctx: CommandContext,
  { rows, environmentIdMissing }: { rows: CreateRow[]; environmentIdMissing: boolean },
  page: Page<unknown>,
): Rendered {
  const note = environmentIdMissing
    ? "note: <dataDir>/environment-id is missing, so Boat names cannot be shown.\n"
    : "";
  const human =
    rows.length === 0
      ? `The create journal is empty.\n${note}`
      : table(
          ["bot", "box", "resolved", "age", "24 h window", "name"],
          rows.map((row) => [
            row.botId,
            row.boxId,
            row.resolved ? "yes" : "no",
            duration(row.ageMs),
            row.resolved ? "-" : row.expired ? ctx.c.red("expired") : `${duration(row.windowLeftMs)} left`,
            row.expectedName,
          ]),
          ctx.tty,
        ) +
        note +
        nextLine(page);
  return { data: { creates: rows, environmentIdMissing, nextCursor: page.nextCursor }, human };
}

export function createsAdopt(ctx: CommandContext, botId: string, boxId: string): Promise<Rendered> {
  return boatAction(ctx, "adopt", { botId, boxId }, (recovery, expectedState) =>
    recovery.adopt(botId, boxId, { expectedState }),
  );
}

export function createsRetire(ctx: CommandContext, botId: string): Promise<Rendered> {
  return boatAction(ctx, "retireCreate", { botId }, (recovery, expectedState) =>
    recovery.retireCreate(botId, { expectedState }),
  );
}
