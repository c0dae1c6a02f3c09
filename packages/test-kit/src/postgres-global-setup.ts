// A vitest globalSetup: one PostgreSQL cluster for the project (each test file makes its own database in it,
// `createDatabaseAt(inject("postgresUrl"))`). If it cannot start, every test of the project fails with the
// reason: never a skip. A project lists it by path (vitest loads global setups outside the projects'
// @drydock/source resolution): `globalSetup: ["../../packages/test-kit/src/postgres-global-setup.ts"]`.

import type { TestProject } from "vitest/node";
import { type PostgresServer, startPostgres } from "./postgres.js";

declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
    postgresPort: number;
    postgresPid: number;
  }
}

let server: PostgresServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  server = await startPostgres();
  project.provide("postgresUrl", server.url);
  project.provide("postgresPort", server.port);
  project.provide("postgresPid", server.pid());
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
