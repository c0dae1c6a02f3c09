import { AsyncLocalStorage } from "node:async_hooks";
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import diagnosticsChannel from "node:diagnostics_channel";
import { connect, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import {
  BoatTransportError,
  classifyFetchFailure,
  createBoatClient,
  type FailureContext,
  isBoatTransportError,
  SendRefusedError,
} from "@drydock/boat-provider";
import { afterEach, describe, expect, it } from "vitest";
import { type AttemptProgress, createSendTracker } from "../src/transport.js";
import { BODY, type RawServer, rawServer, rejection } from "./helpers.js";

const base: FailureContext = {
  request: "POST /sandboxes",
  timedOut: false,
  aborted: false,
  sent: undefined,
  afterHeaders: false,
};
const fetchFailed = (cause: unknown): TypeError => new TypeError("fetch failed", { cause });
const errno = (code: string, message = code): Error => Object.assign(new Error(message), { code });

describe("classifyFetchFailure: one verdict per undici quirk", () => {
  it.each([
    ["ECONNREFUSED", "connect"],
    ["ENOTFOUND", "connect"],
    ["EAI_AGAIN", "connect"],
    ["EHOSTUNREACH", "connect"],
    ["ENETUNREACH", "connect"],
    ["UND_ERR_CONNECT_TIMEOUT", "connect"],
    ["CERT_HAS_EXPIRED", "connect"],
    ["ECONNRESET", "response"],
    ["EPIPE", "response"],
    ["UND_ERR_SOCKET", "response"],
    ["UND_ERR_HEADERS_TIMEOUT", "response"],
    ["UND_ERR_BODY_TIMEOUT", "response"],
  ])("fetch failed caused by %s → %s", (code, phase) => {
    const verdict = classifyFetchFailure(fetchFailed(errno(code)), base);
    expect(verdict).toBeInstanceOf(BoatTransportError);
    expect(verdict.phase).toBe(phase);
  });

  it("undici's own timeouts are reported as timedOut", () => {
    expect(classifyFetchFailure(fetchFailed(errno("UND_ERR_CONNECT_TIMEOUT")), base).timedOut).toBe(true);
    expect(classifyFetchFailure(fetchFailed(errno("UND_ERR_HEADERS_TIMEOUT")), base)).toMatchObject({
      phase: "response",
      timedOut: true,
    });
  });

  it("`terminated` / `other side closed` → response (outcome unknown)", () => {
    const terminated = new TypeError("terminated", { cause: errno("UND_ERR_SOCKET", "other side closed") });
    expect(classifyFetchFailure(terminated, base).phase).toBe("response");
  });

  it("happy-eyeballs AggregateError of refused connections → connect", () => {
    const aggregate = new AggregateError([errno("ECONNREFUSED"), errno("ECONNREFUSED")], "all failed");
    expect(classifyFetchFailure(fetchFailed(aggregate), base).phase).toBe("connect");
    const mixed = new AggregateError([errno("ECONNREFUSED"), errno("ECONNRESET")], "mixed");
    expect(classifyFetchFailure(fetchFailed(mixed), base).phase).toBe("response");
  });

  it("undici's `bad port` refusal → connect", () => {
    expect(classifyFetchFailure(fetchFailed(new Error("bad port")), base).phase).toBe("connect");
  });

  it("a body read error is response even with a connect-looking cause", () => {
    const verdict = classifyFetchFailure(fetchFailed(errno("ECONNREFUSED")), { ...base, afterHeaders: true });
    expect(verdict.phase).toBe("response");
  });

  it("once the request was written, nothing is connect", () => {
    expect(classifyFetchFailure(fetchFailed(errno("ECONNREFUSED")), { ...base, sent: true }).phase).toBe(
      "response",
    );
  });

  it("our timeout: connect only when undici proved it never wrote the request", () => {
    const abort = new DOMException("aborted", "AbortError");
    expect(classifyFetchFailure(abort, { ...base, timedOut: true, sent: false })).toMatchObject({
      phase: "connect",
      timedOut: true,
    });
    expect(classifyFetchFailure(abort, { ...base, timedOut: true, sent: true })).toMatchObject({
      phase: "response",
      timedOut: true,
    });
    // An injected fetch that reports nothing: unknown progress is never "not sent".
    expect(classifyFetchFailure(abort, { ...base, timedOut: true, sent: undefined }).phase).toBe("response");
  });

  it("a dispatcher's SendRefusedError → connect only when undici also proved it never wrote the request", () => {
    const refused = fetchFailed(new SendRefusedError("this server's instance lease has passed"));
    const verdict = classifyFetchFailure(refused, { ...base, sent: false });
    expect(verdict).toMatchObject({ phase: "connect", code: "transport_connect_failed", timedOut: false });
    expect(verdict.message).toBe(
      "POST /sandboxes was not sent to boat.dev, so nothing changed there: this server's instance lease has passed",
    );
    // Written, or progress unknown: the refusal proves nothing about this request.
    expect(classifyFetchFailure(refused, { ...base, sent: true }).phase).toBe("response");
    expect(classifyFetchFailure(refused, { ...base, sent: undefined }).phase).toBe("response");
    // Undici itself wraps the abort reason no deeper than this; a code alone (no class) still counts.
    const bare = Object.assign(new Error("refused"), { code: "ERR_DRYDOCK_SEND_REFUSED" });
    expect(classifyFetchFailure(fetchFailed(bare), { ...base, sent: false })).toMatchObject({
      phase: "connect",
      message: expect.stringContaining("a dispatcher refused to send it"),
    });
  });

  it("an unknown error shape → response", () => {
    expect(classifyFetchFailure(new Error("weird"), base).phase).toBe("response");
    expect(classifyFetchFailure("a string", base).phase).toBe("response");
  });
});

let raw: RawServer | undefined;
const children: ChildProcess[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const child of children.splice(0)) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  await raw?.close();
  raw = undefined;
});

