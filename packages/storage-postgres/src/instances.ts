import { createHash, randomUUID } from "node:crypto";
import { StorageError } from "@drydock/storage";
import type { PgHandle, PgTx } from "./database.js";

/**
 * Server instances with leases (issue 24): each drydock-server on a postgres store registers a row, renews its
 * lease by heartbeat, and is "dead" once its lease has passed by the DATABASE's clock (or an operator declared
 * it dead). Every instance gets an epoch from a sequence, so epochs only increase: a renewal names its epoch,
 * and an instance that was declared dead, or replaced by a newer registration, can never renew again.
 */
export type InstanceState = "live" | "dead" | "stopped";

export interface Instance {
  id: string;
  host: string;
  pid: number;
  /** ms since the epoch, database time. */
  startedAt: number;
  /** ms since the epoch, database time. */
  leaseUntil: number;
  epoch: number;
  state: InstanceState;
}

/** An instance as read at `now` (database time): how much lease is left, and its fence for a declare-dead. */
export interface InstanceView extends Instance {
  /** leaseUntil − the database's now, ms (negative once passed). */
  leaseLeftMs: number;
  /** live, and its lease has not passed by the database's clock. */
  holdsLease: boolean;
  /** A digest of (id, epoch, leaseUntil, state): `declareDead` applies only while the row still matches. */
  fence: string;
}

export type RenewResult =
  | { renewed: true; leaseUntil: number }
  /** Not renewed: the row is gone, not live, of another epoch, or its lease had already passed. */
  | { renewed: false; reason: "missing" | "not_live" | "epoch" | "expired"; state: InstanceState | null };

export interface InstanceRegistry {
  /**
   * Inserts a live instance with the next epoch and a lease of `ttlMs` from the database's now. With
   * `replaces` (this process's earlier registration, whose lease lapsed), that row is marked dead in the same
   * transaction if it is still live.
   */
  register(input: {
    host: string;
    pid: number;
    ttlMs: number;
    replaces?: { id: string; epoch: number };
  }): Promise<Instance>;
  /** Extends the lease to the database's now + ttlMs, only while the row is live, of `epoch`, and unexpired. */
  renew(id: string, epoch: number, ttlMs: number): Promise<RenewResult>;
  /** Marks the instance stopped (a clean shutdown), only if it is live and of `epoch`; whether it did. */
  stop(id: string, epoch: number): Promise<boolean>;
  /** Every instance (live first, then newest), read with the database's now. */
  list(): Promise<{ now: number; instances: InstanceView[] }>;
  /**
   * Marks the instance dead if its lease has passed by the database's clock and its row still matches
   * `expectedFence` (read by a preview). Refused (InstanceError, nothing changed): INSTANCE_NOT_FOUND,
   * INSTANCE_LEASE_UNEXPIRED (a live lease, checked first: wait for it to pass, or stop that server),
   * INSTANCE_CHANGED (the fence moved). A row already dead that matches the fence is left as it is.
   */
  declareDead(id: string, expectedFence: string): Promise<InstanceView>;
}

export type InstanceErrorCode = "INSTANCE_NOT_FOUND" | "INSTANCE_CHANGED" | "INSTANCE_LEASE_UNEXPIRED";

