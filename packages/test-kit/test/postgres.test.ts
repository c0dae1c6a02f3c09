import { existsSync } from "node:fs";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { type PostgresServer, startPostgres } from "../src/postgres.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("startPostgres", () => {
  let server: PostgresServer | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it("runs a real server that terminates backends, survives an immediate restart, and stops without leftovers", async () => {
    server = await startPostgres();
    const url = await server.createDatabase();
    const client = new pg.Client({ connectionString: url, application_name: "kit-probe" });
    client.on("error", () => {});
    await client.connect();
    await client.query("CREATE TABLE t (v int); INSERT INTO t VALUES (7)");
    const ended = new Promise((resolve) => client.once("end", resolve));
    expect(await server.terminateBackends({ applicationName: "kit-probe" })).toBe(1);
    await ended;
    const before = server.pid();
    await server.restart({ mode: "immediate" });
    expect(server.pid()).not.toBe(before);
    expect(alive(before)).toBe(false);
    const again = new pg.Client({ connectionString: url });
    await again.connect();
    expect((await again.query("SELECT v FROM t")).rows).toEqual([{ v: 7 }]);
    expect((await again.query("SHOW fsync")).rows).toEqual([{ fsync: "on" }]);
    await again.end();
    const pid = server.pid();
    const { dataDir } = server;
    await server.stop();
    expect(alive(pid)).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
  });
});
