/**
 * One contender of the contended lock benchmark. argv: impl lockPath goFile durationMs.
 * Prints "ready", waits for the go file (so every contender starts together), loops acquire/release for
 * durationMs, then prints one JSON line { pid, count, waitsMs }.
 */
import { existsSync } from "node:fs";
import { type LockImpl, makeLocker } from "../lib/lock-impls.js";

const [impl, lockPath, goFile, durationArg] = process.argv.slice(2) as [LockImpl, string, string, string];
const durationMs = Number(durationArg);
const locker = makeLocker(impl, lockPath);
console.log("ready");
while (!existsSync(goFile)) await new Promise((r) => setTimeout(r, 2));
const waitsMs: number[] = [];
const end = performance.now() + durationMs;
while (performance.now() < end) {
  const t0 = performance.now();
  const release = await locker.acquire();
  waitsMs.push(performance.now() - t0);
  await release();
}
console.log(JSON.stringify({ pid: process.pid, count: waitsMs.length, waitsMs }));
