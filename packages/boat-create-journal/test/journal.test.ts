import { randomUUID } from "node:crypto";
import {
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { errnoError, type FileOps, nodeFileOps } from "@drydock/file-lock";
import { afterEach, describe, expect, it } from "vitest";
import {
  type BoatCreateJournal,
  BoatCreateJournalError,
  CREATE_JOURNAL_FILE,
  CREATE_JOURNAL_LOCK_FILE,
  isBoatCreateJournalError,
  isJournalStateError,
  JournalStateError,
  KEY_RETENTION_MS,
  KEY_SAFETY_MARGIN_MS,
  openBoatCreateJournal,
  TRANSIENTLY_UNREADABLE,
} from "../src/index.js";
import { deadPid, expectPaused, refusal, tempDataDir } from "./helpers.js";

const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const T0 = 1_767_000_000_000;
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function setup(options: { now?: () => number; waitMs?: number } = {}) {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  const file = join(dir.dataDir, CREATE_JOURNAL_FILE);
  const lock = join(dir.dataDir, CREATE_JOURNAL_LOCK_FILE);
  // Each open is a "restart": a new journal object with no memory of the previous one.
  const open = (extra: Partial<Parameters<typeof openBoatCreateJournal>[0]> = {}): BoatCreateJournal =>
    openBoatCreateJournal({
      dataDir: dir.dataDir,
      ...(options.now ? { now: options.now } : {}),
      lock: { waitMs: options.waitMs ?? 2_000 },
      ...extra,
    });
  return { ...dir, file, lock, open, text: () => readFileSync(file, "utf8") };
}

describe("beginBoatCreate across restarts", () => {
  it("reuses the journaled key after a restart, with startedNow false (retry after 5xx)", async () => {
    const s = setup();
    const first = await s.open().beginBoatCreate("bot-1", BODY);
    expect(first.startedNow).toBe(true);
    const again = await s.open().beginBoatCreate("bot-1", BODY);
    expect(again).toEqual({ request: first.request, startedNow: false });
    expect(JSON.parse(s.text()).requests).toHaveLength(1);
  });

  it("returns the remembered Boat after a restart and never mints a second key (recovered Boat)", async () => {
    const s = setup();
    const journal = s.open();
    const { request } = await journal.beginBoatCreate("bot-1", BODY);
    const remembered = await journal.rememberCreatedBoat(request, "bx_abcdefgh");
    await journal.resolveBoatCreate(remembered);
    const after = await s.open().beginBoatCreate("bot-1", '{"ttlSeconds":7200,"noEnv":true}');
    expect(after.startedNow).toBe(false);
    expect(after.request).toMatchObject({
      boxId: "bx_abcdefgh",
      resolved: true,
      idempotencyKey: request.idempotencyKey,
    });
  });

  it("refuses a changed body while the bot's earlier key is unreconciled, writing nothing", async () => {
    const s = setup();
    await s.open().beginBoatCreate("bot-1", BODY);
    const before = s.text();
    await expectPaused(
      s.open().beginBoatCreate("bot-1", '{"ttlSeconds":7200,"noEnv":true}'),
      "waiting for an earlier cloud computer request to be reconciled",
    );
    expect(s.text()).toBe(before);
  });

  it("reuses a pending key 1 ms before its trust deadline, refuses it within the last hour and after 24 hours", async () => {
    let now = T0;
    const s = setup({ now: () => now });
    const { request } = await s.open().beginBoatCreate("bot-1", BODY);
    now = T0 + KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS - 1;
    expect(await s.open().beginBoatCreate("bot-1", BODY)).toEqual({ request, startedNow: false });
    now = T0 + KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS;
    const unchanged = s.text();
    await expectPaused(
      s.open().beginBoatCreate("bot-1", BODY),
      "too close to the end of boat.dev's 24-hour retry window",
    );
    now = T0 + KEY_RETENTION_MS - 1;
    await expectPaused(
      s.open().beginBoatCreate("bot-1", BODY),
      "too close to the end of boat.dev's 24-hour retry window",
    );
    expect(s.text()).toBe(unchanged);
    now = T0 + KEY_RETENTION_MS + 1;
    const before = s.text();
    await expectPaused(s.open().beginBoatCreate("bot-1", BODY), "older than boat.dev's 24-hour retry window");
    expect(s.text()).toBe(before);
    const [entry] = await s.open().boatCreateRecoverySnapshot();
    expect(entry).toEqual({ botId: "bot-1", resolved: false, createdAt: T0, ageMs: KEY_RETENTION_MS + 1 });
  });
});

describe("remember, resolve, snapshot, retire, discard", () => {
  it("keeps key-only and remembered rows unresolved until resolveBoatCreate; snapshots hold no key or body", async () => {
    const s = setup();
    const journal = s.open();
    const a = await journal.beginBoatCreate("bot-a", BODY);
    const b = await journal.beginBoatCreate("bot-b", BODY);
    const remembered = await journal.rememberCreatedBoat(b.request, "bx_bbbbbbbb");
    expect(await journal.boatCreateRecoverySnapshot()).toEqual([
      expect.objectContaining({ botId: "bot-a", resolved: false }),
      expect.objectContaining({ botId: "bot-b", boxId: "bx_bbbbbbbb", resolved: false }),
    ]);
    await journal.resolveBoatCreate(remembered);
    const snapshot = await journal.boatCreateRecoverySnapshot();
    expect(snapshot[1]).toMatchObject({ botId: "bot-b", boxId: "bx_bbbbbbbb", resolved: true });
    const text = JSON.stringify(snapshot);
    for (const secret of [
      a.request.idempotencyKey,
      b.request.idempotencyKey,
      BODY,
      "requestBody",
      "idempotencyKey",
    ]) {
      expect(text).not.toContain(secret);
    }
    await journal.retireDeletedBoatCreate("bx_bbbbbbbb");
    expect((await journal.boatCreateRecoverySnapshot()).map((e) => e.botId)).toEqual(["bot-a"]);
    await journal.discardBoatCreate(a.request);
    expect(await journal.boatCreateRecoverySnapshot()).toEqual([]);
    expect(JSON.parse(s.text())).toEqual({ version: 1, requests: [] });
  });

  it("refuses to remember a different Boat for a row that already has one", async () => {
    const s = setup();
    const journal = s.open();
    const { request } = await journal.beginBoatCreate("bot-1", BODY);
    await journal.rememberCreatedBoat(request, "bx_abcdefgh");
    await expectPaused(journal.rememberCreatedBoat(request, "bx_zzzzzzzz"), "out of date");
    await expectPaused(journal.resolveBoatCreate(request), "out of date");
  });

  it("refuses to remember or resolve a discarded request", async () => {
    const s = setup();
    const journal = s.open();
    const { request } = await journal.beginBoatCreate("bot-1", BODY);
    await journal.discardBoatCreate(request);
    await expectPaused(journal.rememberCreatedBoat(request, "bx_abcdefgh"), "out of date");
  });

  it("refuses to discard a row another process remembered under the same key, and keeps it", async () => {
    const s = setup();
    const a = s.open();
    const { request } = await a.beginBoatCreate("bot-1", BODY);
    // Process B resumes the same key, boat.dev answers it, B remembers and resolves the Boat.
    const b = s.open();
    const resumed = await b.beginBoatCreate("bot-1", BODY);
    expect(resumed).toEqual({ request, startedNow: false });
    await b.resolveBoatCreate(await b.rememberCreatedBoat(resumed.request, "bx_abcdefgh"));
    const before = s.text();
    // A's own POST was refused: its discard must not erase B's Boat.
    await expectPaused(a.discardBoatCreate(request), "out of date");
    expect(s.text()).toBe(before);
    expect(await a.boatCreateRecoverySnapshot()).toEqual([
      expect.objectContaining({ botId: "bot-1", boxId: "bx_abcdefgh", resolved: true }),
    ]);
  });

  it("leaves the file untouched when retire or discard match nothing", async () => {
    const s = setup();
    const journal = s.open();
    const { request } = await journal.beginBoatCreate("bot-1", BODY);
    const before = statSync(s.file, { bigint: true });
    await journal.retireDeletedBoatCreate("bx_zzzzzzzz");
    await journal.discardBoatCreate({ ...request, idempotencyKey: randomUUID() });
    const after = statSync(s.file, { bigint: true });
    expect([after.ino, after.mtimeNs]).toEqual([before.ino, before.mtimeNs]);
  });
});

describe("adoptResolvedBoat", () => {
  it("is idempotent, supersedes a pending row, replaces on re-adoption and refuses another bot's Boat", async () => {
    const s = setup();
    const journal = s.open();
    await journal.beginBoatCreate("bot-1", BODY);
    await journal.adoptResolvedBoat("bot-1", "bx_aaaaaaaa");
    const once = s.text();
    expect(JSON.parse(once).requests).toEqual([
      expect.objectContaining({
        botId: "bot-1",
        requestBody: '{"adopted":"legacy-name","boxId":"bx_aaaaaaaa"}',
        boxId: "bx_aaaaaaaa",
        resolved: true,
      }),
    ]);
    await journal.adoptResolvedBoat("bot-1", "bx_aaaaaaaa");
    expect(s.text()).toBe(once);
    await journal.adoptResolvedBoat("bot-1", "bx_bbbbbbbb");
    expect((await journal.boatCreateRecoverySnapshot()).map((e) => [e.botId, e.boxId])).toEqual([
      ["bot-1", "bx_bbbbbbbb"],
    ]);
    await expectPaused(
      journal.adoptResolvedBoat("bot-2", "bx_bbbbbbbb"),
      "conflicted with another bot's remembered cloud computer",
    );
  });
});

describe("file format and permissions", () => {
  it("writes exactly { version, requests } as 2-space JSON with a newline, 0600 in a 0700 directory", async () => {
    const s = setup({ now: () => T0 });
    const journal = s.open({ newKey: () => "00000000-0000-4000-8000-000000000001" });
    await journal.beginBoatCreate("bot-1", BODY);
    expect(s.text()).toBe(
      `${JSON.stringify(
        {
          version: 1,
          requests: [
            {
              botId: "bot-1",
              requestBody: BODY,
              idempotencyKey: "00000000-0000-4000-8000-000000000001",
              createdAt: T0,
            },
          ],
        },
        null,
        2,
      )}\n`,
    );
    expect(statSync(s.file).mode & 0o777).toBe(0o600);
    expect(statSync(s.dataDir).mode & 0o777).toBe(0o700);
    // Only the journal remains: no lock, no candidate, no temp file.
    expect(readdirSync(s.dataDir)).toEqual([CREATE_JOURNAL_FILE]);
  });
});

describe("bad arguments", () => {
  it("are refused with 400 INVALID_ARGUMENT before any file or directory is touched", async () => {
    const s = setup();
    const journal = s.open();
    const valid = {
      botId: "bot-1",
      requestBody: BODY,
      idempotencyKey: randomUUID(),
      createdAt: T0,
    };
    const cases: [Promise<unknown>, string][] = [
      [journal.beginBoatCreate("bad id", BODY), "invalid bot id for cloud computer creation"],
      [journal.beginBoatCreate("x".repeat(121), BODY), "invalid bot id for cloud computer creation"],
      [journal.beginBoatCreate("bot-1", ""), "invalid cloud computer create request"],
      [journal.beginBoatCreate("bot-1", "x".repeat(1_025)), "invalid cloud computer create request"],
      [journal.beginBoatCreate(42 as unknown as string, BODY), "invalid bot id for cloud computer creation"],
      [journal.rememberCreatedBoat(valid, "bx_ABCDEFGH"), "boat.dev returned an invalid cloud computer id"],
      [
        journal.rememberCreatedBoat({ ...valid, idempotencyKey: "k" }, "bx_abcdefgh"),
        "invalid cloud computer create request",
      ],
      [journal.resolveBoatCreate(null as never), "invalid cloud computer create request"],
      [journal.discardBoatCreate({} as never), "invalid cloud computer create request"],
      [journal.adoptResolvedBoat("bot 1", "bx_abcdefgh"), "invalid bot id for cloud computer ownership"],
      [journal.adoptResolvedBoat("bot-1", "bx_abc"), "invalid cloud computer id for ownership"],
      [journal.retireDeletedBoatCreate("bx_0000000o"), "invalid deleted cloud computer id"],
    ];
    for (const [promise, message] of cases) {
      const error = await refusal(promise);
      expect(error).toBeInstanceOf(JournalStateError);
      expect({ code: error.code, status: error.status, message: error.message }).toEqual({
        code: "INVALID_ARGUMENT",
        status: 400,
        message,
      });
    }
    expect(existsSync(s.dataDir)).toBe(false);
  });

  it("accepts a 1024-character body, counted in UTF-16 units as the file format does", async () => {
    const s = setup();
    const body = "😀".repeat(512);
    expect((await s.open().beginBoatCreate("bot-1", body)).startedNow).toBe(true);
    await expect(s.open().beginBoatCreate("bot-2", `${body}x`)).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
    });
  });
});

