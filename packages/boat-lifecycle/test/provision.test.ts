import { KEY_RETENTION_MS, KEY_SAFETY_MARGIN_MS, openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatClient } from "@drydock/boat-provider";
import { afterEach, describe, expect, it } from "vitest";
import { createBoatLifecycle, LIFECYCLE_MESSAGES, legacyBoatName, scopedBoatName } from "../src/index.js";
import {
  createOutside,
  createRefused400,
  deletes,
  ENV_ID,
  type Harness,
  harness,
  patches,
  posts,
  rejection,
} from "./helpers.js";

let h: Harness | undefined;
const use = async (options?: Parameters<typeof harness>[0]) => {
  h = await harness(options);
  return h;
};

afterEach(async () => {
  if (h === undefined) return;
  try {
    // Every create that left the process carried exactly the journaled body.
    for (const post of posts(h)) expect(post.body).toEqual({ ttlSeconds: 28_800, noEnv: true });
    // No idempotency key or body ever reaches a journal snapshot the lifecycle returns (checked per test),
    // and no key appears in any request other than the create.
    for (const request of h.wire) if (request.method !== "POST") expect(request.idempotencyKey).toBeNull();
  } finally {
    await h.close();
    h = undefined;
  }
});

describe("provision: create with the journaled key", () => {
  it("creates, names and resolves a Boat; the result says it was created by this attempt", async () => {
    const t = await use();
    const result = await t.lifecycle.provision("bot-1");
    expect(result).toEqual({
      boxId: expect.stringMatching(/^bx_/),
      name: t.lifecycle.boatNameFor("bot-1"),
      createdThisAttempt: true,
    });
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, perName: { [result.name]: 1 } });
    const rows = t.createFile()?.requests ?? [];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ botId: "bot-1", boxId: result.boxId, resolved: true });
    // Provisioning again finds the same Boat: no second POST.
    const again = await t.lifecycle.provision("bot-1");
    expect(again).toEqual({ ...result, createdThisAttempt: false });
    expect(posts(t)).toHaveLength(1);
  });

  it("journals the key before the first POST leaves (a crash right after begin keeps it)", async () => {
    const t = await use();
    const seen: string[] = [];
    t.restart({
      crash: {
        point(name) {
          if (name === "provision.after-begin") {
            seen.push(name);
            expect(posts(t)).toHaveLength(0);
            const rows = t.createFile()?.requests ?? [];
            expect(rows).toHaveLength(1);
            expect(rows[0]?.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
          }
        },
      },
    });
    await t.lifecycle.provision("bot-1");
    expect(seen).toEqual(["provision.after-begin"]);
    expect(posts(t)[0]?.idempotencyKey).toBe(
      // The key on the wire is the journaled one.
      (t.createFile()?.requests[0]?.idempotencyKey as string) ?? "missing",
    );
  });

  it("lost response: retries ONCE with the same key and gets the first Boat back, renamed once", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after" });
    const result = await t.lifecycle.provision("bot-1");
    const sent = posts(t);
    expect(sent).toHaveLength(2);
    expect(new Set(sent.map((p) => p.idempotencyKey)).size).toBe(1);
    expect(sent[0]?.idempotencyKey).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4/);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
    expect(patches(t)).toHaveLength(1);
    expect(patches(t)[0]?.body).toEqual({ name: t.lifecycle.boatNameFor("bot-1") });
    expect(result.createdThisAttempt).toBe(true);
  });

  it("two lost responses: 503 'could not confirm', key kept; the next provision replays the same Boat", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({
      code: "provider_unavailable",
      status: 503,
      message: LIFECYCLE_MESSAGES.createUnconfirmed,
    });
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, unnamed: 1 });
    expect(t.createFile()?.requests).toHaveLength(1);
    const result = await t.lifecycle.provision("bot-1");
    expect(new Set(posts(t).map((p) => p.idempotencyKey)).size).toBe(1);
    expect(posts(t)).toHaveLength(3);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, unnamed: 0 });
    // The key was minted by the first call; the replay in the second call did not mint it.
    expect(result.createdThisAttempt).toBe(false);
  });

  it("onCreateRetry hears each same-key retry, and an observer that throws changes nothing", async () => {
    const t = await use();
    const heard: { botId: string; outcome: string }[] = [];
    t.restart({ onCreateRetry: (info) => heard.push(info) });
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-before", status: 503, times: 1 });
    await t.lifecycle.provision("bot-1");
    expect(posts(t)).toHaveLength(2);
    expect(heard).toEqual([{ botId: "bot-1", outcome: "server-error" }]);

    t.restart({
      onCreateRetry: () => {
        throw new Error("a broken metric");
      },
    });
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-before", status: 503, times: 1 });
    const second = await t.lifecycle.provision("bot-2");
    expect(second.boxId).toMatch(/^bx_/);
    expect(posts(t)).toHaveLength(4);
  });

  it("restart after 5xx: the provider's message surfaces, 2 POSTs share the key; after a restart the 3rd reuses it", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-before", status: 503, times: 2 });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error.code).toBe("provider_unavailable");
    expect(error.status).toBe(502);
    expect(error.message).toContain("Injected failure; nothing was done.");
    expect(posts(t)).toHaveLength(2);
    const key = posts(t)[0]?.idempotencyKey;
    expect(posts(t)[1]?.idempotencyKey).toBe(key);

    t.restart();
    const result = await t.lifecycle.provision("bot-1");
    expect(posts(t)).toHaveLength(3);
    expect(posts(t)[2]?.idempotencyKey).toBe(key);
    expect(patches(t)).toHaveLength(1);
    expect(result.createdThisAttempt).toBe(false);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("5xx after commit (fail-after): one ambiguous retry with the same key replays the committed Boat", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-after", status: 500 });
    await t.lifecycle.provision("bot-1");
    expect(posts(t)).toHaveLength(2);
    expect(new Set(posts(t).map((p) => p.idempotencyKey)).size).toBe(1);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("a lost response and a 5xx share ONE retry budget", async () => {
    const t = await use();
    await t.faults(
      { method: "POST", path: "^/sandboxes$", action: "drop-after" },
      { method: "POST", path: "^/sandboxes$", action: "fail-after", status: 502 },
    );
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 502 });
    expect(posts(t)).toHaveLength(2);
    // The key is kept: the Boat exists, so the next call replays it.
    await t.lifecycle.provision("bot-1");
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("idempotency_in_progress three times, then 201: 4 POSTs, one key, waits 250/750/1500 ms", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "in-progress", times: 3, retryAfterS: 0 });
    await t.lifecycle.provision("bot-1");
    expect(posts(t)).toHaveLength(4);
    expect(new Set(posts(t).map((p) => p.idempotencyKey)).size).toBe(1);
    expect(t.sleeps).toEqual([250, 750, 1500]);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("idempotency_in_progress honours a larger Retry-After", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "in-progress", times: 2, retryAfterS: 1 });
    await t.lifecycle.provision("bot-1");
    expect(t.sleeps).toEqual([1000, 1000]);
  });

  it("idempotency_in_progress a 4th time: 409 'still creating', the key is kept for the next call", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "in-progress", times: 4, retryAfterS: 0 });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({
      code: "create_in_progress",
      status: 409,
      message: LIFECYCLE_MESSAGES.createInProgress,
    });
    expect(posts(t)).toHaveLength(4);
    expect(t.createFile()?.requests).toHaveLength(1);
    await t.lifecycle.provision("bot-1");
    expect(new Set(posts(t).map((p) => p.idempotencyKey)).size).toBe(1);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("stillWanted: asked after the key is journaled; no sends nothing, discards the key, fails provision_withdrawn", async () => {
    const t = await use();
    let keysWhenAsked = -1;
    const error = await rejection(
      t.lifecycle.provision("bot-1", {
        stillWanted: () => {
          keysWhenAsked = t.createFile()?.requests.length ?? 0;
          return false;
        },
      }),
    );
    expect(error).toMatchObject({ code: "provision_withdrawn", status: 409 });
    expect(error.message).toBe(LIFECYCLE_MESSAGES.provisionWithdrawn);
    // Asked once the key was durable (so a removal marking the owner first sees it, or this sees the mark).
    expect(keysWhenAsked).toBe(1);
    expect(posts(t)).toEqual([]);
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.stats()).toMatchObject({ createsCommitted: 0, live: 0 });
    // Yes: created as usual (also when the check is async).
    const made = await t.lifecycle.provision("bot-1", { stillWanted: async () => true });
    expect(made.createdThisAttempt).toBe(true);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("stillWanted answering no to a resumed key keeps that key (an earlier attempt may have sent it)", async () => {
    const t = await use();
    // Two lost answers: 503 "could not confirm", the key kept for the next call.
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    await rejection(t.lifecycle.provision("bot-1"));
    const kept = t.createFile()?.requests ?? [];
    expect(kept).toHaveLength(1);
    const error = await rejection(t.lifecycle.provision("bot-1", { stillWanted: () => false }));
    expect(error.code).toBe("provision_withdrawn");
    expect(t.createFile()?.requests).toEqual(kept);
  });

  it("a definitive 4xx discards the key; the next provision starts over with a fresh key", async () => {
    const t = await use();
    await t.faults(createRefused400);
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_refused", status: 400 });
    expect(error.message).toContain("boat.dev refused to create the cloud computer");
    expect(t.createFile()?.requests).toEqual([]);
    await t.lifecycle.provision("bot-1");
    expect(new Set(posts(t).map((p) => p.idempotencyKey)).size).toBe(2);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("a 4xx after an ambiguous attempt keeps the key (the first attempt may have created the Boat)", async () => {
    const t = await use();
    await t.faults(
      { method: "POST", path: "^/sandboxes$", action: "drop-after" },
      { method: "POST", path: "^/sandboxes$", action: "fail-before", status: 400, code: "invalid_request" },
    );
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_refused", status: 400 });
    expect(t.createFile()?.requests).toHaveLength(1);
    await t.lifecycle.provision("bot-1");
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("429: waits Retry-After and retries once with the same key; twice: 429 passed through, key kept", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "rate-limit", retryAfterS: 2 });
    await t.lifecycle.provision("bot-1");
    expect(t.sleeps).toEqual([2000]);
    expect(posts(t)).toHaveLength(2);

    await t.faults({ method: "POST", path: "^/sandboxes$", action: "rate-limit", times: 2 });
    const error = await rejection(t.lifecycle.provision("bot-2"));
    expect(error).toMatchObject({ code: "provider_refused", status: 429 });
    expect(error.message).toContain("rate limiting");
    expect((t.createFile()?.requests ?? []).filter((r) => r.botId === "bot-2")).toHaveLength(1);
  });

  it("expired key: past boat.dev's 24-hour window nothing is POSTed; 503 asks for manual reconciliation", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-before", status: 503, times: 2 });
    await rejection(t.lifecycle.provision("bot-1"));
    t.clock.offsetMs = 24 * 60 * 60 * 1000 + 1;
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
    expect(error.message).toContain("older than boat.dev's 24-hour retry window");
    expect(posts(t)).toHaveLength(2);
  });

  it("a resumed key within an hour of boat.dev's 24-hour window is never POSTed again: 503, key kept", async () => {
    // One clock for both sides, and waits move it, as real time would.
    const t = await use({ sleepMovesClock: true });
    // The first create commits a Boat but both answers are lost: the key stays journaled, key-only.
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    expect((await rejection(t.lifecycle.provision("bot-1"))).code).toBe("provider_unavailable");
    const [row] = t.createFile()?.requests ?? [];
    expect(t.stats().createsCommitted).toBe(1);

    // Half a second inside the window, boat.dev rate limits once (Retry-After 1 s): a retry after that
    // wait would reach boat.dev after it forgot the key and bill a second Boat.
    t.clock.offsetMs += KEY_RETENTION_MS - 500;
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "rate-limit", retryAfterS: 1 });
    const error = await rejection(t.restart().provision("bot-1"));
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
    expect(error.message).toContain("too close to the end of boat.dev's 24-hour retry window");
    expect(error.message).toContain("Check boat.dev for an unnamed Boat");
    expect(posts(t)).toHaveLength(2);
    expect(t.createFile()?.requests).toEqual([row]);
    expect(t.stats()).toMatchObject({ createsCommitted: 1 });
  });

  it("the key's deadline is re-checked before the first POST of a call", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    await rejection(t.lifecycle.provision("bot-1"));
    const [row] = t.createFile()?.requests ?? [];
    // The journal still trusts the key (1 s before its deadline) ...
    t.clock.offsetMs += KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS - 1_000;
    t.restart({
      crash: {
        point(name) {
          // ... but the deadline passes between the journal's answer and the POST.
          if (name === "provision.after-begin") t.clock.offsetMs += 2_000;
        },
      },
    });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
    expect(error.message).toBe(LIFECYCLE_MESSAGES.createKeyNearExpiry);
    expect(posts(t)).toHaveLength(2);
    expect(t.createFile()?.requests).toEqual([row]);
  });

  it("the key's deadline is re-checked before every retry: waits that cross it stop the call, key kept", async () => {
    const t = await use({ sleepMovesClock: true });
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    await rejection(t.lifecycle.provision("bot-1"));
    const [row] = t.createFile()?.requests ?? [];
    // 2 s before the deadline boat.dev answers 429 with Retry-After 3 s: the wait crosses the deadline.
    t.clock.offsetMs += KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS - 2_000;
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "rate-limit", retryAfterS: 3 });
    const error = await rejection(t.restart().provision("bot-1"));
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
    expect(error.message).toBe(LIFECYCLE_MESSAGES.createKeyNearExpiry);
    expect(t.sleeps).toEqual([3_000]);
    expect(posts(t)).toHaveLength(3);
    expect(new Set(posts(t).map((p) => p.idempotencyKey))).toEqual(new Set([row?.idempotencyKey]));
    expect(t.createFile()?.requests).toEqual([row]);
    expect(t.stats()).toMatchObject({ createsCommitted: 1 });
  });

  it("429 with a Retry-After beyond 30 s: no wait inside the call; the error carries the wait and says it", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "rate-limit", retryAfterS: 3600 });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_refused", status: 429, retryAfterMs: 3_600_000 });
    expect(error.message).toContain("rate limiting");
    expect(error.message).toContain("retry in 60 minutes");
    expect(t.sleeps).toEqual([]);
    expect(posts(t)).toHaveLength(1);
    expect(t.createFile()?.requests).toHaveLength(1);
  });

  it("idempotency_in_progress with a Retry-After beyond 30 s: 409 carries the wait", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "in-progress", retryAfterS: 120 });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "create_in_progress", status: 409, retryAfterMs: 120_000 });
    expect(error.message).toContain("retry in 2 minutes");
    expect(posts(t)).toHaveLength(1);
  });

  it("a 5xx's Retry-After is waited before its one retry with the same key", async () => {
    const t = await use();
    t.tamper(withRetryAfter("2"));
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-before", status: 503 });
    await t.lifecycle.provision("bot-1");
    expect(t.sleeps).toEqual([2_000]);
    expect(posts(t)).toHaveLength(2);
    expect(new Set(posts(t).map((p) => p.idempotencyKey)).size).toBe(1);
  });

  it("a 5xx's Retry-After beyond 30 s: stops at once, key kept, the error carries the wait", async () => {
    const t = await use();
    t.tamper(withRetryAfter("3600"));
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-before", status: 503 });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 502, retryAfterMs: 3_600_000 });
    expect(error.message).toContain("Its request was kept");
    expect(error.message).not.toMatch(/\.\./);
    expect(error.message).toContain("retry in 60 minutes");
    expect(posts(t)).toHaveLength(1);
    expect(t.sleeps).toEqual([]);
    expect(t.createFile()?.requests).toHaveLength(1);
  });

  it("list unavailable: provisioning never POSTs", async () => {
    const t = await use();
    await t.faults({ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 503 });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 503 });
    expect(error.message).toContain(LIFECYCLE_MESSAGES.listUnavailable);
    expect(posts(t)).toHaveLength(0);
    // Nothing was created, and the provider's words about a failed list never talk of create keys.
    expect(error.message).not.toMatch(/idempotency|may have taken effect/);
    expect(t.createFile()).toBeNull();
  });

  it("recovered Boat: after a restart with an empty (lagging) list, the remembered id is read directly — no POST, no DELETE", async () => {
    const t = await use({ sim: { listLagMs: 3_600_000 } });
    const first = await t.lifecycle.provision("bot-1");
    t.restart();
    const again = await t.lifecycle.provision("bot-1");
    expect(again).toEqual({ ...first, createdThisAttempt: false });
    expect(posts(t)).toHaveLength(1);
    expect(deletes(t)).toHaveLength(0);
  });

  it("a Boat found under the legacy name is adopted, not recreated, and keeps its name", async () => {
    const t = await use();
    const boxId = await createOutside(t, legacyBoatName("bot-1"));
    const result = await t.lifecycle.provision("bot-1");
    expect(result).toEqual({ boxId, name: legacyBoatName("bot-1"), createdThisAttempt: false });
    expect(posts(t)).toHaveLength(0);
    expect(t.createFile()?.requests).toEqual([
      expect.objectContaining({ botId: "bot-1", boxId, resolved: true }),
    ]);
    expect(await t.lifecycle.findBoat("bot-1")).toMatchObject({ boxId, legacyName: true });
  });

  it("a Boat with another installation's name is ignored (never adopted)", async () => {
    const t = await use();
    const foreign = await createOutside(t, legacyBoatName("bot-1").replace("ogb-", `ogb-${"f".repeat(12)}-`));
    const result = await t.lifecycle.provision("bot-1");
    expect(result.boxId).not.toBe(foreign);
    expect(t.stats()).toMatchObject({ live: 2 });
  });

  it("two of this bot's names on two Boats: fails closed, nothing created", async () => {
    const t = await use();
    await createOutside(t, t.lifecycle.boatNameFor("bot-1"));
    await createOutside(t, legacyBoatName("bot-1"));
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "inventory_conflict", status: 503 });
    expect(error.message).toContain("repair it in boat.dev");
    expect(posts(t)).toHaveLength(0);
  });

  it("a second provision for the same bot in this process gets 409 bot_busy at once", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "delay", ms: 300 });
    const first = t.lifecycle.provision("bot-1");
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "bot_busy", status: 409 });
    await first;
    expect(t.stats()).toMatchObject({ createsCommitted: 1 });
  });

  it("rejects a malformed bot id before touching anything", async () => {
    const t = await use();
    const error = await rejection(t.lifecycle.provision("../etc"));
    expect(error).toMatchObject({ code: "invalid_argument", status: 400 });
    expect(t.wire).toHaveLength(0);
  });

  it("names are scoped by the environment id: another installation's lifecycle never finds this Boat", async () => {
    const t = await use();
    const mine = await t.lifecycle.provision("bot-1");
    expect(mine.name).toBe(scopedBoatName(ENV_ID, "bot-1"));
    const other = createBoatLifecycle({
      client: t.client,
      createJournal: openBoatCreateJournal({ dataDir: `${t.dataDir}/other` }),
      deleteJournal: openBoatDeleteJournal({ dataDir: `${t.dataDir}/other` }),
      environmentId: "another-installation",
      sleep: async () => {},
    });
    expect(await other.findBoat("bot-1")).toBeNull();
    expect(other.boatNameFor("bot-1")).not.toBe(mine.name);
  });
});

