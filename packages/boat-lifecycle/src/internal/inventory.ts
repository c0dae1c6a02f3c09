import type { BoatDeletionRecord } from "@drydock/boat-delete-journal";
import { isLifecycleError, LifecycleError } from "../errors.js";
import { classifyName } from "../names.js";
import { BOAT_ID, type InventoryItem } from "../schema.js";
import { type Context, classifyProviderError, journal, messageOf } from "./context.js";
import { finishDeletion, reconcileRecord } from "./deletion.js";

interface ListedSandbox {
  id: string;
  name: string | null;
  state: "provisioning" | "running" | "stopped" | "error";
}

const REPAIR = "repair it in boat.dev before continuing";

/**
 * The installation's Boats as one sanitized list (the original inventory): boat.dev's list, merged with what
 * the journals durably know. The list is eventually consistent, so an omission is never proof of absence:
 * a remembered Boat missing from it is read directly, and only a direct 404/410 retires its row. Every
 * deletion fence gets one reconcile poll: a proven deletion hides the Boat even while the list still shows
 * it; a pending one shows it as `removing`. Anything ambiguous (duplicate or malformed ids, two Boats for
 * one bot, a remembered Boat renamed away) is shown `available: false` with the problem, never guessed.
 */
export async function buildInventory(ctx: Context, knownBotIds: readonly string[]): Promise<InventoryItem[]> {
  let listed: ListedSandbox[];
  try {
    listed = await ctx.client.listAllSandboxes();
  } catch (error) {
    const failure = classifyProviderError(error);
    throw new LifecycleError({
      code: "provider_unavailable",
      status: 503,
      message: `The list of cloud computers is unavailable: ${failure.message} — retry in a moment`,
    });
  }

  // Fences first: a reconcile may retire records (and their create rows), so the journals are read after.
  const hidden = new Set<string>();
  const fenceProblems = new Map<string, string>();
  for (const record of await journal(() => ctx.deleteJournal.boatDeletionSnapshot())) {
    try {
      if ((await reconcileRecord(ctx, record)) === "confirmed") hidden.add(record.boxId);
    } catch (error) {
      if (isLifecycleError(error) && error.code === "recovery_paused") throw error;
      fenceProblems.set(record.boxId, messageOf(error));
    }
  }
  const fences = new Map<string, BoatDeletionRecord>();
  for (const record of await journal(() => ctx.deleteJournal.boatDeletionSnapshot())) {
    fences.set(record.boxId, record);
  }
  const rows = await journal(() => ctx.createJournal.boatCreateRecoverySnapshot());

  // Name → bot for every bot this installation knows of (journals plus the caller's registry).
  const bots = new Set<string>(knownBotIds);
  for (const row of rows) bots.add(row.botId);
  for (const record of fences.values()) if (record.ownerBotId !== null) bots.add(record.ownerBotId);
  const botByName = new Map<string, string>();
  for (const botId of bots) {
    botByName.set(ctx.scopedName(botId), botId);
    botByName.set(ctx.legacyName(botId), botId);
  }
  const rememberedBy = new Map<string, { botId: string; resolved: boolean }>();
  for (const row of rows) {
    if (row.boxId !== undefined) rememberedBy.set(row.boxId, { botId: row.botId, resolved: row.resolved });
  }

  const items = new Map<string, InventoryItem>();
  const listedIds = new Map<string, number>();
  for (const sandbox of listed) listedIds.set(sandbox.id, (listedIds.get(sandbox.id) ?? 0) + 1);

  const describe = (sandbox: ListedSandbox | null, boxId: string): InventoryItem | null => {
    if (hidden.has(boxId)) return null;
    const name = sandbox?.name ?? fences.get(boxId)?.name ?? null;
    const remembered = rememberedBy.get(boxId);
    const fence = fences.get(boxId);
    const kind = classifyName(ctx.environmentId, sandbox === null ? name : sandbox.name);
    const namedBot = name === null ? undefined : botByName.get(name);
    const ownerBotId = remembered?.botId ?? fence?.ownerBotId ?? namedBot ?? null;
    // Only this installation's Boats are shown: remembered, fenced, scoped, or a known bot's legacy name.
    if (remembered === undefined && fence === undefined && kind !== "scoped" && namedBot === undefined) {
      return null;
    }
    const problems: string[] = [];
    if (!BOAT_ID.test(boxId)) problems.push(`boat.dev listed a malformed id — ${REPAIR}`);
    if ((listedIds.get(boxId) ?? 0) > 1) problems.push(`boat.dev listed this id twice — ${REPAIR}`);
    if (
      remembered !== undefined &&
      sandbox !== null &&
      sandbox.name !== null &&
      sandbox.name !== ctx.scopedName(remembered.botId) &&
      sandbox.name !== ctx.legacyName(remembered.botId)
    ) {
      problems.push(`this remembered cloud computer no longer has its deterministic name — ${REPAIR}`);
    }
    if (ownerBotId === null && fence === undefined) {
      problems.push(`no bot of this installation claims this cloud computer — ${REPAIR}`);
    }
    const fenceProblem = fenceProblems.get(boxId);
    if (fenceProblem !== undefined) problems.push(fenceProblem);

    let state: InventoryItem["state"] = sandbox?.state ?? "unknown";
    if (fence !== undefined) state = fence.phase === "blocked" ? "deletion_blocked" : "removing";
    const naming: InventoryItem["naming"] =
      name === null
        ? "unnamed"
        : kind === "scoped"
          ? "scoped"
          : kind === "legacy" && namedBot !== undefined
            ? "legacy"
            : "other";
    return {
      boxId,
      name,
      ownerBotId,
      state,
      available: problems.length === 0,
      ...(problems.length > 0 ? { problem: problems.join("; ") } : {}),
      naming,
      remembered: remembered !== undefined,
      ...(fence === undefined
        ? {}
        : {
            deletion: { phase: fence.phase, ...(fence.status === undefined ? {} : { status: fence.status }) },
          }),
    };
  };

  for (const sandbox of listed) {
    if (items.has(sandbox.id)) continue;
    let current: ListedSandbox = sandbox;
    if (!rememberedBy.has(sandbox.id) && !fences.has(sandbox.id) && describe(sandbox, sandbox.id) !== null) {
      // No journal vouches for this listed Boat, and the list lags: it may show a Boat whose deletion was
      // proven (and whose records were retired) a moment ago. A direct read decides; only 404/410 hides it.
      try {
        current = await ctx.client.getSandbox(sandbox.id);
      } catch (error) {
        if (classifyProviderError(error).kind === "absent") continue;
      }
    }
    const item = describe(current, sandbox.id);
    if (item !== null) items.set(sandbox.id, item);
  }

  // Durable knowledge the list did not show: read each directly; only 404/410 proves it gone.
  for (const [boxId] of rememberedBy) {
    if (items.has(boxId) || hidden.has(boxId)) continue;
    let sandbox: ListedSandbox | null = null;
    let unreadable: string | undefined;
    try {
      sandbox = await ctx.client.getSandbox(boxId);
    } catch (error) {
      const failure = classifyProviderError(error);
      if (failure.kind === "absent" && !fences.has(boxId)) {
        await finishDeletion(ctx, boxId);
        continue;
      }
      unreadable = failure.message;
    }
    const item = describe(sandbox, boxId);
    if (item === null) continue;
    if (unreadable !== undefined && fences.get(boxId) === undefined) {
      items.set(boxId, {
        ...item,
        available: false,
        problem: `could not read this remembered cloud computer (${unreadable}) — retry in a moment`,
      });
    } else {
      items.set(boxId, item);
    }
  }
  for (const [boxId] of fences) {
    if (items.has(boxId) || hidden.has(boxId)) continue;
    const item = describe(null, boxId);
    if (item !== null) items.set(boxId, item);
  }

  // Two live Boats for one bot: neither can be trusted as "the" Boat until a person decides.
  const perBot = new Map<string, string[]>();
  for (const item of items.values()) {
    if (item.ownerBotId === null || item.deletion !== undefined) continue;
    perBot.set(item.ownerBotId, [...(perBot.get(item.ownerBotId) ?? []), item.boxId]);
  }
  for (const [botId, boxIds] of perBot) {
    if (boxIds.length < 2) continue;
    for (const boxId of boxIds) {
      const item = items.get(boxId);
      if (item === undefined) continue;
      const problem = `two cloud computers claim bot ${botId} — ${REPAIR}`;
      items.set(boxId, {
        ...item,
        available: false,
        problem: item.problem === undefined ? problem : `${item.problem}; ${problem}`,
      });
    }
  }
  return [...items.values()].sort((a, b) => (a.boxId < b.boxId ? -1 : a.boxId > b.boxId ? 1 : 0));
}