describe("damaged journal files are refused and never rewritten", () => {
  it("a truncated file is unreadable and a duplicate-key file is invalid; bytes stay as they were", async () => {
    const s = setup();
    const journal = s.open();
    await journal.beginBoatCreate("bot-1", BODY);
    const good = s.text();
    const truncated = good.slice(0, good.length / 2);
    writeFileSync(s.file, truncated);
    await expectPaused(journal.boatCreateRecoverySnapshot(), "unreadable");
    await expectPaused(journal.beginBoatCreate("bot-2", BODY), "unreadable");
    expect(s.text()).toBe(truncated);

    const row = JSON.parse(good).requests[0];
    const duplicate = `${JSON.stringify({ version: 1, requests: [row, { ...row, botId: "bot-2" }] }, null, 2)}\n`;
    writeFileSync(s.file, duplicate);
    await expectPaused(journal.beginBoatCreate("bot-3", BODY), "invalid");
    await expectPaused(journal.adoptResolvedBoat("bot-3", "bx_abcdefgh"), "invalid");
    expect(s.text()).toBe(duplicate);
  });

  it("a journal path that is a directory is unreadable, and nothing replaces it", async () => {
    const s = setup();
    mkdirSync(s.file, { recursive: true });
    await expectPaused(s.open().beginBoatCreate("bot-1", BODY), "unreadable");
    expect(statSync(s.file).isDirectory()).toBe(true);
  });
});