describe("timeouts and aborts over real sockets", () => {
  it("timed out after the request was sent (server holds it): response, timedOut", async () => {
    let seen = 0;
    raw = await rawServer(() => {
      seen += 1; // never answers
    });
    const client = createBoatClient({ baseUrl: raw.url, token: "t", timeoutMs: 1_000 });
    const error = await rejection(client.createSandbox(BODY, { idempotencyKey: randomUUID() }));
    expect(isBoatTransportError(error)).toBe(true);
    expect(error).toMatchObject({ phase: "response", timedOut: true, aborted: false });
    expect(seen).toBe(1);
  });

  it("timed out before the connection was established (accept queue full): connect, timedOut", async () => {
    const fixture = fileURLToPath(new URL("./fixtures/stalled-listener.ts", import.meta.url));
    const child = spawn(process.execPath, ["--conditions=@drydock/source", "--import", "tsx", fixture], {
      detached: true,
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.push(child);
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout?.once("data", (chunk: Buffer) => resolve(Number(String(chunk).trim())));
      child.once("exit", () => reject(new Error("listener exited")));
    });
    process.kill(-(child.pid as number), "SIGSTOP");
    // Fill the accept queue of the stopped listener until one more connection no longer completes.
    let full = false;
    for (let i = 0; i < 2_000 && !full; i += 1) {
      const socket = connect(port, "127.0.0.1");
      socket.on("error", () => undefined);
      sockets.push(socket);
      full = !(await new Promise<boolean>((resolve) => {
        // Generous, so a slow but successful connect on a loaded machine is not mistaken for a full queue.
        const timer = setTimeout(() => resolve(false), 1_000);
        socket.once("connect", () => {
          clearTimeout(timer);
          resolve(true);
        });
      }));
    }
    expect(full).toBe(true);
    const client = createBoatClient({
      baseUrl: `http://127.0.0.1:${port}/api/v1`,
      token: "t",
      timeoutMs: 300,
    });
    const error = await rejection(client.createSandbox(BODY, { idempotencyKey: randomUUID() }));
    expect(isBoatTransportError(error)).toBe(true);
    expect(error).toMatchObject({ phase: "connect", timedOut: true, code: "transport_connect_failed" });
  });

  it("the caller's signal aborts a sent request: response, aborted, not timedOut", async () => {
    const controller = new AbortController();
    // Abort only once the server holds the request: it was certainly sent.
    raw = await rawServer(() => controller.abort(new Error("user cancelled")));
    const client = createBoatClient({ baseUrl: raw.url, token: "t", timeoutMs: 10_000 });
    const pending = client.getSandbox("bx_abcdefgh", { signal: controller.signal });
    const error = await rejection(pending);
    expect(error).toMatchObject({ phase: "response", aborted: true, timedOut: false });
  });

  it("an already aborted signal sends nothing: connect, aborted", async () => {
    let seen = 0;
    raw = await rawServer((_req, res) => {
      seen += 1;
      res.end();
    });
    const client = createBoatClient({ baseUrl: raw.url, token: "t" });
    const error = await rejection(client.deleteSandbox("bx_abcdefgh", { signal: AbortSignal.abort() }));
    expect(error).toMatchObject({ phase: "connect", aborted: true });
    expect(seen).toBe(0);
  });

  it("a timeout in an injected fetch that reports no progress is treated as outcome unknown", async () => {
    const hanging = (_input: string, init: RequestInit): Promise<Response> =>
      new Promise((_resolve, reject) => {
        init.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      });
    const client = createBoatClient({
      baseUrl: "http://boat.invalid/api/v1",
      token: "t",
      fetch: hanging,
      timeoutMs: 50,
    });
    const error = await rejection(client.listSandboxes());
    expect(error).toMatchObject({ phase: "response", timedOut: true });
  });

  it("an injected fetch's synchronous-looking refusal is classified by its cause", async () => {
    const refusing = (): Promise<Response> => Promise.reject(fetchFailed(errno("ECONNREFUSED")));
    const client = createBoatClient({ baseUrl: "http://boat.invalid/api/v1", token: "t", fetch: refusing });
    expect(await rejection(client.listSandboxes())).toMatchObject({ phase: "connect", timedOut: false });
  });

  it("an injected fetch that throws synchronously still yields a typed error", async () => {
    const throwing = (): Promise<Response> => {
      throw fetchFailed(errno("ENOTFOUND"));
    };
    const client = createBoatClient({ baseUrl: "http://boat.invalid/api/v1", token: "t", fetch: throwing });
    expect(await rejection(client.getSandbox("bx_abcdefgh"))).toMatchObject({ phase: "connect" });
  });

  it("a body read that times out after the headers arrived: response, timedOut", async () => {
    raw = await rawServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"ok":true,');
    });
    const client = createBoatClient({ baseUrl: raw.url, token: "t", timeoutMs: 1_000 });
    expect(await rejection(client.listSandboxes())).toMatchObject({ phase: "response", timedOut: true });
  });
});

