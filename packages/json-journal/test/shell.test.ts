import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  hasMarker,
  type JournalShellOptions,
  JournalStateErrorBase,
  openJournalShell,
  pausedMessage,
  redactParseCause,
  TRANSIENTLY_UNREADABLE,
} from "../src/index.js";
import { makeTempDir, removeDir } from "./helpers.js";

const STATUS = { PAUSED: 503, INVALID_ARGUMENT: 400 } as const;
type Code = keyof typeof STATUS;
const MARKER = Symbol.for("@drydock/json-journal/test/ShellError");

class ShellError extends JournalStateErrorBase<Code, (typeof STATUS)[Code]> {
  override readonly name = "ShellError";
  constructor(init: { code: Code; message: string; detail: string; cause?: unknown }) {
    super(MARKER, STATUS, init);
  }
}
const isShellError = (value: unknown): value is ShellError => hasMarker(value, MARKER);
const paused = (detail: string, cause?: unknown) =>
  new ShellError({ code: "PAUSED", detail, message: pausedMessage("Testing", detail, "Check it."), cause });

const Doc = z.object({ version: z.literal(1), items: z.array(z.string()) });
type Doc = z.infer<typeof Doc>;

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) removeDir(dir);
});

function options(extra: Partial<JournalShellOptions<Doc>> = {}): JournalShellOptions<Doc> {
  const dataDir = join(makeTempDir(), "data");
  dirs.push(dirname(dataDir));
  return {
    dataDir,
    file: "doc.json",
    lockFile: "doc.lock",
    schema: Doc,
    empty: () => ({ version: 1, items: [] }),
    check: (doc) => (doc.items.length > 3 ? "full" : null),
    paused,
    isOwn: isShellError,
    lock: { waitMs: 2_000 },
    ...extra,
  };
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a refusal");
}

describe("JournalStateErrorBase", () => {
  it("carries code, the status of its table, detail, cause and a registered marker", () => {
    const cause = new Error("under");
    const error = new ShellError({ code: "INVALID_ARGUMENT", message: "m", detail: "d", cause });
    expect([error.name, error.code, error.status, error.detail, error.message]).toEqual([
      "ShellError",
      "INVALID_ARGUMENT",
      400,
      "d",
      "m",
    ]);
    expect(error.cause).toBe(cause);
    expect(error).toBeInstanceOf(Error);
    expect(isShellError(error)).toBe(true);
    expect(isShellError({ [MARKER]: true })).toBe(true);
    expect(isShellError(new Error("x"))).toBe(false);
    expect(isShellError(null)).toBe(false);
    expect("cause" in new ShellError({ code: "PAUSED", message: "m", detail: "d" })).toBe(false);
  });
});

describe("pausedMessage and redactParseCause", () => {
  it("adds the advice unless the journal is merely not readable just now", () => {
    expect(pausedMessage("Testing", "invalid", "Check it.")).toBe(
      "Testing is paused because its recovery state is invalid. Check it.",
    );
    const transient = `${TRANSIENTLY_UNREADABLE} (EMFILE; retry)`;
    expect(pausedMessage("Testing", transient, "Check it.")).toBe(
      `Testing is paused because its recovery state is ${transient}.`,
    );
  });

  it("replaces a JSON.parse cause, which quotes file bytes, and keeps any other", () => {
    let parse: unknown;
    try {
      JSON.parse('{"secret-key": ');
    } catch (error) {
      parse = error;
    }
    const redacted = redactParseCause(parse) as SyntaxError;
    expect(redacted).toBeInstanceOf(SyntaxError);
    expect(redacted.message).toBe("the journal file is not valid JSON");
    const other = new Error("EIO");
    expect(redactParseCause(other)).toBe(other);
  });
});

describe("openJournalShell", () => {
  it("reads, updates and peeks the document of <dataDir>/<file>", async () => {
    const o = options();
    const shell = openJournalShell(o);
    expect(await shell.read((doc) => doc.items)).toEqual([]);
    expect(await shell.update((doc) => ({ next: { ...doc, items: ["a"] }, result: 1 }))).toBe(1);
    expect(await shell.peek((doc) => doc.items)).toEqual(["a"]);
    expect(existsSync(join(o.dataDir, "doc.json"))).toBe(true);
  });

  it("passes its own errors through, from a step and from a view", async () => {
    const shell = openJournalShell(options());
    const own = paused("out of date");
    expect(
      await caught(
        shell.update(() => {
          throw own;
        }),
      ),
    ).toBe(own);
    expect(
      await caught(
        shell.read(() => {
          throw own;
        }),
      ),
    ).toBe(own);
  });

  it("turns anything else escaping (a view, a step, a bad next document) into the journal's 'unavailable'", async () => {
    const shell = openJournalShell(options());
    const boom = new Error("boom");
    for (const call of [
      shell.read(() => {
        throw boom;
      }),
      shell.peek(() => {
        throw boom;
      }),
      shell.update(() => {
        throw boom;
      }),
    ]) {
      const error = (await caught(call)) as ShellError;
      expect(isShellError(error)).toBe(true);
      expect([error.code, error.detail]).toEqual(["PAUSED", "unavailable"]);
      expect(error.cause).toBe(boom);
    }
    const full = (await caught(
      shell.update((doc) => ({ next: { ...doc, items: ["a", "b", "c", "d"] }, result: null })),
    )) as ShellError;
    expect(isShellError(full)).toBe(true);
    expect(full.detail).toBe("unavailable");
  });

  it("gives a cancelled lock wait the lock's words, and labels the lock 'drydock' by default", async () => {
    const o = options();
    mkdirSync(o.dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(
      join(o.dataDir, "doc.lock"),
      `${JSON.stringify({ version: 1, pid: process.pid, token: randomUUID(), createdAt: 1 })}\n`,
    );
    const aborted = openJournalShell({ ...o, lock: { waitMs: 2_000, signal: AbortSignal.abort() } });
    const error = (await caught(aborted.update((doc) => ({ next: doc, result: null })))) as ShellError;
    expect(isShellError(error)).toBe(true);
    expect(error.detail).toBe("locked, and the caller cancelled the wait for it");
    expect((error.cause as { code?: unknown }).code).toBe("LOCK_ABORTED");
    const timedOut = openJournalShell({ ...o, lock: { waitMs: 50 } });
    const busy = (await caught(timedOut.read((doc) => doc))) as ShellError;
    expect(busy.detail).toBe("locked by another drydock process");
    expect(busy.message).toBe(
      "Testing is paused because its recovery state is locked by another drydock process. Check it.",
    );
  });
});
