import { AsyncLocalStorage } from "node:async_hooks";
import { hostname } from "node:os";
import { performance } from "node:perf_hooks";
import type { InstanceRegistry } from "@drydock/storage-postgres";
import { HttpProblem, LEASE_LOST } from "./http-errors.js";

/** DRYDOCK_LEASE_TTL_MS's default: how long a renewal keeps this server's instance alive. */
export const DEFAULT_LEASE_TTL_MS = 15_000;

export interface InstanceLease {
  /** This server's instance now (it changes when a lapsed lease is re-registered with a new epoch). */
  current(): { id: string; epoch: number };
  /**
   * Runs `next` (the rest of a request) bound to the instance current now: the request's writes carry that
   * epoch (`writer`), and its gate stays closed if the server re-registers meanwhile — a request that began
   * before a pause never continues under the new epoch.
   */
  scope(next: () => void): void;
  /** What the storage's write fence reads: the running request's epoch, else the current one. */
  writer(): { id: string; epoch: number };
  /**
   * The side-effect gate: throws 503 `lease_lost` (nothing started) once the local lease has passed, i.e.
   * when this server could not renew in time, as after a pause, or when the running request began under an
   * earlier epoch. Called before every create POST and DELETE.
   */
  gate(): void;
  /**
   * The gate bound to the running request's epoch as of now, to be checked later in any async context: the
   * provider fetch takes it when a request is dispatched and checks it as undici writes the request to the
   * socket (`leaseGatedFetch`), so a pause anywhere between the first gate and the write sends nothing.
   */
  boundGate(): () => void;
  /** Stops the heartbeat and marks the instance stopped (best effort: a lapsed lease says the same). */
  close(): Promise<void>;
}

export interface InstanceLeaseOptions {
  instances: InstanceRegistry;
  ttlMs: number;
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void };
  /** Tests only: the monotonic clock, ms (default performance.now). */
  monotonic?: () => number;
}

/**
 * The server's instance on a postgres store: registered at start, renewed every ttl/3 by a heartbeat, with a
 * LOCAL "lease valid until" taken from this host's monotonic clock at the START of the renew's request
 * (conservative: the database's lease began no earlier) plus ttl minus a margin of ttl/5, so this server
 * stops starting side effects before the database could judge it dead, whatever its wall clock says. A
 * renewal the database refuses (the lease passed, the row declared dead or replaced) re-registers: a new row
 * with a strictly greater epoch, the old one marked dead. A renewal that fails (database unreachable) is
 * retried at the next beat; meanwhile the gate closes once the local lease passes.
 */
export async function startInstanceLease(options: InstanceLeaseOptions): Promise<InstanceLease> {
  const { instances, ttlMs, log } = options;
  const monotonic = options.monotonic ?? (() => performance.now());
  const margin = Math.floor(ttlMs / 5);
  const host = hostname();
  let validUntil = Number.NEGATIVE_INFINITY;
  const startedAt = monotonic();
  let me = await instances.register({ host, pid: process.pid, ttlMs });
  validUntil = startedAt + ttlMs - margin;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let beating: Promise<void> = Promise.resolve();

  async function beat(): Promise<void> {
    const sent = monotonic();
    try {
      const answer = await instances.renew(me.id, me.epoch, ttlMs);
      if (answer.renewed) {
        validUntil = sent + ttlMs - margin;
        return;
      }
      const previous = me;
      const again = monotonic();
      me = await instances.register({ host, pid: process.pid, ttlMs, replaces: previous });
      validUntil = again + ttlMs - margin;
      log.warn(
        {
          instance: me.id,
          epoch: me.epoch,
          previous: previous.id,
          previousEpoch: previous.epoch,
          reason: answer.reason,
        },
        "this server's instance lease was lost (it could not renew in time, or was declared dead); it refused side effects until now and re-registered with a new epoch",
      );
    } catch (error) {
      log.warn(
        { err: error, instance: me.id, epoch: me.epoch },
        "the instance lease could not be renewed; retrying at the next heartbeat (side effects are refused once the lease passes)",
      );
    }
  }

  const schedule = () => {
    if (closed) return;
    timer = setTimeout(
      () => {
        beating = beat().finally(schedule);
      },
      Math.max(1, Math.floor(ttlMs / 3)),
    );
    timer.unref();
  };
  schedule();

  const requests = new AsyncLocalStorage<{ id: string; epoch: number }>();
  const current = () => ({ id: me.id, epoch: me.epoch });
  /** The side-effect gate for a request that began under `began` (undefined: not a request's work). */
  const check = (began: { id: string; epoch: number } | undefined): void => {
    if (began !== undefined && began.epoch !== me.epoch) {
      throw new HttpProblem(
        503,
        LEASE_LOST,
        `This request began under this server's instance epoch ${began.epoch}, whose lease was lost (the server was paused or cut off); the server has re-registered since (epoch ${me.epoch}), and a request never continues under a new epoch, so it starts no side effect (no computer is created or deleted; nothing was sent to boat.dev). Retry the request.`,
      );
    }
    if (monotonic() < validUntil) return;
    throw new HttpProblem(
      503,
      LEASE_LOST,
      "This server could not renew its instance lease in time, so it starts no side effect (no computer is created or deleted; nothing was sent to boat.dev). Another instance serves the bot; retry there, or here once this server has re-registered.",
    );
  };
  return {
    current,
    scope: (next) => requests.run(current(), next),
    writer: () => requests.getStore() ?? current(),
    gate: () => check(requests.getStore()),
    boundGate() {
      const began = requests.getStore();
      return () => check(began);
    },
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      await beating;
      try {
        await instances.stop(me.id, me.epoch);
      } catch (error) {
        log.warn(
          { err: error, instance: me.id },
          "the instance could not be marked stopped; its lease will lapse",
        );
      }
    },
  };
}