describe("createSendTracker: its AsyncLocalStorage lives only while an attempt is in flight", () => {
  /** Counts disable() calls (an enabled AsyncLocalStorage keeps Node's promise hooks on process-wide). */
  class CountingStorage extends AsyncLocalStorage<AttemptProgress> {
    disabled = 0;
    override disable(): void {
      this.disabled += 1;
      super.disable();
    }
  }
  const announce = (request: object) =>
    diagnosticsChannel.channel("undici:request:create").publish({ request });

  it("disabled when the last overlapping attempt ends, never under one still running; enabled again by the next", async () => {
    const storage = new CountingStorage();
    const tracker = createSendTracker(storage);
    let releaseA: () => void = () => {};
    const a = tracker.track(() => new Promise<void>((resolve) => (releaseA = resolve)));
    let openB: () => void = () => {};
    const gateB = new Promise<void>((resolve) => (openB = resolve));
    // B announces its request only after A has ended: it must still be attributed to B.
    const b = tracker.track(async () => {
      await gateB;
      announce({});
    });
    releaseA();
    await a.result;
    expect(storage.disabled).toBe(0);
    openB();
    await b.result;
    expect(b.progress()).toBe(false); // observed (announced in B's context), not yet written
    expect(a.progress()).toBeUndefined();
    expect(storage.disabled).toBe(1);

    // The next attempt after the storage was disabled is tracked as before.
    const c = tracker.track(async () => {
      await Promise.resolve();
      announce({});
    });
    await c.result;
    expect(c.progress()).toBe(false);
    expect(storage.disabled).toBe(2);
  });

  it("an attempt whose fetch throws synchronously also ends its share", async () => {
    const storage = new CountingStorage();
    const tracker = createSendTracker(storage);
    const attempt = tracker.track((): Promise<void> => {
      throw new Error("refused at once");
    });
    await expect(attempt.result).rejects.toThrow("refused at once");
    expect(storage.disabled).toBe(1);
  });
});
