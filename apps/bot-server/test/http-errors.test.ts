import { LifecycleError } from "@drydock/boat-lifecycle";
import { LockError } from "@drydock/file-lock";
import { SagaError } from "@drydock/restore-saga";
import {
  asJournalError,
  busyFailure,
  corruptFailure,
  osFailure,
  StorageError,
  WORKSPACE_ERROR_STATUS,
  WorkspaceError,
  type WorkspaceErrorCode,
} from "@drydock/storage";
import { describe, expect, it } from "vitest";
import {
  HttpProblem,
  httpErrorCode,
  STORAGE_RETRY_AFTER_S,
  toHttpError,
  WORKSPACE_ERROR_CODES,
} from "../src/http-errors.js";
import { WorkspacePathIsDirectory } from "../src/workspace-files.js";

describe("httpErrorCode: the HTTP API's one casing", () => {
  it("maps a package's UPPER_SNAKE code to its lower snake form", () => {
    expect(httpErrorCode("WORKSPACE_LOCKED")).toBe("workspace_locked");
    expect(httpErrorCode("LOCK_TIMEOUT")).toBe("lock_timeout");
    expect(httpErrorCode("NOT_FOUND")).toBe("not_found");
    expect(httpErrorCode("CORRUPT")).toBe("corrupt");
    expect(httpErrorCode("LOCK_OWNER_UNVERIFIABLE")).toBe("lock_owner_unverifiable");
  });

  it("keeps a code already in lower snake case, and anything that is not UPPER_SNAKE, as it is", () => {
    expect(httpErrorCode("restore_running")).toBe("restore_running");
    expect(httpErrorCode("bot_busy")).toBe("bot_busy");
    expect(httpErrorCode("Mixed_Case")).toBe("Mixed_Case");
  });
});

describe("toHttpError answers every code in lower snake case", () => {
  it("a restore-saga error keeps its status, its code lower-cased", () => {
    const mapped = toHttpError(new SagaError({ code: "WORKSPACE_LOCKED", message: "held" }));
    expect(mapped.status).toBe(409);
    expect(mapped.body).toEqual({ ok: false, error: { code: "workspace_locked", message: "held" } });
  });

  it("a file-lock error too", () => {
    const mapped = toHttpError(new LockError({ code: "LOCK_TIMEOUT", message: "busy" }));
    expect(mapped.status).toBe(409);
    expect(mapped.body.error.code).toBe("lock_timeout");
  });

  it("an HttpProblem built from a package's code (a workspace guard) is lower-cased, its details kept", () => {
    const mapped = toHttpError(
      new HttpProblem(409, "RECOVERY_REQUIRED", "kept", { recoveryRequired: true, operationId: "op" }),
    );
    expect(mapped.body.error).toEqual({
      code: "recovery_required",
      message: "kept",
      details: { recoveryRequired: true, operationId: "op" },
    });
  });

  it("server and lifecycle codes, already lower snake case, are unchanged", () => {
    expect(toHttpError(new HttpProblem(409, "restore_running", "m")).body.error.code).toBe("restore_running");
    const lifecycle = new LifecycleError({ code: "computer_deleting", status: 409, message: "m" });
    expect(toHttpError(lifecycle).body.error.code).toBe("computer_deleting");
    expect(toHttpError(new WorkspacePathIsDirectory("d")).body.error.code).toBe("path_is_directory");
  });

  it("anything else is internal, its details kept out of the answer", () => {
    const mapped = toHttpError(new Error("secret /var/data"));
    expect(mapped.status).toBe(500);
    expect(mapped.body.error.code).toBe("internal");
    expect(mapped.body.error.message).not.toContain("secret");
  });
});