describe("the journal lock", () => {
  const owner = (pid: number, token = randomUUID()) =>
    `${JSON.stringify({ version: 1, pid, token, createdAt: T0 })}\n`;

  it("retires a complete lock left by an exited process", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(s.lock, owner(deadPid()));
    expect((await s.open().beginBoatCreate("bot-1", BODY)).startedNow).toBe(true);
    expect(existsSync(s.lock)).toBe(false);
  });

  it("recovers when the elected reaper of a dead lock is itself dead (legacy PID record)", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    const token = randomUUID();
    writeFileSync(s.lock, owner(deadPid(), token));
    writeFileSync(`${s.lock}.reap-${token}`, `${deadPid()}\n`);
    expect((await s.open().beginBoatCreate("bot-1", BODY)).startedNow).toBe(true);
    expect(existsSync(s.lock)).toBe(false);
  });

  it("fails with 'locked by another drydock process' while a live reaper holds the election, touching nothing", async () => {
    const s = setup({ waitMs: 300 });
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    const token = randomUUID();
    const lockBytes = owner(deadPid(), token);
    const reaper = `${JSON.stringify({ version: 1, pid: process.pid, token: randomUUID(), createdAt: T0, targetToken: token })}\n`;
    writeFileSync(s.lock, lockBytes);
    writeFileSync(`${s.lock}.reap-${token}`, reaper);
    await expectPaused(s.open().beginBoatCreate("bot-1", BODY), "locked by another drydock process");
    await expectPaused(s.open().beginBoatCreate("bot-2", BODY), "locked by another drydock process");
    expect(readFileSync(s.lock, "utf8")).toBe(lockBytes);
    expect(readFileSync(`${s.lock}.reap-${token}`, "utf8")).toBe(reaper);
    expect(existsSync(s.file)).toBe(false);
  });

  it("peekBoatCreates answers while a live process holds the lock: frozen sanitised rows, one array per unchanged file", async () => {
    const s = setup({ waitMs: 100 });
    const writer = s.open();
    const { request } = await writer.beginBoatCreate("bot-1", BODY);
    await writer.beginBoatCreate("bot-2", BODY);
    await writer.rememberCreatedBoat(request, "bx_peek2345");
    const viewer = s.open();
    const lockBytes = owner(process.pid);
    writeFileSync(s.lock, lockBytes);
    try {
      const rows = await viewer.peekBoatCreates();
      const snapshot = await writer.boatCreateRecoverySnapshot().catch((error: unknown) => error);
      expect(snapshot).toMatchObject({ detail: "locked by another drydock process" });
      expect([...rows].sort((a, b) => a.botId.localeCompare(b.botId))).toEqual([
        { botId: "bot-1", boxId: "bx_peek2345", resolved: false, createdAt: expect.any(Number) },
        { botId: "bot-2", resolved: false, createdAt: expect.any(Number) },
      ]);
      // Never a key or a body, even though the file holds both.
      expect(JSON.stringify(rows)).not.toContain(request.idempotencyKey);
      expect(JSON.stringify(rows)).not.toContain("requestBody");
      expect(Object.isFrozen(rows) && rows.every((row) => Object.isFrozen(row))).toBe(true);
      expect(await viewer.peekBoatCreates()).toBe(rows);
      expect(readFileSync(s.lock, "utf8")).toBe(lockBytes);
    } finally {
      rmSync(s.lock);
    }
    await writer.resolveBoatCreate({ ...request, boxId: "bx_peek2345" });
    const after = await viewer.peekBoatCreates();
    expect(after.find((row) => row.botId === "bot-1")).toMatchObject({
      boxId: "bx_peek2345",
      resolved: true,
    });
    writeFileSync(s.file, "[]");
    await expectPaused(viewer.peekBoatCreates(), "invalid");
    expect(readFileSync(s.file, "utf8")).toBe("[]");
  });

  it("fails closed on a corrupt lock and leaves it as it was", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(s.lock, "{not json");
    await expectPaused(s.open().beginBoatCreate("bot-1", BODY), "lock is invalid");
    expect(readFileSync(s.lock, "utf8")).toBe("{not json");
    expect(existsSync(s.file)).toBe(false);
  });

  it("gives up within its bound when the lock vanishes between EEXIST and the read", async () => {
    const s = setup({ waitMs: 200 });
    // Every publish finds the name taken, every read finds it gone: a lock that flickers forever.
    const flicker: FileOps = {
      ...nodeFileOps,
      linkSync: ((from: string, to: string) => {
        if (to === s.lock) throw errnoError("EEXIST", "link", to);
        return nodeFileOps.linkSync(from, to);
      }) as FileOps["linkSync"],
      openSync: ((path: string, ...rest: unknown[]) => {
        if (path === s.lock) throw errnoError("ENOENT", "open", path);
        return (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    await expectPaused(
      s.open({ lock: { waitMs: 200, fs: flicker } }).beginBoatCreate("bot-1", BODY),
      "locked by another drydock process",
    );
    expect(existsSync(s.file)).toBe(false);
  });

  it("gives up within its bound when a reaped lock is replaced by another dead owner each time", async () => {
    const s = setup({ waitMs: 200 });
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    const dead = deadPid();
    writeFileSync(s.lock, owner(dead));
    let replaced = 0;
    const replacing: FileOps = {
      ...nodeFileOps,
      unlinkSync: ((path: string) => {
        nodeFileOps.unlinkSync(path);
        if (path === s.lock) {
          replaced += 1;
          // Published whole, as a real (doomed) contender would.
          writeFileSync(`${s.lock}.x`, owner(dead));
          linkSync(`${s.lock}.x`, s.lock);
          unlinkSync(`${s.lock}.x`);
        }
      }) as FileOps["unlinkSync"],
    };
    await expectPaused(
      s.open({ lock: { waitMs: 200, fs: replacing } }).beginBoatCreate("bot-1", BODY),
      "locked by another drydock process",
    );
    expect(replaced).toBeGreaterThan(0);
    expect(existsSync(s.file)).toBe(false);
  });
});

describe("errors", () => {
  it("JournalStateError carries code, status, detail and a Symbol.for marker", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true });
    writeFileSync(s.file, "[]");
    const error = await refusal(s.open().boatCreateRecoverySnapshot());
    expect(error).toBeInstanceOf(JournalStateError);
    expect(isJournalStateError(error)).toBe(true);
    expect(isJournalStateError(new Error("x"))).toBe(false);
    expect(error.detail).toBe("invalid");
  });

  it("is exported as BoatCreateJournalError; JournalStateError and isJournalStateError are the same, deprecated", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true });
    writeFileSync(s.file, "[]");
    const error = await refusal(s.open().boatCreateRecoverySnapshot());
    expect(error).toBeInstanceOf(BoatCreateJournalError);
    expect(error.name).toBe("BoatCreateJournalError");
    expect(JournalStateError).toBe(BoatCreateJournalError);
    expect(isJournalStateError).toBe(isBoatCreateJournalError);
    expect(isBoatCreateJournalError(error)).toBe(true);
    expect(error.status).toBe(503);
    // The guard recognises a copy from another instance of this package by its registered marker alone.
    const copy = { [Symbol.for("@drydock/boat-create-journal/JournalStateError")]: true };
    expect(isBoatCreateJournalError(copy)).toBe(true);
    expect(
      isBoatCreateJournalError({ [Symbol.for("@drydock/boat-delete-journal/JournalStateError")]: true }),
    ).toBe(false);
    const invalid = new BoatCreateJournalError({ code: "INVALID_ARGUMENT", message: "m", detail: "d" });
    expect([invalid.code, invalid.status, invalid.detail, invalid.message]).toEqual([
      "INVALID_ARGUMENT",
      400,
      "d",
      "m",
    ]);
  });

  it("a cancelled wait for the lock comes back as the journal's own error, for updates and reads alike", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    // A live holder (this very process), so the journal must wait, and the wait is cancelled at once.
    writeFileSync(
      s.lock,
      `${JSON.stringify({ version: 1, pid: process.pid, token: randomUUID(), createdAt: 1 })}\n`,
    );
    const journal = s.open({ lock: { waitMs: 2_000, signal: AbortSignal.abort() } });
    for (const call of [journal.beginBoatCreate("bot-1", BODY), journal.boatCreateRecoverySnapshot()]) {
      const error = await refusal(call);
      expect(error).toBeInstanceOf(BoatCreateJournalError);
      expect([error.code, error.detail]).toEqual([
        "BOAT_CREATE_PAUSED",
        "locked, and the caller cancelled the wait for it",
      ]);
      expect((error.cause as { code?: unknown }).code).toBe("LOCK_ABORTED");
    }
    expect(existsSync(s.file)).toBe(false);
  });

  it("never quotes journal bytes (keys, bodies) in a parse failure's cause", async () => {
    const s = setup();
    const { request } = await s.open().beginBoatCreate("bot-1", BODY);
    const damaged = s.text().replace('"version"', "version");
    writeFileSync(s.file, damaged);
    const error = await refusal(s.open().boatCreateRecoverySnapshot());
    const seen = `${error.message} ${String((error.cause as Error | undefined)?.message)}`;
    expect(error.detail).toBe("unreadable");
    expect(seen).not.toContain(request.idempotencyKey);
    expect(seen).not.toContain("ttlSeconds");
  });
});

