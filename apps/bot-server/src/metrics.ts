import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * The server's Prometheus metrics, on a registry of its own (never prom-client's global one), so two
 * servers in one process (tests) never share or double-register series.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
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
    try {
      const response = await inner(input, init);
      const s = response.status;
      const outcome = s === 409 || s === 429 ? String(s) : `${Math.floor(s / 100)}xx`;
      metrics.providerCalls.inc({ method, outcome });
      return response;
    } catch (error) {
      metrics.providerCalls.inc({ method, outcome: "transport" });
      throw error;
    }
  };
}