/** A lifecycle on the harness's data dir whose client refuses POSTs number `refused` at connect (never sent). */
function connectRefusing(t: Harness, refused: (post: number) => boolean) {
  let count = 0;
  return createBoatLifecycle({
    client: createBoatClient({
      baseUrl: t.sim.apiUrl,
      token: t.sim.token,
      fetch: async (input: string, init: RequestInit) => {
        if (init.method === "POST" && refused(++count)) {
          throw new TypeError("fetch failed", {
            cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1"), { code: "ECONNREFUSED" }),
          });
        }
        return fetch(input, init);
      },
    }),
    createJournal: openBoatCreateJournal({ dataDir: t.dataDir }),
    deleteJournal: openBoatDeleteJournal({ dataDir: t.dataDir }),
    environmentId: ENV_ID,
    sleep: async () => {},
  });
}

/** Adds boat.dev's Retry-After to every 5xx answer of a create. */
function withRetryAfter(seconds: string) {
  return (request: { method: string; path: string }, response: Response) =>
    request.method === "POST" && response.status >= 500
      ? new Response(response.body, {
          status: response.status,
          headers: { "content-type": "application/json", "retry-after": seconds },
        })
      : response;
}

describe("provision: the final create error never says 'nothing was created' when something may have been", () => {
  it("a lost answer, then a retry refused at connect: 'could not confirm', key kept, the next call replays", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after" });
    const error = await rejection(connectRefusing(t, (post) => post === 2).provision("bot-1"));
    expect(error).toMatchObject({
      code: "provider_unavailable",
      status: 503,
      message: LIFECYCLE_MESSAGES.createUnconfirmed,
    });
    expect(t.stats().createsCommitted).toBe(1);
    expect(t.createFile()?.requests).toHaveLength(1);
    const replayed = await t.lifecycle.provision("bot-1");
    expect(replayed.createdThisAttempt).toBe(false);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, unnamed: 0 });
  });

  it("a resumed key whose POSTs are all refused at connect: 'could not confirm', since an earlier call may have created it", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    await rejection(t.lifecycle.provision("bot-1"));
    const error = await rejection(connectRefusing(t, () => true).provision("bot-1"));
    expect(error).toMatchObject({
      code: "provider_unavailable",
      message: LIFECYCLE_MESSAGES.createUnconfirmed,
    });
    expect(t.createFile()?.requests).toHaveLength(1);
  });

  it("a key minted by this call and never sent: 'could not be reached, so no cloud computer was created'", async () => {
    const t = await use();
    const error = await rejection(connectRefusing(t, () => true).provision("bot-1"));
    expect(error.code).toBe("provider_unavailable");
    expect(error.message).toContain("no cloud computer was created");
    expect(t.stats().createRequests).toBe(0);
  });
});

