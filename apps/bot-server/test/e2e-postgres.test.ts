// The end-to-end suite (e2e-suite.ts) on the postgres backend: a real PostgreSQL (the bot-server project's
// global setup starts one cluster; this file gets a database of its own, each data directory a schema).
import { e2eSuite } from "./e2e-suite.js";
import { usePostgresDatabase } from "./helpers.js";

usePostgresDatabase();
e2eSuite("postgres");
