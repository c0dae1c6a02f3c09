// The Boat commands' suite (boats-suite.ts) on the postgres backend (a real PostgreSQL: the project's global
// setup starts one cluster; this file gets a database, each data directory a schema).
import { boatsSuite } from "./boats-suite.js";

boatsSuite("postgres");
