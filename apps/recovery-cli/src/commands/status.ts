import {
  type NeedsPersonTally,
  type NeedsPersonUnchecked,
  reportNeedsPerson,
  reportRestores,
  tallyNeedsPerson,
} from "@drydock/recovery-controller";
import { isStorageError, type Storage, type StorageErrorCode } from "@drydock/storage";
import { instancesOf } from "@drydock/storage-postgres";
import { boundToEmbedded, type CommandContext } from "../context.js";
import { CliError, EXIT_CODES, isCliError } from "../errors.js";
import type { Rendered } from "../render.js";
import { boatRecovery } from "../shared/boats.js";
import {
  createFinding,
  deletionFinding,
  type Finding,
  journalFinding,
  lockFinding,
  reportFinding,
  tallied,
} from "../shared/findings.js";
import { storageLocation } from "../storage.js";
import { collectCreates } from "./creates.js";
import { collectDeletions } from "./deletions.js";
import { collectLocks } from "./locks.js";

export type { Finding } from "../shared/findings.js";

/** Refusals of the command line's choice of backend, not faults of the store: status fails on them. */
const CHOICE_ERRORS = new Set<StorageErrorCode>(["STORAGE_BACKEND_MISMATCH", "STORAGE_INVALID_ARGUMENT"]);

/** What `drydock status` found: its lines, their tally, what could not be looked at. Rendered by `renderStatus`. */
export interface StatusData {
  findings: Finding[];
  tally: NeedsPersonTally;
  unchecked: NeedsPersonUnchecked[];
  providerChecked: boolean;
  /** The backend read (and where it keeps its state), or null when it could not be opened (the findings say why). */
  storage: { kind: string; location: string } | null;
  /** The bot-server instances of a postgres store, by the database's clock; null on file and sqlite. */
  instances: StatusInstances | null;
}

/** What status tells of a postgres store's bot-server instances (`drydock instances list` has every field). */
export interface StatusInstances {
  /** Live rows whose lease holds by the database's clock: the servers that may start side effects. */
  serving: { id: string; host: string; pid: number; epoch: number; leaseLeftMs: number }[];
  /** Live rows whose lease passed: dead by the clock (every write of theirs is fenced), not yet declared. */
  lapsed: { id: string; host: string; pid: number; epoch: number }[];
  /** Why they could not be read, or null. */
  error: string | null;
}

