// What an example may ask the test to supply (`<!-- example: run; harness: dataDir, client -->`), and the
// outcome check its `// → …` comments turn into. Everything here is visible to the example's reader through
// the marker; nothing is slipped into the example itself.
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type BoatCreateJournal, openBoatCreateJournal } from "@drydock/boat-create-journal";
import { type BoatDeleteJournal, openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { type BoatLifecycle, createBoatLifecycle } from "@drydock/boat-lifecycle";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import type { BoatRecovery } from "@drydock/recovery-controller";
import type { Pattern } from "./extract.js";

export interface HarnessVars {
  /** The example's own fresh temporary directory (also the working directory while it runs). */
  dataDir: string;
  /** `<dataDir>/workspace`, created empty. */
  workspaceRoot: string;
  /** An in-process boat.dev simulator on 127.0.0.1, port 0, closed after the example. */
  sim: BoatSimulator;
  /** `sim.apiUrl`: the API base the client takes (`https://boat.dev/api/v1` in production). */
  baseUrl: string;
  /** `sim.token`. */
  token: string;
  /** `createBoatClient({ baseUrl, token })`. */
  client: BoatClient;
  /** A fresh UUID v4. */
  idempotencyKey: string;
  /** `openBoatCreateJournal({ dataDir })`. */
  createJournal: BoatCreateJournal;
  /** `openBoatDeleteJournal({ dataDir })`. */
  deleteJournal: BoatDeleteJournal;
  /** `"doc-example-env"`. */
  environmentId: string;
  /** `createBoatLifecycle({ client, createJournal, deleteJournal, environmentId })`. */
  lifecycle: BoatLifecycle;
  /** Type-checking only (never run): values an operator would take from a preview or a plan. */
  boats: BoatRecovery;
  operationId: string;
  botId: string;
  boxId: string;
  expectedState: string;
  commandPrefix: string;
}

export type HarnessName = keyof HarnessVars;

let current: { vars: Partial<HarnessVars>; where: string; checked: string[] } | null = null;

/** The one import of every generated example module. */
export const __doc = {
  get vars(): HarnessVars {
    if (!current) throw new Error("no example is running");
    return new Proxy(current.vars, {
      get(target, name) {
        if (!(name in target))
          throw new Error(`${current?.where}: the harness has no runtime value for ${String(name)}`);
        return target[name as HarnessName];
      },
    }) as HarnessVars;
  },
  /** An outcome comment: `value` must match `pattern`; `keys` are also checked by the type checker. */
  expect<T>(
    value: T,
    pattern: Pattern,
    where: string,
    _keys: readonly KeysOfUnion<NonNullable<Awaited<T>>>[],
  ): T {
    if (value instanceof Promise) {
      throw new Error(`${where}: the outcome is checked on a Promise (is an await missing?)`);
    }
    const problem = mismatch(value, pattern, "value");
    if (problem) {
      throw new Error(`${where}: the example says → ${describe(pattern)}, but ${problem}`);
    }
    current?.checked.push(where);
    return value;
  },
};

type KeysOfUnion<T> = T extends unknown ? keyof T & string : never;

function mismatch(value: unknown, pattern: Pattern, path: string): string | null {
  if ("eq" in pattern) {
    return Object.is(value, pattern.eq) ? null : `${path} is ${show(value)}`;
  }
  if ("undefined" in pattern) return value === undefined ? null : `${path} is ${show(value)}`;
  if ("oneOf" in pattern) {
    return pattern.oneOf.some((p) => mismatch(value, p, path) === null) ? null : `${path} is ${show(value)}`;
  }
  if ("array" in pattern) {
    if (!Array.isArray(value) || value.length !== pattern.array.length) return `${path} is ${show(value)}`;
    for (const [i, p] of pattern.array.entries()) {
      const problem = mismatch(value[i], p, `${path}[${i}]`);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value !== "object" || value === null) return `${path} is ${show(value)}`;
  for (const [key, p] of Object.entries(pattern.object)) {
    // `key: undefined` promises the key is absent (or undefined); anything else needs the key.
    if (p !== "present" && "undefined" in p) {
      const got = (value as Record<string, unknown>)[key];
      if (got !== undefined) return `${path}.${key} is ${show(got)}`;
      continue;
    }
    if (!(key in value)) return `${path} has no ${key} (it is ${show(value)})`;
    if (p === "present") continue;
    const problem = mismatch((value as Record<string, unknown>)[key], p, `${path}.${key}`);
    if (problem) return problem;
  }
  return null;
}

function describe(pattern: Pattern): string {
  if ("eq" in pattern) return JSON.stringify(pattern.eq);
  if ("undefined" in pattern) return "undefined";
  if ("oneOf" in pattern) return pattern.oneOf.map(describe).join(" | ");
  if ("array" in pattern) return `[${pattern.array.map(describe).join(", ")}]`;
  const parts = Object.entries(pattern.object).map(([k, p]) =>
    p === "present" ? k : `${k}: ${describe(p)}`,
  );
  return `{ ${parts.join(", ")} }`;
}

function show(value: unknown): string {
  if (value === undefined) return "undefined";
  try {
    const text = JSON.stringify(value);
    return text.length > 300 ? `${text.slice(0, 300)}…` : text;
  } catch {
    return String(value);
  }
}

const RUNTIME_ONLY_FOR_TYPES = new Set<HarnessName>([
  "boats",
  "operationId",
  "botId",
  "boxId",
  "expectedState",
  "commandPrefix",
]);

/**
 * Supplies `names` for one example run in `dir`, then runs `fn`; closes what it started (the simulator)
 * afterwards. Returns the outcomes the example checked.
 */
export async function withHarness(
  names: readonly string[],
  dir: string,
  where: string,
  fn: () => Promise<void>,
): Promise<string[]> {
  const vars: Partial<HarnessVars> = {};
  const closers: (() => Promise<void>)[] = [];
  const need = async <K extends HarnessName>(name: K): Promise<HarnessVars[K]> => {
    if (!(name in vars)) (vars as Record<string, unknown>)[name] = await make(name);
    return vars[name] as HarnessVars[K];
  };
  const make = async (name: HarnessName): Promise<HarnessVars[HarnessName]> => {
    switch (name) {
      case "dataDir":
        return dir;
      case "workspaceRoot": {
        const root = join(dir, "workspace");
        mkdirSync(root, { recursive: true });
        return root;
      }
      case "sim": {
        const sim = await startBoatSimulator({ host: "127.0.0.1", port: 0 });
        closers.push(() => sim.close());
        return sim;
      }
      case "baseUrl":
        return (await need("sim")).apiUrl;
      case "token":
        return (await need("sim")).token;
      case "client":
        return createBoatClient({ baseUrl: await need("baseUrl"), token: await need("token") });
      case "idempotencyKey":
        return randomUUID();
      case "createJournal":
        return openBoatCreateJournal({ dataDir: dir });
      case "deleteJournal":
        return openBoatDeleteJournal({ dataDir: dir });
      case "environmentId":
        return "doc-example-env";
      case "lifecycle":
        return createBoatLifecycle({
          client: await need("client"),
          createJournal: await need("createJournal"),
          deleteJournal: await need("deleteJournal"),
          environmentId: await need("environmentId"),
        });
      default:
        throw new Error(`${where}: unknown harness variable ${name}`);
    }
  };
  try {
    for (const name of names) {
      if (RUNTIME_ONLY_FOR_TYPES.has(name as HarnessName)) {
        throw new Error(`${where}: harness variable ${name} is for typecheck-only examples`);
      }
      await need(name as HarnessName);
    }
    current = { vars, where, checked: [] };
    await fn();
    return current.checked;
  } finally {
    current = null;
    for (const close of closers.reverse()) await close();
  }
}