describe("storage faults at the HTTP edge", () => {
  const busy = busyFailure("/data/drydock.sqlite", 200);
  /** As the lifecycle surfaces a journal's refusal: recovery_paused over BOAT_CREATE_PAUSED over the fault. */
  const throughLifecycle = (fault: StorageError) => {
    const journal = asJournalError("create", fault) as Error;
    return new LifecycleError({ code: "recovery_paused", message: journal.message, cause: journal });
  };

  it("a StorageError answers its status and lower-snake code; a retryable one carries Retry-After", () => {
    const mapped = toHttpError(busy);
    expect(mapped).toEqual({
      status: 503,
      body: { ok: false, error: { code: "storage_busy", message: busy.message } },
      retryAfterS: STORAGE_RETRY_AFTER_S.busy,
    });
    const corrupt = toHttpError(corruptFailure("/data/drydock.sqlite", "integrity check: bad page"));
    expect([corrupt.status, corrupt.body.error.code, corrupt.retryAfterS]).toEqual([
      503,
      "storage_corrupt",
      undefined,
    ]);
  });

  it("below a journal's and the lifecycle's refusal, the client gets the storage's code and its message", () => {
    const mapped = toHttpError(throughLifecycle(busy));
    expect(mapped.status).toBe(503);
    expect(mapped.body.error.code).toBe("storage_busy");
    expect(mapped.body.error.message).toContain(busy.message);
    expect(mapped.body.error.message).toMatch(/^Cloud computer creation is paused: /);
    expect(mapped.retryAfterS).toBe(STORAGE_RETRY_AFTER_S.busy);
  });

  it("a write refused by the instance fence (STORAGE_FENCED) is 503 lease_lost, bare, below the lifecycle or the registry", () => {
    const fenced = new StorageError({
      code: "STORAGE_FENCED",
      retryable: true,
      message:
        "This server's write was refused: its instance no longer holds its lease. Nothing was written.",
    });
    const registry = new HttpProblem(503, "bots_paused", fenced.message);
    (registry as { cause?: unknown }).cause = fenced;
    for (const error of [fenced, throughLifecycle(fenced), registry]) {
      const mapped = toHttpError(error);
      expect([mapped.status, mapped.body.error.code, mapped.retryAfterS]).toEqual([
        503,
        "lease_lost",
        STORAGE_RETRY_AFTER_S.other,
      ]);
      expect(mapped.body.error.message).toContain("Nothing was written.");
    }
  });

  it("a full disk or an exhausted quota is 507 Insufficient Storage, whichever store refused", () => {
    for (const errno of ["ENOSPC", "EDQUOT"]) {
      const full = toHttpError(throughLifecycle(osFailure(errno, "/data/box-create-requests.json")));
      expect([full.status, full.body.error.code, full.retryAfterS]).toEqual([
        507,
        "storage_unavailable",
        STORAGE_RETRY_AFTER_S.other,
      ]);
      expect(full.body.error.message).toContain(`because the disk`);
      expect(full.body.error.message).toContain("Nothing was changed.");
      // The bot registry's refusal over the OS error, as bots.ts builds it.
      const registry = new HttpProblem(503, "bots_paused", "Bots cannot be changed: …");
      (registry as { cause?: unknown }).cause = Object.assign(new Error("no space"), { code: errno });
      expect([toHttpError(registry).status, toHttpError(registry).body.error.code]).toEqual([
        507,
        "bots_paused",
      ]);
    }
    // Any other OS refusal stays 503.
    expect(toHttpError(throughLifecycle(osFailure("EROFS", "/data/x"))).status).toBe(503);
  });
});

describe("the store's workspace refusals (postgres) at the HTTP edge", () => {
  it("answer the local workspace's codes where there is one, every WorkspaceError code mapped with its status", () => {
    const answer = (code: WorkspaceErrorCode) => {
      const mapped = toHttpError(new WorkspaceError(code, `refused: ${code}. Nothing was changed.`));
      return [mapped.status, mapped.body.error.code, mapped.body.error.message];
    };
    expect(answer("WORKSPACE_VERSION_CONFLICT")).toEqual([
      409,
      "workspace_version_conflict",
      "refused: WORKSPACE_VERSION_CONFLICT. Nothing was changed.",
    ]);
    expect(answer("WORKSPACE_FILE_NOT_FOUND").slice(0, 2)).toEqual([404, "file_not_found"]);
    expect(answer("WORKSPACE_CHECKPOINT_NOT_FOUND").slice(0, 2)).toEqual([404, "checkpoint_not_found"]);
    expect(answer("WORKSPACE_ID_CONFLICT").slice(0, 2)).toEqual([409, "workspace_id_conflict"]);
    expect(answer("WORKSPACE_FILE_TOO_LARGE").slice(0, 2)).toEqual([413, "file_too_large"]);
    expect(answer("WORKSPACE_INVALID_ARGUMENT").slice(0, 2)).toEqual([400, "invalid_path"]);
    // Every code of the store has its answer (a new one without a mapping fails here).
    expect(Object.keys(WORKSPACE_ERROR_CODES).sort()).toEqual(Object.keys(WORKSPACE_ERROR_STATUS).sort());
  });
});
