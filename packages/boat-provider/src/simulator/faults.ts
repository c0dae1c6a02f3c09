import type { z } from "zod";
import type { FaultAction, faultRuleSchema } from "../schema.js";
import { Closing } from "./http.js";

/** One injected fault rule (POST /_sim/faults), with the times it still applies. */
export interface FaultState {
  action: FaultAction;
  method?: string;
  path?: RegExp;
  remaining: number;
  status?: number;
  code?: string;
  ms?: number;
  retryAfterS?: number;
}

/** The active fault rules, and the `delay` faults now waiting (abandoned when the simulator closes). */
export interface Faults {
  rules: FaultState[];
  closing: boolean;
  pendingDelays: Set<{ timer: NodeJS.Timeout; reject: (error: Error) => void }>;
}

export function newFaults(): Faults {
  return { rules: [], closing: false, pendingDelays: new Set() };
}

export function addFaultRules(faults: Faults, rules: readonly z.output<typeof faultRuleSchema>[]): void {
  for (const rule of rules) {
    faults.rules.push({
      action: rule.action,
      ...(rule.method === undefined ? {} : { method: rule.method.toUpperCase() }),
      ...(rule.path === undefined ? {} : { path: new RegExp(rule.path) }),
      remaining: rule.times,
      ...(rule.status === undefined ? {} : { status: rule.status }),
      ...(rule.code === undefined ? {} : { code: rule.code }),
      ...(rule.ms === undefined ? {} : { ms: rule.ms }),
      ...(rule.retryAfterS === undefined ? {} : { retryAfterS: rule.retryAfterS }),
    });
  }
}

/** GET /_sim/faults's view of the active rules. */
export function faultRulesView(faults: Faults) {
  return faults.rules.map((fault) => ({
    action: fault.action,
    method: fault.method ?? null,
    path: fault.path?.source ?? null,
    remaining: fault.remaining,
  }));
}

/** The first rule matching this request, consumed once. */
export function takeFault(faults: Faults, method: string, path: string): FaultState | undefined {
  for (const fault of faults.rules) {
    // block-deletion is consumed when a deletion operation starts, not by request matching.
    if (fault.action === "block-deletion" || fault.remaining <= 0) continue;
    if (fault.method !== undefined && fault.method !== method) continue;
    if (fault.path !== undefined && !fault.path.test(path)) continue;
    fault.remaining -= 1;
    faults.rules = faults.rules.filter((candidate) => candidate.remaining > 0);
    return fault;
  }
  return undefined;
}

/** True (and the rule consumed once) when a `block-deletion` rule applies to a deletion of `path`. */
export function takeBlockDeletion(faults: Faults, path: string): boolean {
  const fault = faults.rules.find(
    (candidate) =>
      candidate.action === "block-deletion" &&
      candidate.remaining > 0 &&
      (candidate.method === undefined || candidate.method === "DELETE") &&
      (candidate.path === undefined || candidate.path.test(path)),
  );
  if (!fault) return false;
  fault.remaining -= 1;
  faults.rules = faults.rules.filter((candidate) => candidate.remaining > 0);
  return true;
}

/** The `delay` fault: waits real time, abandoned (throws Closing) when the simulator closes. */
export function pauseFor(faults: Faults, fault: FaultState | undefined): Promise<void> {
  if (fault?.action !== "delay") return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const entry = {
      timer: setTimeout(() => {
        faults.pendingDelays.delete(entry);
        if (faults.closing) reject(new Closing());
        else resolve();
      }, fault.ms ?? 1_000),
      reject,
    };
    faults.pendingDelays.add(entry);
  });
}

/** On close: every waiting `delay` is abandoned at once. */
export function abandonDelays(faults: Faults): void {
  faults.closing = true;
  for (const entry of faults.pendingDelays) {
    clearTimeout(entry.timer);
    entry.reject(new Closing());
  }
  faults.pendingDelays.clear();
}
