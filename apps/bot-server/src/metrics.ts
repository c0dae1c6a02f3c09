import { readFileSync } from "node:fs";
import { MAX_REQUESTS } from "@drydock/boat-create-journal";
import { MAX_RECORDS } from "@drydock/boat-delete-journal";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { MAX_BOTS } from "./bots.js";

/** The journals whose sizes /metrics reports against their caps, read (without their locks) at scrape time. */
export interface JournalSizes {
  createRows(): Promise<number>;
  deleteRows(): Promise<number>;
  bots(): Promise<number>;
}

/** The server's version (its package.json, one level above both src/ and dist/). */
export function serverVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
      version?: unknown;
    };
    return typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    return "unknown";
  }
}

/** The caps of the file backend's journals and of the bot registry (bots.json); a row backend has its own. */
const JOURNAL_CAPS = { create: MAX_REQUESTS, delete: MAX_RECORDS, bots: MAX_BOTS } as const;
export type JournalCaps = Record<keyof typeof JOURNAL_CAPS, number>;

/**
 * Gauges read at scrape time: the build, and each journal's rows against its cap (`journals.sources`, set by
 * buildServer; none before it is).
 */
function registerStateGauges(
  registry: Registry,
  journals: { sources: JournalSizes | null },
  caps: JournalCaps,
): void {
  new Gauge({
    name: "drydock_build_info",
    help: "Always 1; the labels say which drydock server and Node.js run.",
    labelNames: ["version", "node"] as const,
    registers: [registry],
  }).set({ version: serverVersion(), node: process.version }, 1);
  new Gauge({
    name: "drydock_journal_capacity",
    help: "Rows a journal holds at most (a full create journal refuses new creates, a full bot registry new bots).",
    labelNames: ["journal"] as const,
    registers: [registry],
    collect() {
      for (const [journal, cap] of Object.entries(caps)) this.set({ journal }, cap);
    },
  });
  new Gauge({
    name: "drydock_journal_rows",
    help: "Rows in each journal now (create journal rows, deletion fences, bots), read at scrape time without the journals' locks.",
    labelNames: ["journal"] as const,
    registers: [registry],
    async collect() {
      const sources = journals.sources;
      if (sources === null) return;
      this.reset();
      const read = async (journal: keyof typeof JOURNAL_CAPS, count: () => Promise<number>) => {
        try {
          this.set({ journal }, await count());
        } catch {
          // Unreadable now: no sample (GET /readyz names the journal that cannot be read).
        }
      };
      await Promise.all([
        read("create", sources.createRows),
        read("delete", sources.deleteRows),
        read("bots", sources.bots),
      ]);
    },
  });
}

/**
 * The server's Prometheus metrics, on a registry of its own (never prom-client's global one), so two
 * servers in one process (tests) never share or double-register series.
 */
export function createMetrics(options: { journalCaps?: Partial<JournalCaps> } = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  /** Set by buildServer: the journals the size gauges read when scraped. */
  const journals: { sources: JournalSizes | null } = { sources: null };
  registerStateGauges(registry, journals, { ...JOURNAL_CAPS, ...options.journalCaps });
  return {
    journals,
    registry,
    httpRequests: new Counter({
      name: "drydock_http_requests_total",
      help: "HTTP requests by method, route pattern and status code.",
      labelNames: ["method", "route", "status"] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: "drydock_http_request_duration_seconds",
      help: "HTTP request duration by route pattern.",
      labelNames: ["route"] as const,
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: [registry],
    }),
    providerCalls: new Counter({
      name: "drydock_provider_calls_total",
      help: "Calls to boat.dev by method and outcome (2xx, 4xx, 409, 429, 5xx, transport).",
      labelNames: ["method", "outcome"] as const,
      registers: [registry],
    }),
    providerDuration: new Histogram({
      name: "drydock_provider_call_duration_seconds",
      help: "boat.dev call latency by method and outcome (2xx, 4xx, 409, 429, 5xx, transport), until the answer's headers.",
      labelNames: ["method", "outcome"] as const,
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    providerRetries: new Counter({
      name: "drydock_provider_retries_total",
      help: "boat.dev create requests retried with the same idempotency key (by the lifecycle, within one provision).",
      registers: [registry],
    }),
    refusals: new Counter({
      name: "drydock_refusals_total",
      help: "Answers that refused work: 409 (busy, fenced), 429, 503 (paused recovery state).",
      labelNames: ["status", "code"] as const,
      registers: [registry],
    }),
    recoveryItemsOpen: new Gauge({
      name: "drydock_recovery_items_open",
      help: "Items that need a person, as GET /v1/recovery counts them: recounted by that route, and by a scrape when the count is older than 60 s.",
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Wraps `fetch` so every provider call is counted by outcome; the token and bodies are never looked at. */
export function countingFetch(metrics: Metrics, inner: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const method = (init?.method ?? "GET").toUpperCase();
    const started = performance.now();
    const observe = (outcome: string) => {
      metrics.providerCalls.inc({ method, outcome });
      metrics.providerDuration.observe({ method, outcome }, (performance.now() - started) / 1000);
    };
    try {
      const response = await inner(input, init);
      const s = response.status;
      observe(s === 409 || s === 429 ? String(s) : `${Math.floor(s / 100)}xx`);
      return response;
    } catch (error) {
      observe("transport");
      throw error;
    }
  };
}
