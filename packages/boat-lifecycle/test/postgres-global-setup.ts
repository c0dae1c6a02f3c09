// One PostgreSQL cluster for the boat-lifecycle project (the crash sweep and the provider-fault matrix make a
// database per run in it): test-kit's global setup, which also declares `inject`'s postgresUrl.
export { setup, teardown } from "../../test-kit/src/postgres-global-setup.js";