describe("a journal this process cannot read just now (EMFILE)", () => {
  it("pauses with the errno and 'retry', never sending a person to repair a healthy file", async () => {
    const s = setup();
    await s.open().beginBoatCreate("bot-1", BODY);
    const stored = s.text();
    const emfile: FileOps = {
      ...nodeFileOps,
      openSync: ((path: string, ...rest: unknown[]) => {
        if (path === s.file) throw errnoError("EMFILE", "open", path);
        return (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    const error = await refusal(s.open({ fs: emfile }).boatCreateRecoverySnapshot());
    expect(error).toBeInstanceOf(JournalStateError);
    expect(error.code).toBe("BOAT_CREATE_PAUSED");
    expect(error.detail.startsWith(TRANSIENTLY_UNREADABLE)).toBe(true);
    expect(error.message).toContain("EMFILE");
    expect(error.message).toContain("retry");
    expect(error.message).not.toMatch(/repair/);
    expect(s.text()).toBe(stored);
    // A journal that is damaged still says so.
    writeFileSync(s.file, "{ not json");
    expect((await refusal(s.open().boatCreateRecoverySnapshot())).message).toMatch(
      /recovery state is unreadable\. Check boat\.dev for an unnamed Boat before repairing/,
    );
  });
});

describe("a journal written by a newer drydock (a higher version)", () => {
  it("pauses saying to upgrade, never sending a person to repair it, and leaves it as it is", async () => {
    const s = setup();
    await s.open().beginBoatCreate("bot-1", BODY);
    const newer = s.text().replace('"version": 1', '"version": 2');
    writeFileSync(s.file, newer);
    for (const call of [
      () => s.open().boatCreateRecoverySnapshot(),
      () => s.open().beginBoatCreate("bot-2", BODY),
    ]) {
      const error = await refusal(call());
      expect(error.code).toBe("BOAT_CREATE_PAUSED");
      expect(error.message).toMatch(
        /recovery state is in a newer format \(version 2; this drydock reads version 1\): upgrade this process, and leave the file as it is\.$/,
      );
      expect(error.message).not.toMatch(/repair/);
    }
    expect(s.text()).toBe(newer);
  });
});
