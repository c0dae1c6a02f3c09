import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BoatCreateJournalError, NEWER_FORMAT, TRANSIENTLY_UNREADABLE } from "@drydock/boat-create-journal";
import { BoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { BoatApiError, BoatTransportError } from "@drydock/boat-provider";
import { RecoveryError } from "@drydock/recovery-controller";
import { SagaError } from "@drydock/restore-saga";
import { afterEach, describe, expect, it } from "vitest";
import { bufferIo, CliError, classifyError, EXIT_CODES, main, toSnakeCode } from "../src/index.js";

const ANSI = /\u001b\[/;
let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

function dataDir(): string {
  dir = mkdtempSync(join(tmpdir(), "drydock-main-"));
  mkdirSync(join(dir, "workspaces"), { recursive: true });
  return dir;
}

describe("main (in-process, injected streams)", () => {
  it("a subcommand's --help lists the global options every printed command carries after it", async () => {
    const io = bufferIo();
    expect(await main(["creates", "adopt", "--help"], { io, env: {} })).toBe(EXIT_CODES.OK);
    for (const option of ["--expected-state", "--yes", "--data-dir", "--json", "--provider-url"]) {
      expect(io.out()).toContain(option);
    }
  });

  it("maps every error family to its exit code in one place", () => {
    expect(classifyError(new CliError("USAGE", "x")).exitCode).toBe(EXIT_CODES.USAGE);
    // A journal paused as damaged needs a person (5); one not read just now (EMFILE) is a failure to retry (1).
    for (const make of [
      (detail: string) => new BoatCreateJournalError({ code: "BOAT_CREATE_PAUSED", detail, message: detail }),
      (detail: string) => new BoatDeleteJournalError({ code: "BOAT_DELETE_PAUSED", detail, message: detail }),
    ]) {
      expect(classifyError(make("unreadable")).exitCode).toBe(EXIT_CODES.UNSAFE);
      expect(classifyError(make(`${TRANSIENTLY_UNREADABLE} (EMFILE: …; retry)`)).exitCode).toBe(
        EXIT_CODES.FAILURE,
      );
      // Written by a newer drydock: not a retry's to cure; the person upgrades this process (the message).
      expect(classifyError(make(`${NEWER_FORMAT} (version 2; this drydock reads version 1)`)).exitCode).toBe(
        EXIT_CODES.UNSAFE,
      );
    }
    expect(classifyError(new RecoveryError({ code: "SAGA_CONFLICT", message: "x" })).exitCode).toBe(4);
    expect(classifyError(new RecoveryError({ code: "STATE_CHANGED", message: "x" })).exitCode).toBe(4);
    expect(classifyError(new RecoveryError({ code: "ACTION_NOT_ALLOWED", message: "x" })).exitCode).toBe(5);
    expect(classifyError(new RecoveryError({ code: "NOT_FOUND", message: "x" }))).toEqual({
      exitCode: 3,
      code: "not_found",
    });
    expect(
      classifyError(
        new RecoveryError({ code: "OWNER_CONFLICT", message: "x", details: { ownerAlive: true } }),
      ).exitCode,
    ).toBe(5);
    expect(classifyError(new RecoveryError({ code: "OWNER_CONFLICT", message: "x" })).exitCode).toBe(4);
    expect(classifyError(new SagaError({ code: "NOT_FOUND", message: "x" })).exitCode).toBe(3);
    expect(classifyError(new SagaError({ code: "RECOVERY_REQUIRED", message: "x" })).exitCode).toBe(5);
    expect(classifyError(new SagaError({ code: "WRITE_FAILED", message: "x" })).exitCode).toBe(1);
    expect(
      classifyError(new BoatTransportError({ phase: "connect", timedOut: false, request: "GET /x" }))
        .exitCode,
    ).toBe(6);
    expect(
      classifyError(new BoatApiError({ status: 503, code: "service_unavailable", message: "x" })).exitCode,
    ).toBe(6);
    expect(classifyError(new BoatApiError({ status: 404, code: "not_found", message: "x" })).exitCode).toBe(
      3,
    );
    expect(classifyError(new Error("boom"))).toEqual({ exitCode: 1, code: "cli_failed" });
  });

  it("shows every code in the bot server's lower snake_case, whichever package threw it", () => {
    expect(toSnakeCode("WORKSPACE_LOCKED")).toBe("workspace_locked");
    expect(toSnakeCode("transport_connect_failed")).toBe("transport_connect_failed");
    expect(toSnakeCode("camelCaseCode")).toBe("camel_case_code");
    expect(toSnakeCode("503")).toBe("503");
    expect(classifyError(new CliError("FENCE_MISMATCH", "x"))).toEqual({
      exitCode: 4,
      code: "fence_mismatch",
    });
    expect(classifyError(new SagaError({ code: "WORKSPACE_LOCKED", message: "x" }))).toEqual({
      exitCode: 5,
      code: "workspace_locked",
    });
  });

  it("colours the verdict only on a TTY and never under NO_COLOR or --no-color", async () => {
    const root = dataDir();
    const tty = bufferIo({ tty: true });
    // No boat.dev here: the verdict is INCOMPLETE (exit 6), in red on a TTY.
    expect(await main(["status", "--data-dir", root], { io: tty, env: {} })).toBe(6);
    expect(tty.out()).toMatch(ANSI);
    expect(tty.out().trim().split("\n").at(-1)).toContain(
      "INCOMPLETE: nothing needs a person in the journals, restores and locks, but boat.dev was not checked",
    );

    for (const [args, env] of [
      [["status", "--data-dir", root], { NO_COLOR: "1" }],
      [["status", "--data-dir", root, "--no-color"], {}],
    ] as const) {
      const io = bufferIo({ tty: true });
      expect(await main(args, { io, env })).toBe(6);
      expect(io.out()).not.toMatch(ANSI);
    }
    const pipe = bufferIo({ tty: false });
    expect(await main(["status", "--data-dir", root], { io: pipe, env: {} })).toBe(6);
    expect(pipe.out()).not.toMatch(ANSI);
  });

  it("prints one JSON document on stdout with --json and the error envelope on stderr", async () => {
    const root = dataDir();
    const ok = bufferIo();
    expect(await main(["locks", "list", "--json"], { io: ok, env: { DRYDOCK_DATA_DIR: root } })).toBe(0);
    expect(JSON.parse(ok.out())).toEqual({ schemaVersion: 1, locks: [], nextCursor: null });
    expect(ok.err()).toBe("");

    const failed = bufferIo();
    expect(await main(["reconcile", "--json"], { io: failed, env: { DRYDOCK_DATA_DIR: root } })).toBe(3);
    expect(failed.out()).toBe("");
    expect(JSON.parse(failed.err())).toMatchObject({
      ok: false,
      error: { code: "environment_id_missing" },
      exitCode: 3,
    });
  });
});