/** A refused instance operation: nothing was changed; the message says what to do. */
export class InstanceError extends Error {
  override readonly name = "InstanceError";
  constructor(
    readonly code: InstanceErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export function isInstanceError(error: unknown): error is InstanceError {
  return error instanceof InstanceError;
}

/** The fence of an instance row: a digest of what a declare-dead decides on. */
export function instanceFence(row: Pick<Instance, "id" | "epoch" | "leaseUntil" | "state">): string {
  return createHash("sha256")
    .update(`drydock-instance:${row.id}:${row.epoch}:${row.leaseUntil}:${row.state}`)
    .digest("hex")
    .slice(0, 16);
}

const ms = (column: string) => `floor(extract(epoch FROM ${column}) * 1000)::float8`;
const COLUMNS = `id::text AS id, host, pid, ${ms("started_at")} AS started_at, ${ms("lease_until")} AS lease_until, epoch::text AS epoch, state, ${ms("clock_timestamp()")} AS now`;

interface Raw {
  id: string;
  host: string;
  pid: number;
  started_at: number;
  lease_until: number;
  epoch: string;
  state: InstanceState;
  now: number;
}

function rowOf(raw: Raw): Instance {
  return {
    id: raw.id,
    host: raw.host,
    pid: raw.pid,
    startedAt: raw.started_at,
    leaseUntil: raw.lease_until,
    epoch: Number(raw.epoch),
    state: raw.state,
  };
}

function viewOf(raw: Raw): InstanceView {
  const row = rowOf(raw);
  const leaseLeftMs = row.leaseUntil - raw.now;
  return {
    ...row,
    leaseLeftMs,
    holdsLease: row.state === "live" && leaseLeftMs > 0,
    fence: instanceFence(row),
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function invalid(message: string): StorageError {
  return new StorageError({ code: "STORAGE_INVALID_ARGUMENT", message });
}

function checkTtl(ttlMs: number): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 1 || ttlMs > 86_400_000) {
    throw invalid("an instance lease's ttlMs must be an integer from 1 to 86,400,000");
  }
}

/** Old rows of stopped or dead instances are deleted by each registration after this long. */
const KEEP_ENDED = "7 days";

export function pgInstances(handle: PgHandle, options: { live: () => void }): InstanceRegistry {
  const one = async (tx: PgTx, id: string, lock: boolean): Promise<Raw | undefined> =>
    (
      await tx.query<Raw>(`SELECT ${COLUMNS} FROM instances WHERE id = $1${lock ? " FOR UPDATE" : ""}`, [id])
    )[0];
  return {
    async register({ host, pid, ttlMs, replaces }) {
      options.live();
      checkTtl(ttlMs);
      if (typeof host !== "string" || host.length === 0 || host.length > 255) {
        throw invalid("an instance's host must be a name of 1 to 255 characters");
      }
      if (!Number.isSafeInteger(pid) || pid < 1 || pid > 2_147_483_647)
        throw invalid("an instance's pid must be a positive integer");
      const id = randomUUID();
      return handle.write("instances", async (tx) => {
        await tx.query(
          `DELETE FROM instances WHERE state <> 'live' AND lease_until < clock_timestamp() - interval '${KEEP_ENDED}'`,
        );
        if (replaces !== undefined) {
          await tx.query(
            "UPDATE instances SET state = 'dead' WHERE id = $1 AND epoch = $2 AND state = 'live'",
            [replaces.id, replaces.epoch],
          );
        }
        const rows = await tx.query<Raw>(
          `INSERT INTO instances (id, host, pid, lease_until, state)
           VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 millisecond', 'live')
           RETURNING ${COLUMNS}`,
          [id, host, pid, ttlMs],
        );
        return rowOf(rows[0] as Raw);
      });
    },
    async renew(id, epoch, ttlMs) {
      options.live();
      checkTtl(ttlMs);
      if (!UUID.test(id)) throw invalid("an instance id is a UUID");
      if (!Number.isSafeInteger(epoch)) throw invalid("an instance epoch is an integer");
      // One round trip that commits where it checks (handle.atomic): the row locked first, then the lease
      // judged, then COMMIT, with no turn of this process in between.
      // - Locked first: every fenced write holds this row FOR SHARE, and an UPDATE that waits for such a
      //   holder and finds the row unchanged afterwards is not judged again by PostgreSQL (its WHERE was
      //   judged before the wait), so a renewal queued behind a paused server's write would revive a lease
      //   that passed meanwhile.
      // - Committed in the same round trip: a renewal judged in time but committed in a later round trip
      //   (the server paused in between) would extend, after the pause, a lease others saw pass.
      const [, updated] = await handle.atomic("instances", [
        `SELECT 1 FROM instances WHERE id = '${id}'::uuid FOR NO KEY UPDATE`,
        `UPDATE instances SET lease_until = clock_timestamp() + ${ttlMs} * interval '1 millisecond'
         WHERE id = '${id}'::uuid AND epoch = ${epoch} AND state = 'live' AND lease_until > clock_timestamp()
         RETURNING ${ms("lease_until")} AS lease_until`,
      ]);
      const renewed = updated?.[0] as { lease_until: number } | undefined;
      if (renewed !== undefined) return { renewed: true, leaseUntil: renewed.lease_until };
      return handle.read(async (tx): Promise<RenewResult> => {
        const row = await one(tx, id, false);
        if (row === undefined) return { renewed: false, reason: "missing", state: null };
        const reason = row.state !== "live" ? "not_live" : Number(row.epoch) !== epoch ? "epoch" : "expired";
        return { renewed: false, reason, state: row.state };
      });
    },
    async stop(id, epoch) {
      options.live();
      if (!UUID.test(id)) throw invalid("an instance id is a UUID");
      return handle.write("instances", async (tx) => {
        const rows = await tx.query(
          "UPDATE instances SET state = 'stopped' WHERE id = $1 AND epoch = $2 AND state = 'live' RETURNING id",
          [id, epoch],
        );
        return rows.length === 1;
      });
    },
    async list() {
      options.live();
      return handle.read(async (tx) => {
        const rows = await tx.query<Raw>(
          `SELECT ${COLUMNS} FROM instances ORDER BY (state = 'live') DESC, epoch DESC`,
        );
        const now =
          rows[0]?.now ??
          (await tx.query<{ now: number }>(`SELECT ${ms("clock_timestamp()")} AS now`))[0]?.now ??
          tx.now;
        return { now, instances: rows.map(viewOf) };
      });
    },
    async declareDead(id, expectedFence) {
      options.live();
      if (!UUID.test(id)) {
        throw new InstanceError(
          "INSTANCE_NOT_FOUND",
          `${JSON.stringify(id)} is not an instance id (a UUID). Nothing was changed. See drydock instances list.`,
        );
      }
      return handle.write("instances", async (tx) => {
        const row = await one(tx, id, true);
        if (row === undefined) {
          throw new InstanceError(
            "INSTANCE_NOT_FOUND",
            `No instance ${id} in ${handle.where}. Nothing was changed. See drydock instances list.`,
          );
        }
        const view = viewOf(row);
        // First: a held lease is refused whatever the fence (a renewing server moves it at every beat).
        if (view.holdsLease) {
          throw new InstanceError(
            "INSTANCE_LEASE_UNEXPIRED",
            `Instance ${id} (${view.host}, pid ${view.pid}) still holds its lease for ${Math.ceil(view.leaseLeftMs / 1000)} s by the database's clock: it may be running and starting side effects. Nothing was changed. Wait until its lease has passed (drydock instances list), or stop that server.`,
          );
        }
        if (view.fence !== expectedFence) {
          throw new InstanceError(
            "INSTANCE_CHANGED",
            `Instance ${id} changed since the preview (now state ${view.state}, epoch ${view.epoch}, fence ${view.fence}). Nothing was changed. Run the preview again.`,
          );
        }
        if (view.state !== "live") return view;
        const updated = await tx.query<Raw>(
          `UPDATE instances SET state = 'dead' WHERE id = $1 RETURNING ${COLUMNS}`,
          [id],
        );
        return viewOf(updated[0] as Raw);
      });
    },
  };
}
