// One PostgreSQL cluster for the recovery-cli project (its postgres tests make a database each in it):
// test-kit's global setup, which also declares `inject`'s postgresUrl.
export { setup, teardown } from "../../../packages/test-kit/src/postgres-global-setup.js";