describe("provision: only boat.dev's own 404/410 proves a remembered Boat gone", () => {
  it("a proxy's envelope-less 400 for the first POST is no refusal by boat.dev: key kept, one Boat ever", async () => {
    const t = await use({ sim: { listLagMs: 10_000 } });
    // boat.dev committed the create, but a front proxy (a WAF) replaced its answer with its own 400 page.
    t.tamper((request, response) =>
      request.method === "POST" && request.path === "/sandboxes"
        ? new Response("<html><body>400 Bad Request</body></html>", {
            status: 400,
            headers: { "content-type": "text/html" },
          })
        : response,
    );
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_refused", status: 400 });
    expect(error.message).toContain("its request was kept");
    const rows = t.createFile()?.requests ?? [];
    expect(rows).toHaveLength(1);
    t.tamper(null);
    const boat = await t.restart().provision("bot-1");
    expect(boat.boxId).toMatch(/^bx_/);
    expect(t.createFile()?.requests[0]?.idempotencyKey).toBe(rows[0]?.idempotencyKey);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("a proxy's envelope-less 404 for the remembered Boat: 502, row kept, no second Boat", async () => {
    const t = await use({ sim: { listLagMs: 10_000 } });
    const first = await t.lifecycle.provision("bot-1");
    const rows = t.createFile()?.requests;
    // A front proxy answers GET /sandboxes/{id} with its own 404 page (no boat.dev envelope).
    t.tamper((request, response) =>
      request.method === "GET" && /^\/sandboxes\/bx_/.test(request.path)
        ? new Response("<html><body>404 Not Found</body></html>", {
            status: 404,
            headers: { "content-type": "text/html" },
          })
        : response,
    );
    const error = await rejection(t.restart().provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 502 });
    expect(error.message).toContain("no error envelope");
    expect(t.createFile()?.requests).toEqual(rows);
    expect(posts(t)).toHaveLength(1);
    t.tamper(null);
    expect(await t.lifecycle.provision("bot-1")).toEqual({ ...first, createdThisAttempt: false });
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });
});
