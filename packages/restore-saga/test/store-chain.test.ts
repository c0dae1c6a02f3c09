/**
 * The prevHash chain on load. Each event file carries its own hash, and HEAD names the last event's hash;
 * neither catches an event in the MIDDLE of the chain that was replaced by another correctly hashed event:
 * its own hash verifies and HEAD still names the untouched last event. Only the check that every event's
 * `prevHash` is its predecessor's hash does. These tests forge exactly that, so that nothing but the
 * chain check can refuse it.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  canonicalJson,
  eventHash,
  isSagaError,
  openSagaStore,
  ownerDigest,
  type SagaError,
  type SagaEvent,
  type SagaState,
  type SagaStore,
} from "../src/index.js";
import { makeTempDir, removeDir } from "./helpers.js";

const HASH = `sha256:${"a".repeat(64)}`;
const HASH2 = `sha256:${"b".repeat(64)}`;
/** One fixed clock for every store: equal timestamps, so no forgery can be caught as "going back in time". */
const CLOCK = 1_767_225_600_000;
const ID = "op-chain";
const EVENT_3 = "000003-prepared.json";

let base: string;
let workspace: string;

beforeEach(() => {
  base = makeTempDir("store-chain");
  workspace = join(base, "workspace");
  fs.mkdirSync(workspace);
});

afterEach(() => {
  removeDir(base);
});

function open(stateDir: string): SagaStore {
  return openSagaStore({ stateDir: join(base, stateDir), workspaceRoot: workspace, now: () => CLOCK });
}

function owner(operationId: string) {
  return {
    version: 1 as const,
    pid: 4242,
    token: "0b0f3c55-5a2e-4b8e-9c53-5b0f5e8a1d11",
    createdAt: 1_700_000_000_000,
    payload: { transactionId: operationId, workspaceRoot: workspace, purpose: "checkpoint-restore" as const },
  };
}

async function step(store: SagaStore, saga: SagaState, phase: string, evidence: Record<string, unknown>) {
  return store.advance(saga.operationId, {
    expectedSeq: saga.seq,
    expectedHash: saga.headHash,
    phase: phase as never,
    evidence,
  });
}

/** created → locked → prepared → intent_committed, as the orchestrator journals them. */
async function fourEvents(store: SagaStore, actorPid = 77): Promise<SagaState> {
  let saga = await store.create(ID, {
    kind: "checkpoint-restore",
    checkpointId: "ckpt-1",
    checkpointManifestDigest: HASH,
    actorPid,
  });
  const o = owner(ID);
  saga = await step(store, saga, "locked", { workspaceLockOwner: o, lockOwnerDigest: ownerDigest(o) });
  saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 3 });
  return step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
}

/** The exact bytes the store writes an event as (canonical key order, two-space indent, newline). */
function eventBytes(event: SagaEvent): string {
  return `${JSON.stringify(JSON.parse(canonicalJson(event)), null, 2)}\n`;
}

function readEvent(path: string): SagaEvent {
  return JSON.parse(fs.readFileSync(path, "utf8")) as SagaEvent;
}

function snapshotDir(dir: string): Map<string, string> {
  return new Map(
    fs.readdirSync(dir).map((name) => [name, fs.readFileSync(join(dir, name)).toString("base64")]),
  );
}

async function corrupt(promise: Promise<unknown>): Promise<SagaError> {
  let result: unknown;
  try {
    result = await promise;
  } catch (error) {
    if (!isSagaError(error)) throw error;
    expect(error.code, error.message).toBe("CORRUPT");
    return error;
  }
  const phases = (result as SagaState).events.map((event) => event.phase).join(" → ");
  throw new Error(`expected CORRUPT, but the forged chain loaded: ${phases}`);
}

/**
 * Every way the chain is read must refuse it, and nothing in the directory may change: a load by the
 * store that wrote (and memoised) the chain, a load by a fresh store, and an advance (which loads first).
 */
async function expectRefused(writer: SagaStore, stateDir: string, forgedEvent: string): Promise<void> {
  const dir = join(writer.shardDir, ID);
  const before = snapshotDir(dir);
  for (const store of [writer, open(stateDir)]) {
    const error = await corrupt(store.load(ID));
    expect(error.message).toContain(forgedEvent);
    expect(error.message).toMatch(/chain/);
  }
  await corrupt(
    open(stateDir).advance(ID, {
      expectedSeq: 4,
      expectedHash: readEvent(join(dir, "000004-intent_committed.json")).hash,
      phase: "aborted",
      evidence: { recoveryAction: "abort-pre-intent", reason: "must not be written" },
    }),
  );
  expect(snapshotDir(dir)).toEqual(before);
}

describe("saga store: the prevHash chain on load", () => {
  it("refuses a middle event rewritten with other evidence and its own hash recomputed (CORRUPT)", async () => {
    const store = open("state");
    const saga = await fourEvents(store);
    const dir = join(store.shardDir, ID);
    const original = saga.events[2]!;

    const { hash: _old, ...body } = readEvent(join(dir, EVENT_3));
    body.evidence = { ...body.evidence, prestateDigest: HASH2 };
    const forged: SagaEvent = { ...body, hash: eventHash(body) };
    fs.writeFileSync(join(dir, EVENT_3), eventBytes(forged));

    // The forgery is consistent on its own: its hash verifies, it chains to event 2, its evidence is
    // valid, and HEAD (which names event 4) is untouched. Only event 4's prevHash tells.
    expect(forged.hash).not.toBe(original.hash);
    expect(forged.prevHash).toBe(saga.events[1]!.hash);
    expect(forged.timestamp).toBe(original.timestamp);
    expect(saga.events[3]!.prevHash).toBe(original.hash);

    await expectRefused(store, "state", "000004-intent_committed.json");
  });

  it("refuses a correctly hashed event of another saga copied into the same seq slot (CORRUPT)", async () => {
    // Two sagas with the same operation id and workspace (another state directory: a restored backup, a
    // second installation), identical from event 2 on except for what they chain to: the other one's
    // `created` names another actor.
    const store = open("state");
    const saga = await fourEvents(store, 77);
    const other = open("other-state");
    const twin = await fourEvents(other, 78);
    const dir = join(store.shardDir, ID);

    const foreign = fs.readFileSync(join(other.shardDir, ID, EVENT_3));
    const foreignEvent = JSON.parse(foreign.toString("utf8")) as SagaEvent;
    const { hash, ...body } = foreignEvent;
    expect(eventHash(body)).toBe(hash);
    expect(foreignEvent).toMatchObject({ operationId: ID, seq: 3, phase: "prepared" });
    expect(foreignEvent.evidence).toEqual(saga.events[2]!.evidence);
    expect(foreignEvent.timestamp).toBe(saga.events[2]!.timestamp);
    expect(foreignEvent.prevHash).toBe(twin.events[1]!.hash);
    expect(foreignEvent.prevHash).not.toBe(saga.events[1]!.hash);

    fs.writeFileSync(join(dir, EVENT_3), foreign);

    await expectRefused(store, "state", EVENT_3);
  });

  it("still loads the untouched chains (the forgeries above are the only difference)", async () => {
    const store = open("state");
    const saga = await fourEvents(store, 77);
    const twin = await fourEvents(open("other-state"), 78);
    const loaded = await open("state").load(ID);
    expect(loaded.headHash).toBe(saga.headHash);
    expect(loaded.events.map((event) => event.prevHash)).toEqual([
      null,
      ...saga.events.slice(0, -1).map((event) => event.hash),
    ]);
    expect((await open("other-state").load(ID)).headHash).toBe(twin.headHash);
  });
});
