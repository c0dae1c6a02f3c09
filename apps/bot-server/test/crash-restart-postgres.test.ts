// The crash-restart suite (crash-restart-suite.ts) on the postgres backend: a real PostgreSQL (the bot-server
// project's global setup starts one cluster; this file gets a database of its own, each data directory a
// schema). SIGKILLs at the lifecycle's crash points and at the storage's own (inside a transaction, before and
// after COMMIT); the restart is a new instance (new epoch), the killed one's lease lapses.
import { crashRestartSuite } from "./crash-restart-suite.js";
import { usePostgresDatabase } from "./helpers.js";

usePostgresDatabase();
crashRestartSuite("postgres");
