import {
  type InstanceRegistry,
  type InstanceView,
  instancesOf,
  isInstanceError,
} from "@drydock/storage-postgres";
import type { CommandContext } from "../context.js";
import { CliError, type CliErrorCode } from "../errors.js";
import { duration, type Rendered, table } from "../render.js";

/** The postgres store's instances, or USAGE (exit 2) on a backend without them. */
async function registry(ctx: CommandContext): Promise<InstanceRegistry> {
  const storage = await ctx.storage();
  const instances = instancesOf(storage);
  if (instances === null) {
    throw new CliError(
      "USAGE",
      `instances exist only with the postgres backend; the data directory ${ctx.dataDir} is on ${storage.kind}, where one host runs the server and its processes are judged by pid (see drydock locks list). Nothing was read or changed.`,
    );
  }
  return instances;
}

function leaseLeft(row: InstanceView): string {
  if (row.state !== "live") return "-";
  return row.leaseLeftMs > 0 ? duration(row.leaseLeftMs) : `passed ${duration(-row.leaseLeftMs)} ago`;
}

/**
 * `drydock instances list`: every bot-server instance registered in the postgres store, live ones first:
 * id, host, pid, state, the lease left by the DATABASE's clock (a passed lease is a dead instance, whatever
 * its row says), epoch, and the fence `declare-dead` takes.
 */
export async function instancesList(ctx: CommandContext): Promise<Rendered> {
  const { now, instances } = await (await registry(ctx)).list();
  const human =
    instances.length === 0
      ? "No bot-server instances are registered in this database.\n"
      : table(
          ["id", "host", "pid", "state", "lease left", "epoch", "fence"],
          instances.map((row) => [
            row.id,
            row.host,
            String(row.pid),
            row.state === "live" && !row.holdsLease ? "live (lease passed)" : row.state,
            leaseLeft(row),
            String(row.epoch),
            row.fence,
          ]),
          ctx.tty,
        );
  return { data: { databaseNow: new Date(now).toISOString(), instances }, human };
}

const REFUSAL_CODE: Record<string, CliErrorCode> = {
  INSTANCE_NOT_FOUND: "NOT_FOUND",
  INSTANCE_CHANGED: "FENCE_MISMATCH",
  INSTANCE_LEASE_UNEXPIRED: "ACTION_NOT_ELIGIBLE",
};

/**
 * `drydock instances declare-dead <id>`: without --yes, the instance and its fence (a digest of id, epoch,
 * lease_until and state); with `--yes --expected-state <fence>`, state → dead only if the row still has that
 * fence. Refused while its lease holds by the database's clock (exit 5): a live server may still be starting
 * side effects; wait until the lease passes or stop that server. A dead instance can never renew: its server
 * re-registers with a new epoch if it is still running.
 */
export async function instancesDeclareDead(ctx: CommandContext, id: string): Promise<Rendered> {
  const instances = await registry(ctx);
  const row = (await instances.list()).instances.find((candidate) => candidate.id === id);
  if (row === undefined) {
    throw new CliError(
      "NOT_FOUND",
      `No instance ${id} in this database. Nothing was changed. See ${ctx.commandPrefix} instances list.`,
    );
  }
  const command = `${ctx.commandPrefix} instances declare-dead ${id} --yes --expected-state ${row.fence}`;
  if (!ctx.yes) {
    const note =
      row.state !== "live"
        ? `It is ${row.state} already; applying changes nothing.`
        : row.holdsLease
          ? `Its lease still holds for ${duration(row.leaseLeftMs)} by the database's clock: the apply is refused until it passes (or stop that server).`
          : "Its lease has passed: it starts no side effect, and declaring it dead stops it from renewing.";
    return {
      confirm: { command },
      data: { ok: true, preview: true, changed: false, instance: row, expectedState: row.fence, command },
      human: `Preview: declare instance ${id} (${row.host}, pid ${row.pid}, epoch ${row.epoch}, ${row.state}) dead. ${note} Nothing was changed. To apply it, run:\n  ${command}\n`,
    };
  }
  const expected = ctx.options.expectedState;
  if (expected === undefined) {
    throw new CliError("USAGE", "--yes needs --expected-state (the preview prints it). Nothing was changed.");
  }
  try {
    const dead = await instances.declareDead(id, expected);
    return {
      data: { ok: true, preview: false, changed: row.state === "live", instance: dead },
      human:
        row.state === "live"
          ? `Declared instance ${id} (${dead.host}, pid ${dead.pid}, epoch ${dead.epoch}) dead: it can never renew again; if its server still runs, it re-registers with a new epoch.\n`
          : `Instance ${id} is ${dead.state} already. Nothing was changed.\n`,
    };
  } catch (error) {
    if (isInstanceError(error))
      throw new CliError(REFUSAL_CODE[error.code] ?? "CLI_FAILED", error.message, error);
    throw error;
  }
}
