// One PostgreSQL cluster for this vitest project: test-kit's global setup (it also declares `inject`'s
// postgresUrl, postgresPort and postgresPid).
export { setup, teardown } from "../../test-kit/src/postgres-global-setup.js";
