// The crash-restart suite (crash-restart-suite.ts) on the default backend, file (today's JSON files).
import { crashRestartSuite } from "./crash-restart-suite.js";

crashRestartSuite("file");