/** The instances of a postgres store (read, never changed): what serves, what lapsed; null elsewhere. */
async function collectInstances(storage: Storage): Promise<StatusInstances | null> {
  const registry = instancesOf(storage);
  if (registry === null) return null;
  try {
    const { instances } = await registry.list();
    const live = instances.filter((row) => row.state === "live");
    return {
      serving: live
        .filter((row) => row.holdsLease)
        .map(({ id, host, pid, epoch, leaseLeftMs }) => ({ id, host, pid, epoch, leaseLeftMs })),
      lapsed: live
        .filter((row) => !row.holdsLease)
        .map(({ id, host, pid, epoch }) => ({ id, host, pid, epoch })),
      error: null,
    };
  } catch (error) {
    return { serving: [], lapsed: [], error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * Everything that needs attention: the shared "needs a person" report (restores, the Boat plan), then what
 * only this tool reads: without a plan the Boat journals themselves, and the lock files.
 */
export async function collectStatus(ctx: CommandContext): Promise<StatusData> {
  // A missing data directory (exit 3) is refused by createContext, for every command alike.
  // A store that cannot be opened (damaged, busy, refused by the OS) is not a failure of status: the
  // journals' findings below say why. A backend this command line chose wrongly is (exit 2, like a provider).
  const opened = await ctx.storage().then(
    (store) => store,
    (error: unknown) => {
      if (isCliError(error) || (isStorageError(error) && CHOICE_ERRORS.has(error.code))) throw error;
      return null;
    },
  );
  const storage = opened === null ? null : { kind: opened.kind, location: storageLocation(opened) };
  const instances = opened === null ? null : await collectInstances(opened);
  const report = await reportNeedsPerson({
    dataDir: ctx.dataDir,
    commandPrefix: ctx.commandPrefix,
    plan: ctx.providerConfigured ? async () => (await boatRecovery(ctx)).plan() : null,
    // The restores through this module's own import of `reportRestores`, the seam a test stubs (a listing
    // cut short takes 4,097 real sagas to make).
    restores: () =>
      reportRestores({ dataDir: ctx.dataDir, commandPrefix: ctx.commandPrefix, readOnly: true }),
  });
  const failed = report.items.find((item) => item.kind === "plan_failed");
  // A refusal of this command line (another provider than the data directory's) fails the command; a
  // missing environment id is a line of the report, like a journal that cannot be read.
  if (failed?.error instanceof CliError && failed.error.code !== "ENVIRONMENT_ID_MISSING") throw failed.error;
  const findings = report.items.map((item) => reportFinding(ctx, item));
  const planMade = ctx.providerConfigured && failed === undefined;
  if (!planMade) findings.push(...(await journalFindings(ctx)));
  for (const lock of collectLocks(ctx)) {
    const finding = lockFinding(ctx, lock);
    if (finding !== null) findings.push(finding);
  }
  return {
    findings,
    tally: tallyNeedsPerson(findings.map(tallied), report.unchecked),
    unchecked: report.unchecked,
    providerChecked: report.providerChecked,
    storage,
    instances,
  };
}

/** The instances line of `drydock status` on postgres (informational: a lapsed lease needs no person). */
function instancesLine(ctx: CommandContext, instances: StatusInstances): string {
  if (instances.error !== null) return `instances: could not be read (${instances.error})`;
  const who = (rows: readonly { host: string; pid: number; epoch: number }[]) =>
    rows.map((row) => `${row.host} pid ${row.pid} epoch ${row.epoch}`).join(", ");
  const serving =
    instances.serving.length === 0
      ? "no bot-server holds a lease"
      : `${instances.serving.length} bot-server(s) hold a lease (${who(instances.serving)})`;
  const lapsed =
    instances.lapsed.length === 0
      ? ""
      : `; ${instances.lapsed.length} whose lease passed (${who(instances.lapsed)}): every write of theirs is refused, their marks count as abandoned, nothing to do unless one is still running (see ${ctx.commandPrefix} instances list)`;
  return `instances: ${serving}${lapsed}`;
}

/** The Boat journals read directly, when there is no Boat plan (no boat.dev, or the plan failed). */
async function journalFindings(ctx: CommandContext): Promise<Finding[]> {
  const findings: Finding[] = [];
  try {
    const { rows } = await collectCreates(ctx);
    for (const row of rows.filter((candidate) => !candidate.resolved)) findings.push(createFinding(ctx, row));
  } catch (error) {
    findings.push(journalFinding("create journal", error));
  }
  try {
    for (const row of await collectDeletions(ctx)) findings.push(deletionFinding(ctx, row));
  } catch (error) {
    findings.push(journalFinding("delete journal", error));
  }
  return findings;
}

/** What boat.dev could not be asked, in words, or null when nothing is unchecked but boat.dev's absence. */
function couldNotLook(unchecked: readonly NeedsPersonUnchecked[]): string | null {
  const missed = unchecked.flatMap((fact) =>
    fact.kind === "provider_unlisted"
      ? [`boat.dev could not be listed: ${fact.error}`]
      : fact.kind === "boat_unread"
        ? [
            `boat.dev could not read Boat ${fact.boxId}${fact.botId === null ? "" : ` (bot ${fact.botId})`}: ${fact.reason}`,
          ]
        : [],
  );
  return missed.length > 0 ? missed.join("; ") : null;
}

/** The one-line verdict of `drydock status`, from its tally. */
function verdictLine(ctx: CommandContext, data: StatusData): string {
  const { attention, commandless } = data.tally;
  const todo =
    commandless === 0
      ? "run the command shown beside each"
      : commandless === attention
        ? "none has a command to run: read each message and settle it by hand"
        : `run the command shown beside each; ${commandless} without one need a look by hand (read the message)`;
  // Work in progress that only asks for a wait (a deletion whose DELETE may still be on the wire, a restore
  // whose process still runs): no person settles it; looking again once the wait is over shows how it ended.
  // Never a plain "OK: nothing needs attention" while one is listed.
  const waitS = Math.ceil(data.tally.waitMs / 1_000);
  const again =
    data.tally.lookAgain === 0
      ? ""
      : `${data.tally.lookAgain} item(s) are still in progress; run \`${ctx.boatCommandPrefix} status\` again ${waitS > 0 ? `in ${waitS} s` : "shortly"}${ctx.providerNote === null ? "" : ` (${ctx.providerNote})`}`;
  const missed = couldNotLook(data.unchecked);
  let verdict: string;
  if (missed) verdict = `INCOMPLETE: ${missed}; ${attention} item(s) need attention locally.`;
  else if (attention === 0)
    verdict = again ? `OK: nothing needs a person now; ${again}.` : "OK: nothing needs attention.";
  else verdict = `ATTENTION: ${attention} item(s) need a person; ${todo}.${again ? ` ${again}.` : ""}`;
  // Never "OK" without boat.dev: a Boat no journal knows (still billed) shows only in its list. So the
  // verdict says what was not checked and how to check it, and the exit is 6 (INCOMPLETE) as for a
  // provider that could not be reached. A data directory bound to the embedded simulator (or holding its
  // state file) needs its server started, not a URL.
  if (data.unchecked.some((fact) => fact.kind === "provider_unconfigured")) {
    const how = boundToEmbedded(ctx.dataDir)
      ? "this data directory uses the bot server's embedded simulator, which runs only with its server: start the bot server on it (drydock then finds the simulator by itself) and run status again"
      : "set BOAT_API_URL and BOAT_API_TOKEN (or pass --provider-url and --provider-token) and run status again";
    verdict =
      attention === 0
        ? `INCOMPLETE: nothing needs a person in the journals, restores and locks, but boat.dev was not checked: ${how}.${again ? ` ${again}.` : ""}`
        : `${verdict} INCOMPLETE: boat.dev was not checked: ${how}.`;
  }
  return verdict;
}

/**
 * `drydock status` for people and for --json: one line each with the command to act on it, and the verdict.
 * Exit 0 even when attention is needed (the verdict says so), or 7 with `--fail-on-attention`; 6
 * (INCOMPLETE) when it could not look at boat.dev (not configured, or not reached, or a Boat not read).
 */
export function renderStatus(ctx: CommandContext, data: StatusData): Rendered {
  const { findings, tally } = data;
  const verdict = verdictLine(ctx, data);
  const { c } = ctx;
  const lines = findings.map((finding) => {
    const mark = finding.attention ? c.yellow("!") : c.dim("·");
    const next = finding.command
      ? `\n    → ${finding.command}${finding.note ? `  # ${finding.note}` : ""}`
      : finding.advice
        ? `\n    ${finding.advice}`
        : "";
    return `${mark} ${finding.area} ${finding.subject}: ${finding.message}${next}`;
  });
  const incomplete = tally.verdict === "incomplete";
  // Red for every INCOMPLETE verdict but one that also counts items needing a person (those come first).
  const red = couldNotLook(data.unchecked) !== null || (incomplete && tally.attention === 0);
  const colored = red ? c.red(verdict) : tally.attention === 0 ? c.green(verdict) : c.yellow(verdict);
  const storageLine = data.storage
    ? `storage: ${data.storage.kind} (${data.storage.location})${data.instances === null ? "" : `\n${instancesLine(ctx, data.instances)}`}`
    : "storage: could not be opened (see the journals' lines)";
  return {
    data: {
      findings,
      attention: tally.attention,
      providerChecked: data.providerChecked,
      verdict,
      storage: data.storage,
      ...(data.instances === null ? {} : { instances: data.instances }),
    },
    human: `${c.dim(storageLine)}\n${lines.length > 0 ? `${lines.join("\n")}\n` : ""}${colored}\n`,
    // Monitoring (`--fail-on-attention`): a person is needed (7) outranks "could not look everywhere" (6),
    // since it is known for sure; without the flag a verdict of ATTENTION still exits 0 (the verdict says so).
    exitCode:
      ctx.options.failOnAttention === true && tally.attention > 0
        ? EXIT_CODES.ATTENTION
        : incomplete
          ? EXIT_CODES.PROVIDER_UNAVAILABLE
          : EXIT_CODES.OK,
  };
}

/**
 * Everything that needs attention, one line each with the command to act on it, and a one-line verdict.
 * Exit 0 even when attention is needed (the verdict says so); non-zero only when it could not look (the
 * data directory is missing, or boat.dev was not configured, or could not be reached: INCOMPLETE, exit 6).
 */
export async function status(ctx: CommandContext): Promise<Rendered> {
  return renderStatus(ctx, await collectStatus(ctx));
}
